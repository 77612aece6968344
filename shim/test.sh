#!/usr/bin/env bash
# Grades a task with its Python verifier: verifier.py beside this file defines verify(), which the
# runner beside it calls; the runner writes reward.json into $VERIFIER_LOGS_DIR (/logs/verifier by
# default). NeMo Gym runs this file with bash, stock Harbor runs it directly; both work. It finds
# its siblings from its own path, and verify() sees the working directory (the runner enters it
# again: the interpreter starts in /, see below).
exec 2>&1
# The globs below see every name, whatever shell options the environment passes (stock Harbor
# passes a task's env to this shell; bash takes BASHOPTS and SHELLOPTS from it, never GLOBIGNORE's
# effect).
shopt -u failglob
set +euf
# $0, never BASH_SOURCE or BASH: bash takes those from its environment as plain variables (as it
# does EUID), where a task's env could name the workspace.
case "$0" in
  */*) here="${0%/*}" ;;
  *) here=. ;;
esac
case "$here" in /*) ;; *) here="$PWD/$here" ;; esac  # the interpreter starts in / (below)
# gym_runner.py exits with this status when the interpreter is older than 3.8 (keep in sync).
too_old=86
# What root may run: programs of folders only root can change (the system's own PATH; not /usr/local,
# which an image may open to a group or to the agent: red team 67).
system_path=/usr/sbin:/usr/bin:/sbin:/bin
tried=""

# The working directory's device and inode: the same folder, however it was entered again.
folder_id() {
  PATH=$system_path LC_ALL=C exec stat -c '%d:%i' -- . 2>/dev/null
}

# The lines of "$2" into the array named "$1", split in memory: a here-string is a file in $TMPDIR
# (bash before 5.1, or text past a pipe's size) that bash opens again by name, and whoever may
# rename in that folder could swap it for lines of their own (red team 40). Empty lines are dropped.
split_lines() {
  local IFS=$'\n'
  set -f
  eval "$1=(\$2)"
  set +f
}

# Whether this shell's user may start "$1/$2": "$1", the folder above it (where a venv keeps its pyvenv.cfg) and
# the interpreter belong to root and nobody else can write them, and every folder further up
# belongs to root and nobody else can rename what is in it: so nobody else can have swapped a
# folder for a link, planted a pyvenv.cfg or replaced the interpreter. The same holds for the
# standard library, whose encodings runs as the interpreter starts: Python looks for
# lib/python3.X/os.py (or lib64/) from the interpreter's folder up, and for lib-dynload on its own,
# so every lib/, lib64/ and python3* in them of "$1" and of each folder above is checked, os.py or
# not (whoever owns a library can remove its os.py, and Python then falls back on the folder it was
# built for). A sticky folder further up (/tmp) is allowed only where Python never searches up from
# here, where another user could make lib/ later: a venv (it searches from its home), or a link
# into another folder (from the target's, which is not checked). One stat call, on the path as
# written (Python finds pyvenv.cfg by it), exec'd by the command substitution's subshell rather
# than forked once more (in the C locale: its words are matched below), after that subshell printed
# the folder's physical path; the rest is builtins.
# Status 2: the folder is the working directory or inside it, however PATH spells it (//, a link).
# "Root" above is root or the shell's own user ($me): one that runs as its own user (stock Harbor's
# [verifier].user) trusts what it owns as root's, and nothing of another user's (the agent's venv in
# /app/.venv, first on PATH, ran the agent's .pth in the runner: red team 63).
may_run() {
  local dir=${1%/*} above=() libs=() lib std venv="" lenient=1 same="" line lines=() index=0 special mode modes physical real=() real_modes count=0 TMOUT=
  while [ -n "$dir" ]; do above+=("$dir"); dir=${dir%/*}; done
  for dir in "$1" "${above[@]}" ""; do  # "": the root folder's
    for lib in "$dir/lib" "$dir/lib64"; do
      [ -d "$lib" ] || continue
      libs+=("$lib/.")  # /. : a link's target is stat'ed
      for std in "$lib"/python3*; do  # a folder, or a file such as python3XY.zip (first on sys.path)
        if [ -d "$std" ]; then libs+=("$std/."); elif [ -L "$std" ]; then return 1; elif [ -e "$std" ]; then libs+=("$std"); fi
      done
    done
  done
  for dir in "$1" "${1%/*}"; do
    [ -L "$dir/pyvenv.cfg" ] && return 1  # stat would print "symbolic link", skipped below; Python reads the target
    [ -e "$dir/pyvenv.cfg" ] && libs+=("$dir/pyvenv.cfg") && venv=1
  done
  # A build tree (3.11+: pybuilddir.txt; all: Modules/Setup.local) takes its library from Lib/ and build/.
  [ -e "$1/pybuilddir.txt" ] || [ -e "$1/Modules" ] || [ -L "$1/Modules" ] && return 1
  [ -n "$venv" ] || [ -L "$1/$2" ] && lenient=$((${#above[@]} + 1))  # the last line a sticky folder may be
  modes=$(cd -P -- "$1" 2>/dev/null && printf '%s\n' "$PWD" \
    && PATH=$system_path LC_ALL=C exec stat -c '%u %a %F' -- "$1" "${above[@]}" "$1/$2" "${libs[@]}" 2>/dev/null) \
    || return 1
  physical=${modes%%$'\n'*}
  modes=${modes#*$'\n'}
  # A link on the way (a folder link, or merged /bin -> usr/bin): the folders it leads to, and each one
  # above them, must be root's, and nobody else may rename what is in them (sticky is enough: the
  # entries are root's); else the target could be swapped once checked. One more stat, only then.
  if [ "$physical" != "$1" ]; then
    dir=$physical
    while [ -n "$dir" ]; do real+=("$dir"); dir=${dir%/*}; done
    real_modes=$(PATH=$system_path LC_ALL=C exec stat -c '%u %a' -- "${real[@]}" / 2>/dev/null) || return 1
    split_lines lines "$real_modes"
    for line in "${lines[@]}"; do
      count=$((count + 1))
      [ "${line%% *}" = "$me" ] && line="0 ${line#* }"
      case "$line" in
        "0 "[0-7][0-7][0-7]) (( (8#${line:2} & 8#022) == 0 )) || return 1 ;;
        "0 "[0-7][0-7][0-7][0-7]) (( (8#${line:3} & 8#022) == 0 || (${line:2:1} & 1) )) || return 1 ;;
        *) return 1 ;;
      esac
    done
    [ "$count" -ge 2 ] || return 1
  fi
  while :; do  # its physical path has no link: its ancestors by name are its real ones
    [ "${physical:-/}" -ef . ] && return 2
    [ -n "$physical" ] && [ "$physical" != / ] || break
    physical=${physical%/*}
  done
  split_lines lines "$modes"
  for line in "${lines[@]}"; do
    index=$((index + 1))
    [ "${line%% *}" = "$me" ] && line="0 ${line#* }"
    case "$line" in
      "0 "*" symbolic link") continue ;;
      "0 "[0-7][0-7][0-7]" "*) special=0 mode=${line:2:3} ;;
      "0 "[0-7][0-7][0-7][0-7]" "*) special=${line:2:1} mode=${line:3:3} ;;
      *) return 1 ;;
    esac
    (( (8#$mode & 8#022) == 0 )) && continue
    # Writable by others: only a sticky folder above the interpreter's folder and the one above it.
    [ "$index" -gt 2 ] && [ "$index" -le "$lenient" ] && (( special & 1 )) || return 1
    # Only then (rare): a link to a file of this same folder (python3 -> python3.X) is no link here.
    [ -n "$venv" ] || [ -n "$same" ] && continue
    same=1
    for same in "$1"/* "$1"/.[!.]*; do [ -L "$same" ] || ! [ "$same" -ef "$1/$2" ] || return 1; done
  done
  [ "$index" = $((${#above[@]} + ${#libs[@]} + 2)) ] || return 1
  # What a link leads to is its owner's, this user's (-O) or else root's (one more stat, only then).
  [ -O "$1/$2" ] || { [ "$me" != 0 ] && [ "$(PATH=$system_path LC_ALL=C exec stat -L -c %u -- "$1/$2" 2>/dev/null)" = 0 ]; }
}

# Which user this shell runs as, from the kernel: bash takes EUID from its environment, which a
# task's env may set (a root shell that read 1000 there skipped the checks below). Root when
# /proc cannot say: the stricter checks.
me=0
while IFS=$' \t' read -r key _ effective _; do
  if [ "$key" = Uid: ]; then me=$effective; break; fi
done < /proc/self/status 2>/dev/null

# The interpreter comes from PATH, but never from a relative entry (it would resolve inside the
# working directory, the agent's) and only where may_run allows, outside the
# working directory.
for python in python3 python; do
  found=""
  rest="${PATH:-}:"
  while [ -n "$rest" ]; do
    dir="${rest%%:*}"
    rest="${rest#*:}"
    case "$dir" in /*) ;; *) continue ;; esac
    case "$dir" in */..|*/../*) continue ;; esac  # "${1%/*}" would not be the folder above
    while :; do  # no trailing / or /. (Python drops them): may_run takes "${dir%/*}" as the folder above
      case "$dir" in
        */.) dir=${dir%/.} ;;
        ?*/) dir=${dir%/} ;;
        *) break ;;
      esac
    done
    [ -f "$dir/$python" ] && [ -x "$dir/$python" ] || continue
    may_run "$dir" "$python"
    case $? in
      0) ;;
      2) tried="$tried $dir/$python is inside the working directory;"; continue ;;
      *) tried="$tried $dir/$python is in a folder, or has a standard library, another user can change;"; continue ;;
    esac
    found="$dir/$python"
    break
  done
  if [ -z "$found" ]; then
    tried="$tried $python is not on PATH;"
    continue
  fi
  # -E: no PYTHON* variable acts before the runner; -S: site-packages are added by the runner, once it
  # has checked them (it honours PYTHONPATH itself, after them); -s: no user site-packages; -B: /tests
  # is fresh every run, so no .pyc. The script's folder goes first on sys.path, the working directory
  # not at all.
  # The interpreter starts with the system's PATH, since it may be a script (a pyenv shim's
  # `#!/usr/bin/env bash` would otherwise find the agent's bash first); the runner gives verify
  # the task's PATH back.
  # It starts in /, never the working directory: a version manager's shim (asdf's, mise's, pyenv's)
  # chooses the interpreter from files it finds from its working directory up, the agent's (asdf's
  # .tool-versions may name any folder: red team 66). gym_runner.py enters the working directory again
  # through descriptor 9, opened on it here, so no path the agent could swap meanwhile is followed. A
  # folder this user may enter but not read (0711) cannot be opened: then by its physical path, and
  # only if it is still the same folder (device and inode, one stat). It used to start the interpreter
  # right there, and asdf's shim found the agent's .tool-versions by name (red team 68).
  # What was passed over on the way: the author's clue when this image grades differently elsewhere.
  [ -z "$tried" ] || echo "verifier note: using $found; passed over:$tried"
  cwd_fd="" cwd_path="" cwd_id=""
  if { exec 9<.; } 2>/dev/null; then
    cwd_fd=9
  else
    cd -P . 2>/dev/null && cwd_path=$PWD \
      && cwd_id=$(folder_id) && [ -n "$cwd_id" ] \
      || { tried="$tried the working directory cannot be opened;"; break; }
  fi
  cd / || { tried="$tried / cannot be entered;"; break; }
  NEMO_GYM_CWD_FD=$cwd_fd NEMO_GYM_CWD=$cwd_path NEMO_GYM_CWD_ID=$cwd_id NEMO_GYM_PATH=${PATH:-} PATH=$system_path \
    "$found" -E -S -s -B "$here/gym_runner.py"
  status=$?
  [ "$status" -eq "$too_old" ] || exit "$status"
  tried="$tried $python is too old;"
  # Back in the working directory for the next interpreter's checks; failing that, none is started and
  # the reward files are removed below, as when none is found.
  if [ -n "$cwd_fd" ]; then
    cd /proc/self/fd/9 || { tried="$tried the working directory cannot be entered again;"; break; }
  else
    cd -- "$cwd_path" && [ "$(folder_id)" = "$cwd_id" ] \
      || { tried="$tried the working directory cannot be entered again;"; break; }
  fi
done
logs="${VERIFIER_LOGS_DIR:-/logs/verifier}"
echo "verifier error: no Python 3.8 or newer found (tried python3, then python:$tried PATH=${PATH:-}); no reward written"
exec 3>&-
PATH=$system_path rm -f -- "$logs/reward.json" "$logs/reward.txt"
exit 127
