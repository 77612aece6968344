#!/bin/bash
# Partial credit: each check is worth a share of the reward, and reward.json keeps every check.

mkdir -p /logs/verifier

run_check() {
  if python3 /tests/checks.py "$1"; then echo 1; else echo 0; fi
}

exists=$(run_check exists)
valid_json=$(run_check valid_json)
counts=$(run_check counts)
total=$(run_check total)
passed=$((exists + valid_json + counts + total))

cat > /logs/verifier/reward.json <<JSON
{"reward": $(python3 -c "print($passed / 4)"), "file_exists": $exists, "valid_json": $valid_json, "counts_match": $counts, "total_matches": $total}
JSON
cat /logs/verifier/reward.json
