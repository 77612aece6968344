#!/bin/bash
source /tests/helpers.sh

check "greet.sh is executable" test -x /app/greet.sh
check "greet.sh prints hello" test "$(/app/greet.sh 2>/dev/null)" = hello
write_reward
