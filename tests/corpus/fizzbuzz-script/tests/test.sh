#!/bin/bash
# Compares the script's output with the expected file; a missing reward counts as 0.

fallback() {
  [ -s /logs/verifier/reward.txt ] || echo 0 > /logs/verifier/reward.txt
}
trap fallback EXIT

mkdir -p /logs/verifier

bash /app/fizzbuzz.sh 20 > /tmp/fizzbuzz-actual.txt 2>/tmp/fizzbuzz-stderr.txt
status=$?
cat /tmp/fizzbuzz-stderr.txt

if [ $status -eq 0 ] && diff -u /tests/expected_20.txt /tmp/fizzbuzz-actual.txt; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
