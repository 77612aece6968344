#!/bin/bash
# The checks live in a Python helper; its exit status is the reward.

python3 /tests/check_wc.py
if [ $? -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
