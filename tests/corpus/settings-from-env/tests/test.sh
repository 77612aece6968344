#!/bin/bash
# Reads the expected values from [verifier].env and the sandbox's [environment].env.

mkdir -p /logs/verifier
python3 - <<'PY'
import configparser
import os
import sys

parser = configparser.ConfigParser()
if not parser.read("/opt/service/settings.ini"):
    print("FAIL: /opt/service/settings.ini is missing")
    sys.exit(1)
expected = {
    "name": os.environ["EXPECTED_NAME"],
    "port": os.environ["EXPECTED_PORT"],
    "environment": os.environ["DEPLOY_ENV"],
}
got = dict(parser["service"]) if parser.has_section("service") else {}
if got != expected:
    print(f"FAIL: expected {expected}, got {got}")
    sys.exit(1)
print("PASS: settings.ini matches")
PY
if [ $? -eq 0 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
