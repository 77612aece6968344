#!/bin/bash
# Standard-library unittest, no installs: the image has python3 and nothing else.

mkdir -p /logs/verifier
python3 /tests/calc_spec.py -v && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt
