#!/bin/bash
# Grades the export the collect hook took, not the live file.

mkdir -p /logs/verifier
python3 /tests/check_export.py /tmp/inventory-export.json /tmp/app-listing.txt
status=$?
echo "check_export.py exited with $status"
if [ $status -eq 0 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
