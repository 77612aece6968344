#!/bin/bash
# A wrong or slow program scores 0; `timeout` keeps a slow one from eating the verifier's budget.

mkdir -p /logs/verifier
echo 0 > /logs/verifier/reward.txt

expect() {
  local n=$1 want=$2 got
  got=$(timeout 3 python3 /app/primes.py "$n")
  local status=$?
  if [ $status -eq 124 ]; then
    echo "FAIL: primes below $n took more than 3 seconds"
    return 1
  fi
  if [ "$got" != "$want" ]; then
    echo "FAIL: primes below $n: expected $want, got '$got' (exit $status)"
    return 1
  fi
  echo "PASS: primes below $n = $got"
}

expect 2 0 && expect 10 4 && expect 100 25 && expect 2000000 148933 && echo 1 > /logs/verifier/reward.txt
