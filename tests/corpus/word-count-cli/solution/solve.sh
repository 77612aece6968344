#!/bin/bash
set -euo pipefail

# The reference program ships beside this script, in /solution.
cp /solution/wc.py /app/wc.py
