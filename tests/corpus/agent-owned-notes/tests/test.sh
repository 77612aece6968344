#!/bin/bash
# Runs as root (no [verifier].user), so it can read the agent's private file.

mkdir -p /logs/verifier
failed=0
check() {
  if eval "$2"; then echo "PASS: $1"; else echo "FAIL: $1"; failed=1; fi
}

check "whoami.txt names the agent user" '[ "$(cat /app/whoami.txt 2>/dev/null)" = agent ]'
check "notes/todo.txt exists" '[ -f /app/notes/todo.txt ]'
check "todo.txt has the three items" '[ "$(cat /app/notes/todo.txt 2>/dev/null)" = "$(printf "buy milk\ncall bob\nship release")" ]'
check "todo.txt belongs to agent" '[ "$(stat -c %U /app/notes/todo.txt 2>/dev/null)" = agent ]'
check "todo.txt has mode 600" '[ "$(stat -c %a /app/notes/todo.txt 2>/dev/null)" = 600 ]'

if [ $failed -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
