#!/usr/bin/env bash
# A plain Harbor verifier: runs from the working directory, writes /logs/verifier/reward.txt.
if [ "$(cat hello.txt 2>/dev/null)" = "Hello, world!" ]; then
  echo "hello.txt is right"
  echo 1 > /logs/verifier/reward.txt
else
  echo "hello.txt is missing or wrong"
  echo 0 > /logs/verifier/reward.txt
fi
