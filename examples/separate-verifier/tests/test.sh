#!/usr/bin/env bash
# Runs in a sandbox of its own: /workspace holds the agent's copy, the rest is the image as built.
# The agent's add.sh runs as nobody, never as this script's user (root): as root, it could write the
# reward file itself and stop this script before it writes its own (red team 95).
reward=1
for case in "2 3 5" "-4 4 0" "40 2 42"; do
  set -- $case
  got=$(setpriv --reuid=65534 --regid=65534 --clear-groups bash /workspace/add.sh "$1" "$2" 2>&1)
  if [ "$got" = "$3" ]; then echo "ok: $1 + $2 = $got"; else echo "wrong: $1 + $2 gave '$got', not $3"; reward=0; fi
done
echo "$reward" > /logs/verifier/reward.txt
