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
# The interpreter comes from PATH, but only from a folder the agent cannot have planted one in:
# never a relative entry (it would resolve inside the working directory, the agent's), and, for
# root, only a root-owned, non-sticky folder outside the working directory holding a root-owned
# interpreter. Builtins only: this runs before every verification.
for python in python3 python; do
  found=""
  rest="${PATH:-}:"
  while [ -n "$rest" ]; do
    dir="${rest%%:*}"
    rest="${rest#*:}"
    case "$dir" in /*) ;; *) continue ;; esac
    [ -f "$dir/$python" ] && [ -x "$dir/$python" ] || continue
    if [ "${EUID:-0}" = 0 ]; then
      case "$dir/" in "${PWD%/}"/*) tried="$tried $dir/$python is inside the working directory;"; continue ;; esac
      if [ ! -O "$dir" ] || [ -k "$dir" ] || [ ! -O "$dir/$python" ]; then
        tried="$tried $dir/$python is not in a folder only root can write;"
        continue
      fi
    fi
    found="$dir/$python"
    break
  done
  if [ -z "$found" ]; then
    tried="$tried $python is not on PATH;"
    continue
  fi
  # -E: no PYTHON* variable acts before the runner (it honours PYTHONPATH itself, after the
  # standard library); -s: no user site-packages; -B: /tests is fresh every run, so no .pyc.
  # The script's folder goes first on sys.path, the working directory not at all.
  "$found" -E -s -B "$here/gym_runner.py"
  status=$?
  [ "$status" -eq "$too_old" ] || exit "$status"
  tried="$tried $python is too old;"
done
logs="${VERIFIER_LOGS_DIR:-/logs/verifier}"
echo "verifier error: no Python 3.8 or newer found (tried python3, then python:$tried PATH=${PATH:-}); no reward written"
rm -f -- "$logs/reward.json" "$logs/reward.txt"
exit 127
