#!/bin/bash
source /tests/helpers.sh

check "config.txt came with the step" test -f /app/config.txt
check "setup.sh ran and removed itself" test ! -e /app/setup.sh
check "greet.sh prints the expected greeting" test "$(/app/greet.sh 2>/dev/null)" = "$(cat /tests/expected.txt)"
check "greet.sh agrees with the step's verifier env" test "$(/app/greet.sh 2>/dev/null)" = "$EXPECTED_GREETING"

# It must read config.txt each time, not hard-code the name.
cp /app/config.txt /tmp/config.txt.orig
sed -i 's/^name=.*/name=Grace/' /app/config.txt
check "greet.sh follows config.txt" test "$(/app/greet.sh 2>/dev/null)" = "Good morning, Grace!"
cp /tmp/config.txt.orig /app/config.txt

write_reward
