#!/bin/bash
# No test framework: one check, and the reward is its exit status.

mkdir -p /logs/verifier

if [ -f /app/hello.txt ] && [ "$(cat /app/hello.txt)" = "Hello, world!" ]; then
  echo "PASS: /app/hello.txt says hello"
  echo 1 > /logs/verifier/reward.txt
else
  echo "FAIL: /app/hello.txt is missing or says something else"
  echo 0 > /logs/verifier/reward.txt
fi
