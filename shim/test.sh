#!/usr/bin/env bash
# Grades a task with its Python verifier: verifier.py beside this file defines verify(), which the
# runner beside it calls; the runner writes reward.json into $VERIFIER_LOGS_DIR (/logs/verifier by
# default). NeMo Gym runs this file with bash, stock Harbor runs it directly; both work. It finds
# its siblings from its own path and never changes directory: verify() sees the working directory.
exec 2>&1
case "${BASH_SOURCE[0]}" in
  */*) here="${BASH_SOURCE[0]%/*}" ;;
  *) here=. ;;
esac
# gym_runner.py exits with this status when the interpreter is older than 3.8 (keep in sync).
too_old=86
tried=""
for python in python3 python; do
  if ! command -v "$python" >/dev/null 2>&1; then
    tried="$tried $python is not on PATH;"
    continue
  fi
  # -s: no user site-packages. The script's folder goes first on sys.path, the working directory not at all.
  "$python" -s "$here/gym_runner.py"
  status=$?
  [ "$status" -eq "$too_old" ] || exit "$status"
  tried="$tried $python is too old;"
done
logs="${VERIFIER_LOGS_DIR:-/logs/verifier}"
echo "verifier error: no Python 3.8 or newer found (tried python3, then python:$tried PATH=$PATH); no reward written"
rm -f -- "$logs/reward.json" "$logs/reward.txt"
exit 127
