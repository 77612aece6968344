# Shared by _grading.sh (finish) and the reaper of a hook or a check that outlived its bound
# (bounded.py): stop everything, kill what started since tick $started, let the rest go on.
# KILL_STRAYS=1 lets thaw wake what kill_strays stopped; SPARE_ROOT=1 spares root's processes.

# The processes kill_strays left stopped go on. Until then none can change what finish reads: an
# agent's process with the verifier's uid, its working directory in a folder of $LOGS it made during
# the run, could swap a file there for a folder or a FIFO between finish's look and its copy, and have
# the copy fail (a masked sample) or wait forever (red team 39).
thaw() {
  [ "$KILL_STRAYS" = 1 ] && kill -CONT -1 2>/dev/null
  return 0
}

# Whether the process in folder "$1" is root's (its real uid, from the kernel's status file).
root_process() {
  local key real
  while IFS=$' \t' read -r key real _; do
    [ "$key" = Uid: ] && { [ "$real" = 0 ]; return; }
  done < "$1/status" 2>/dev/null
  return 1  # gone, or unreadable: not spared
}

kill_strays() {
  # Every process started since this exec began dies before the result is read: a daemon that
  # verify's subprocess left behind (setsid, double fork, a new pid every millisecond) must not
  # rewrite anything afterwards. `kill -STOP -1` stops every process but PID 1 and this shell in one
  # pass of the kernel's process list (nothing forks past it), so one scan finds them all; the
  # others (the agent's own, which shared mode keeps running) go on after finish's copies (thaw).
  local keep=" 1 $$ " pid=$$ dir line ancestors=()
  while [ -n "$pid" ] && [ "$pid" != 0 ]; do  # and this shell's ancestors (a local sandbox's init)
    keep="$keep$pid "
    [ "$pid" = $$ ] || [ "$pid" = 1 ] || ancestors+=("$pid")
    IFS= read -r line < "/proc/$pid/stat" 2>/dev/null || break
    set -- ${line##*) }
    pid=$2
  done
  # Every process but PID 1, this shell and its ancestors: a provider's exec daemon carries this
  # exec's output and status.
  stop_others() {
    kill -STOP -1 2>/dev/null
    [ "${#ancestors[@]}" = 0 ] || kill -CONT "${ancestors[@]}" 2>/dev/null
  }
  # Again until a pass finds nothing alive to kill: should anything slip past one pass (a fork the
  # kernel finished as the stop went out), the next stops it; five passes at most.
  local round killed
  for round in 1 2 3 4 5; do
    killed=0
    stop_others
    for dir in /proc/[0-9]*; do
      pid=${dir#/proc/}
      case "$keep" in *" $pid "*) continue ;; esac
      # The whole file: a process may put a newline in its name. The fields follow its last ") ".
      line=""
      IFS= read -r -d '' line 2>/dev/null < "$dir/stat"
      [ -n "$line" ] || continue  # gone since the glob
      set -- ${line##*) }
      case "${20-}" in
        '' | *[!0-9]*) ;;  # unreadable: no process may hide that way
        *) [ "${20}" -ge "$started" ] || continue ;;
      esac
      [ "$SPARE_ROOT" = 1 ] && root_process "$dir" && continue
      kill -KILL "$pid" 2>/dev/null && [ "${1-}" != Z ] && killed=$((killed + 1))
    done
    [ "$killed" = 0 ] && return 0  # the rest stay stopped until finish has read $LOGS (thaw)
    kill -CONT -1 2>/dev/null
  done
  stop_others
}

