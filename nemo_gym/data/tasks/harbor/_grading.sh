# The in-sandbox half of one verification (nemo_gym.data.tasks.harbor.grading writes the variables
# this file reads and runs it as `bash --norc -p`: no startup file, BASH_ENV, ENV, exported functions or
# SHELLOPTS).
#
#   prepare  As the admin (root): make /tests and /logs/verifier real folders only the admin can
#            enter, empty them (keeping declared inputs), move the staged files in from the run's
#            stage folder, and hand them to the verifier's user as the verifier kind needs.
#   run      test.sh under timeout, from the working directory, with the verifier's PATH and env,
#            its output in test-stdout.txt; a Python verifier also gets the private report channel.
#   finish   Kill every process started since this exec began, lock /logs/verifier if it was handed
#            over, copy the reward files, the report and the output's tail into the run's out folder
#            with their SHA-256 sums, and remove everything else from /tests (the answers).
#
# Only bash builtins and coreutils, and tar where the files travel as one: on this exec's standard
# input and output (PIPED: prepare unpacks the staged files from stdin, finish packs the results to
# stdout, fd 6, while every message goes to stderr), or as an uploaded file and one to download
# (ARCHIVE / OUT_TAR). Exit statuses 90-96 tell the host why nothing ran (keep in sync with grading.py).
verifier_path=${NEMO_GYM_VERIFIER_PATH-${PATH-}}  # a provider's exec runs on the system's PATH and hands the verifier's over
unset -v NEMO_GYM_VERIFIER_PATH
# Root's programs come from the system's own folders alone: an image may open /usr/local to a group
# (Debian's staff, root:staff 2775) or to the agent, whose `timeout` there ran as root (red team 67).
PATH=/usr/sbin:/usr/bin:/sbin:/bin
export PATH
unset -v BASH_ENV ENV CDPATH GLOBIGNORE BASH_ARGV0
# This shell's own options (dotglob, nullglob below) must not reach test.sh: -p ignored these on the
# way in, but would export them had the environment named them.
export -n BASHOPTS SHELLOPTS
umask 077
shopt -s dotglob nullglob

[ "$PIPED" = 1 ] && exec 6>&1 1>&2  # the results alone go to stdout

# Status 92 (prepare failed) also says how full the disk is: a full disk is its common cause, and
# install hides the ENOSPC of its mkdir ("cannot change owner and permissions"). The host masks it as
# disk_full when nothing is left.
fail() {
  local disk=$TESTS
  thaw
  echo "$2"
  [ -d "$disk" ] || disk=${TESTS%/*}/
  [ "$1" = 92 ] && LC_ALL=C stat -f -c 'the disk: %a of %b blocks free to users, %d of %c inodes free' \
    -- "$disk" 2>/dev/null
  exit "$1"
}

# Every check below sends what it does not need to /dev/null. The runtime makes it; only code in the
# sandbox (a root agent) can have made it anything but the null device (red team 92: a folder, and every
# tool read as missing: a mask; red team 93: a device nobody may open, or /dev/zero). So it must be a
# character device that takes a write and reads as empty, tried with builtins alone. Status 96 scores 0.
# (A NUL ends the read: bash skips NULs otherwise, and /dev/zero's would never end it.)
if [ ! -c /dev/null ] || [ -L /dev/null ] || ! { printf x >/dev/null && ! read -r -d '' -n 1 _ </dev/null; } 2>&-; then
  echo "/dev/null is not the null device"
  exit 96
fi

# This exec's own start, in clock ticks since boot: whatever starts later belongs to grading.
IFS= read -r stat < "/proc/$$/stat"
set -- ${stat##*) }
started=${20}

needed=(rm mkdir chown chmod mv head tail sha256sum stat install)
# Without tar the files cannot travel through this exec: the host sends them another way (94).
[ "$PIPED" = 1 ] && ! command -v tar >/dev/null 2>&1 && fail 94 "the image has no tar"
[ -n "$ARCHIVE$OUT_TAR" ] && needed+=(tar)
[ "${#INPUTS[@]}" != 0 ] && needed+=(cp)  # secure_inputs
[ -n "$HANDOVER" ] || { [ "${#INPUTS[@]}" != 0 ] && [ "${#AGENTS[@]}" != 0 ]; } && needed+=(id)
# Where PATH has program $1, found with builtins (a subshell costs a fork), into REPLY. Never through
# BASH_CMDS or BASH: bash takes those from its environment (BASH from BASH_ARGV0) as plain variables,
# and their values would run as root.
find_program() {
  local place
  REPLY=""
  for place in ${PATH//:/ }; do
    if [ -f "$place/$1" ] && [ -x "$place/$1" ]; then REPLY=$place/$1; return 0; fi
  done
  return 1
}
if [[ " $STEPS " = *" run "* ]]; then
  find_program timeout || fail 90 "the image has no timeout"
  timeout_bin=$REPLY
  find_program bash || fail 90 "the image has no bash"
  # The shim's test.sh with -p: no function from the environment is defined in it as root. A task's
  # own test.sh gets bash as Harbor starts it.
  test_shell=("$REPLY")
  [ "$KIND" = python ] && test_shell+=(-p)
fi
# hash: one builtin finds them all (and spares each start its PATH search); the loop says which is missing.
hash "${needed[@]}" 2>/dev/null || for tool in "${needed[@]}"; do
  command -v "$tool" >/dev/null 2>&1 || fail 91 "the image has no $tool"
done
# From the kernel, not $EUID, which bash takes from its environment (a task's env may set it).
is_root=0
while IFS=$' \t' read -r key _ effective _; do
  if [ "$key" = Uid: ]; then [ "$effective" = 0 ] && is_root=1; break; fi
done < /proc/self/status
# Makes folders (and their parents) or fixes existing ones: the admin's, with the mode given after
# it, in one call. A link must be gone first: install follows it.
make_folder=(install -d)
[ "$is_root" = 1 ] && make_folder+=(-o 0 -g 0)
# Into switch_user, setpriv ($1) and its arguments for RUN_AS as Docker's `exec -u` sets a user up (as the
# runner's become does for a Python verifier): the passwd entry's uid, group and supplementary groups; a
# uid without an entry gets group 0; a group named gives that group alone. Into verifier_home, the HOME
# test.sh gets: the user's (/ for a uid without an entry) unless the task set its own. As Docker does,
# the entry is read from /etc/passwd. Fails for uid 0 (root:agent, or a name that hides it), whose
# test.sh could reach this shell: it runs in an exec of its own.
as_verifier() {
  local name=${RUN_AS%%:*} group="" uid="" gid=0 groups=0 home="" entry entry_uid entry_gid entry_home found=""
  [[ $RUN_AS = *:* ]] && group=${RUN_AS#*:}
  while IFS=: read -r entry _ entry_uid entry_gid _ entry_home _; do
    if { [[ $name = *[!0-9]* ]] && [ "$entry" = "$name" ]; } || { [[ $name != *[!0-9]* ]] && [ "$entry_uid" = "$name" ]; }; then
      found=$entry uid=$entry_uid gid=$entry_gid home=$entry_home
      break
    fi
  done < /etc/passwd
  if [ -z "$found" ]; then
    [[ $name = *[!0-9]* ]] && fail 93 "the sandbox has no user named $name ([verifier].user)"
    uid=$name home=/  # Docker's HOME for a uid without an entry
  elif [ -z "$group" ]; then
    groups=$(id -G -- "$found" 2>/dev/null) || fail 93 "cannot read the groups of $name ([verifier].user)"
    groups=${groups// /,}
  fi
  # By number: "00" is root too (red team 87: it ran test.sh as root in this exec, whose results the host
  # trusts), and so is 4294967296, which setpriv cuts to 32 bits (red team 88): ten digits or more are refused.
  case $uid in '' | *[!0-9]* | ??????????*) return 1 ;; esac
  (( 10#$uid == 0 )) && return 1
  [ -n "$group" ] && gid=$group groups=$group
  case $gid in ??????????*) return 1 ;; esac
  verifier_uid=$((10#$uid))
  switch_user=("$1" --reuid="$uid" --regid="$gid" --groups="$groups" --)
  [ -n "$home" ] && { [ -z "${HOME-}" ] || [ "$HOME" = ~root ]; } && verifier_home=$home
  return 0
}

# A task's own test.sh run as another user: this exec, as root, runs it as that user itself (setpriv), so
# prepare, run and finish are one exec whose shell no program of that user's can reach. Without setpriv,
# as an admin other than root, or where finish cannot stop that user's programs first (KILL_STRAYS=0:
# finish, as root, would read the folders they still write in), it stops after prepare, with status 95,
# and the host runs test.sh as that user in an exec of that user's own, then reclaims (see grading.py).
switch_user=() verifier_home="" verifier_uid="" prepared_only=""
if [ "$HANDOVER" = own ] && [[ " $STEPS " = *" prepare "* ]] && [[ " $STEPS " = *" run "* ]]; then
  if ! { [ "$is_root$KILL_STRAYS" = 11 ] && find_program setpriv && as_verifier "$REPLY"; }; then
    switch_user=() STEPS=prepare prepared_only=1
  fi
fi
# Files up to this size bash copies itself (quick_copy): most reward files and a quiet verifier's
# output, a process start (1-2 ms in a container) saved each; bash's read handles every byte itself
# (about 25 ms a MiB), so no more.
QUICK_BYTES=4096

# What `$1 -c $2` (head or tail) prints of the file open on fds 7 and 8 (two openings: reading moves
# 7's offset), into "$3". bash's read stops at a NUL byte, after n bytes or at the end of the file
# (status 1), and only the end of a regular file leaves the text the whole file (bash would drop a
# NUL: "1\0" must not read as 1); else the tool copies it, so the copy is always the tool's, byte for
# byte. `test -f /dev/fd/7` is bash's own fstat: a folder or FIFO swapped in after the caller looked
# goes to the tool, which fails or waits as it always did. (A read error of a regular file, EIO,
# would read as its end: the disk is failing then, and so will the rest.) Needs LC_ALL=C.
quick_copy() {
  local text= n=$QUICK_BYTES
  [ "$2" -lt "$n" ] && n=$2
  if [ "$n" -gt 0 ] && [ -f /dev/fd/7 ] && ! IFS= read -r -d '' -n "$n" text <&7; then
    printf '%s' "$text" > "$3"
  else
    "$1" -c "$2" <&8 > "$3"
  fi
}

# Where prepare records the declared inputs it kept, for finish (in the same exec or a later one), and
# when it started, for reclaim: in the logs folder's parent, which only the admin may write (prepare
# makes it so).
INPUTS_SEEN=${LOGS%/*}/.gym-inputs-$STAGE
STARTED_SEEN=${LOGS%/*}/.gym-started-$STAGE

# One line per declared input that is a regular file in $LOGS (not a link), in stat's format $1.
stat_inputs() {
  local input present=()
  for input in "${INPUTS[@]}"; do [ -f "$LOGS/$input" ] && [ ! -L "$LOGS/$input" ] && present+=("$input"); done
  [ "${#present[@]}" = 0 ] || (cd -- "$LOGS" && LC_ALL=C exec stat -c "$1" -- "${present[@]}")
}

# Each kept input's name (no / in it), then its owner, device, inode, link count and change time,
# which a write, a chmod or a rename over it moves.
input_states() { stat_inputs '%n/%u:%d:%i:%h:%z'; }

prepare() {
  local parent=${LOGS%/*} entry name input keep doomed=() inputs fresh stale logs_open
  # Nobody but the admin may rename the logs folder's parent's entries, or the folder itself could
  # be swapped for a symlink between the checks below and their use. A link there (install follows it,
  # into a folder the agent may rename in) or a file is the agent's: gone first (red team 55).
  if [ -n "$parent" ]; then
    if [ -L "$parent" ] || { [ -e "$parent" ] && [ ! -d "$parent" ]; }; then rm -f -- "$parent"; fi
    "${make_folder[@]}" -m 0755 -- "$parent" || fail 92 "cannot create $parent"
  fi
  # Made afresh where nothing in them must stay: a folder another user owned (the verifier's, in an
  # earlier grading, or the agent's) may carry a POSIX ACL, which owner and mode do not clear, and a
  # default ACL opens what grading later makes inside, whatever the umask (red team 48). The parents
  # are root's, so only root can make them again. A folder that stays (a mount point, one something
  # still writes in) is emptied below instead.
  fresh=()
  [ "$PIPED" = 1 ] && [ "$KEEP_TESTS" != 1 ] && fresh+=("$TESTS")  # else the staged files wait inside
  keep=0
  for input in "${INPUTS[@]}"; do [ -f "$LOGS/$input" ] && [ ! -L "$LOGS/$input" ] && keep=1; done
  [ "$keep" = 1 ] || fresh+=("$LOGS")
  # Whether anyone but root could write in $LOGS before this grading (an image's 777, or a folder of
  # another user's, such as the verifier's after a grading that never finished): an input of the
  # verifier's user's there may have been made outside a grading (secure_inputs removes it).
  logs_open=0
  if [ "$keep" = 1 ]; then
    case $(LC_ALL=C stat -c '%u:%a' -- "$LOGS" 2>/dev/null) in 0:*[2367]? | 0:*[2367]) logs_open=1 ;; 0:*) ;; *) logs_open=1 ;; esac
  fi
  for entry in "${fresh[@]}"; do [ -e "$entry" ] || [ -L "$entry" ] && doomed+=("$entry"); done
  [ "${#doomed[@]}" = 0 ] || rm -rf -- "${doomed[@]}" 2>/dev/null
  doomed=()
  for entry in "$TESTS" "$LOGS"; do
    if [ -L "$entry" ] || { [ -e "$entry" ] && [ ! -d "$entry" ]; }; then rm -f -- "$entry"; fi
  done
  "${make_folder[@]}" -m 0700 -- "$TESTS" "$LOGS" || fail 92 "cannot make $TESTS and $LOGS private"
  if [ "$KEEP_TESTS" != 1 ]; then  # a separate verifier's image may ship /tests/test.sh: it stays
    for entry in "$TESTS"/*; do
      [ "${entry##*/}" = "$STAGE" ] || doomed+=("$entry")
    done
  fi
  for entry in "$LOGS"/*; do
    name=${entry##*/}
    keep=0
    for input in "${INPUTS[@]}"; do
      [ "$name" = "$input" ] && [ -f "$entry" ] && [ ! -L "$entry" ] && keep=1
    done
    [ "$keep" = 1 ] || doomed+=("$entry")
  done
  if [ "${#doomed[@]}" != 0 ] && ! rm -rf -- "${doomed[@]}" 2>/dev/null; then
    # Something still writes in there (a process whose working directory is inside): set what is
    # left aside, out of everyone's reach, rather than fail (a failure would mask the sample).
    for entry in "${doomed[@]}"; do
      [ -e "$entry" ] || [ -L "$entry" ] || continue
      name=${entry%/*}/.gym-trash-$STAGE
      mkdir -p -m 0700 -- "$name" && mv -- "$entry" "$name"/ || fail 92 "cannot empty ${entry%/*}"
    done
  fi
  if [ "$PIPED" = 1 ]; then
    # Unpacked once the folders are root's and empty: the files land in place, the run's secrets in $OUT.
    tar -xf - -C "${TESTS%/*}/" --no-same-owner || fail 92 "cannot unpack the staged files"
    [ -d "$OUT" ] && [ ! -L "$OUT" ] && { [ "$KEEP_TESTS" = 1 ] || [ -f "$TESTS/test.sh" ]; } \
      || fail 92 "the staged files did not arrive in $TESTS"
  else
    stage_in
  fi
  # The verifier's user is to hold $LOGS: no kept input is its to write, and finish sees what its run
  # made of them (the record readable by all: a task's own test.sh's finish runs as that user).
  stale=("${LOGS%/*}"/.gym-inputs-* "${LOGS%/*}"/.gym-started-*)  # a grading that never finished left its record
  [ "${#stale[@]}" = 0 ] || rm -f -- "${stale[@]}"
  # reclaim, as the admin after the run in an exec of that user's, kills what started since
  if [ "$HANDOVER" = own ] && [ "${#switch_user[@]}" = 0 ]; then
    printf '%s\n' "$started" > "$STARTED_SEEN" || fail 92 "cannot record when grading started"
  fi
  [ "${#INPUTS[@]}" != 0 ] && secure_inputs
  if [ -n "$HANDOVER" ] && [ "${#INPUTS[@]}" != 0 ]; then
    (umask 022 && input_states > "$INPUTS_SEEN") || fail 92 "cannot record the inputs kept in $LOGS"
  fi
  handover
}

# Each kept input, before a grading, where someone other than its writer could write it. One an agent
# could have written was never the sidecar's record, whatever it holds now: the agent made it before the
# first grading, in a folder an image left open to all, or wrote it through its group, an ACL or as anyone,
# and went on writing through a hard link or a descriptor it kept (red teams 77, 78, 80, 81). Removed: one an
# agent's user owns (`[agent].user`, each step's, else the image's USER); one open to a group or to all
# (which groups an agent is in is the container's word, not /etc/group's as `id` reads it: a member line with
# a trailing space counts for one and not the other; an ACL shows as the group's bits); and, where $LOGS
# itself was open to others before this grading ($logs_open, from prepare), one of the verifier's user's. The
# rest are made afresh, as root, where anyone but their owner could write them: one of the verifier's user's
# (who holds $LOGS during the run), or one with another name (a hard link). A new inode, so a descriptor
# opened on the old one (and passed to a process the agent left running, which wrote through it after finish
# looked: red team 71) reaches nothing kept; root's, readable by all, if it was the verifier's user's (inside
# $LOGS, which only root and that user may enter). A sidecar that writes as one of them, or leaves its records
# open to others, cannot be told from the agent.
secure_inputs() {
  local states line lines=() owner group mode links name rest agents=" " user="" fresh=$LOGS/.gym-input-$STAGE
  states=$(stat_inputs '%u:%g:%a:%h:%n')
  [ -n "$states" ] || return 0
  for name in "${AGENTS[@]}"; do agents="$agents$(id -u -- "${name%%:*}" 2>/dev/null || echo "${name%%:*}") "; done
  while [[ $agents = *" 0 "* ]]; do agents=${agents// 0 / }; done  # root's inputs are never an agent's
  [ -n "$HANDOVER" ] && { user=$(id -u -- "${RUN_AS%%:*}" 2>/dev/null) || user=${RUN_AS%%:*}; }
  split_lines lines "$states"
  for line in "${lines[@]}"; do
    owner=${line%%:*} rest=${line#*:}
    group=${rest%%:*} rest=${rest#*:}
    mode=${rest%%:*} rest=${rest#*:}
    links=${rest%%:*} name=${rest#*:}
    if [[ $agents = *" $owner "* ]] || (( (8#$mode & 8#022) != 0 )) || { [ "$logs_open" = 1 ] && [ "$owner" = "$user" ]; }; then
      rm -f -- "$LOGS/$name" || fail 92 "cannot remove the input $name"
      continue
    fi
    [ "$owner" = "$user" ] || [ "$links" != 1 ] || continue
    mode=$((8#$mode & 8#755))
    [ "$owner" = "$user" ] && owner=0 group=0 mode=$((mode | 8#444))
    cp -- "$LOGS/$name" "$fresh" && chown -- "$owner:$group" "$fresh" \
      && chmod -- "$(printf '%o' "$mode")" "$fresh" && mv -f -- "$fresh" "$LOGS/$name" \
      || fail 92 "cannot make the input $name afresh"
  done
}

# The staged files, uploaded beforehand (through the sandbox's archive calls, else as the tar
# $ARCHIVE) into $TESTS/$STAGE, which emptying spared: moved into place, the run's secrets into $OUT.
stage_in() {
  local name
  if [ -n "$ARCHIVE" ]; then
    tar -xf "$ARCHIVE" -C "${TESTS%/*}/" --no-same-owner || fail 92 "cannot unpack the staged files"
    rm -f -- "$ARCHIVE"
  fi
  local stage=$TESTS/$STAGE
  [ -d "$stage" ] && [ ! -L "$stage" ] && { [ "$KEEP_TESTS" = 1 ] || [ -f "$stage/test.sh" ]; } \
    || fail 92 "the staged files did not arrive in $stage"
  mkdir -- "$OUT" || fail 92 "cannot create $OUT"
  for name in key deferred; do  # the run's own secrets: only the admin may ever read them
    if [ -f "$stage/.gym-$name" ]; then mv -- "$stage/.gym-$name" "$OUT/$name" || fail 92 "cannot move the run's $name"; fi
  done
  if [ "$KEEP_TESTS" = 1 ]; then
    rm -rf -- "$stage"
  else
    mv -- "$stage"/* "$TESTS"/ && rm -rf -- "$stage" || fail 92 "cannot move the staged files into $TESTS"
  fi
  chmod 0755 -- "$TESTS/test.sh" || fail 92 "$TESTS/test.sh is missing"
}

handover() {
  local name inputs
  case "$HANDOVER" in
    read)  # a Python verifier: the runner starts as the admin and switches itself; its user reads /tests, writes nothing there
      local group
      group=$(id -g -- "${RUN_AS%%:*}" 2>/dev/null) || case "${RUN_AS%%:*}" in
        *[!0-9]*) fail 93 "the sandbox has no user named ${RUN_AS%%:*} ([verifier].user)" ;;
        *) group=0 ;;
      esac
      # The runner's own inputs stay the admin's: it reads them before it switches users. They
      # arrived readable by the admin alone (0600; $OUT 0700), and no mode here ever widens, so
      # $TESTS opens to the group last, once nothing in it can be read that should not be.
      inputs=()
      for name in verifier.py task_data.json response.json; do [ -f "$TESTS/$name" ] && inputs+=("$TESTS/$name"); done
      chown -R "0:$group" -- "$TESTS" && chown 0:0 -- "$OUT" "${inputs[@]}" && chmod 0750 -- "$TESTS" \
        || fail 92 "cannot hand $TESTS to $RUN_AS"
      ;;
    own)  # a task's own test.sh run as another user: Harbor's semantics, the folders are that user's
      id -u -- "${RUN_AS%%:*}" >/dev/null 2>&1 || case "${RUN_AS%%:*}" in
        *[!0-9]*) fail 93 "the sandbox has no user named ${RUN_AS%%:*} ([verifier].user)" ;;
      esac
      # Where this exec runs test.sh itself, at the last moment (run): until then this shell, as root,
      # opens and reads files in them, which that user's programs (the agent's, where it is the same
      # user) could swap for links once the folders are theirs.
      [ "${#switch_user[@]}" = 0 ] && hand_over_own
      ;;
  esac
}

# The folders, not the sidecar's inputs in $LOGS: those stay their writer's (secure_inputs). $1: a file
# in $LOGS that this exec made for the run (test-stdout.txt), which that user's run makes under Harbor.
hand_over_own() {
  # The file first, never through a link: once $LOGS is that user's, its programs can put a link in the
  # file's place, which chown would follow (red team 87: /usr/bin/timeout became the agent's).
  { [ "$#" = 0 ] || chown -h -- "$RUN_AS" "$@"; } && chown -R -- "$RUN_AS" "$TESTS" && chown -- "$RUN_AS" "$LOGS" \
    || fail 93 "cannot hand $TESTS and $LOGS to $RUN_AS"
}

# Whether the working directory is one of the folders given or inside one: by device and inode,
# from "." up, builtins only (no path is resolved twice, nothing is entered). A folder above it this
# user cannot search ends the walk: the verifier could not read its workspace either.
within() {
  local up=. folder
  while [ -e "$up" ]; do
    for folder; do [ "$up" -ef "$folder" ] && return 0; done
    [ "$up" -ef / ] && return 1
    up=$up/..
  done
  return 1
}

# Enters "$WORKDIR" one part at a time, from /, as the kernel resolves a path, each part looked at where this
# shell stands (a folder it holds open: nothing above can be swapped under it); else says why not in REPLY. A
# part that is no link is entered as ./part, and the folder the walk stood in must then be its parent: one
# swapped for a link meanwhile lands elsewhere. A link is followed only where nobody but root or the user
# walking could point it elsewhere: the link and its folder theirs, the folder writable by nobody else (so
# root, walking for a Python verifier of another user, trusts root's alone: that user may be the agent's, red
# team 98). An agent that owned the folder above its working directory made it a link into a folder of
# root's it could not read, which a root verifier graded as its work (red team 95); a check after one cd of
# the whole path was raced by a process swapping the agent's folders (red team 96). 40 links at most, as
# the kernel, and 4,096 characters left to walk. Builtins alone but at a link or a folder it may not read;
# the system's stat and readlink, whatever PATH the verifier's user brings (user_start).
walk_to_workdir() {
  local rest=${WORKDIR#/} part target held stood states owner me="" key hops=0 system=/usr/sbin:/usr/bin:/sbin:/bin
  REPLY=""
  cd / || { REPLY="/ cannot be entered"; return 1; }
  while [ -n "$rest" ]; do
    part=${rest%%/*}
    if [ "$part" = "$rest" ]; then rest=""; else rest=${rest#*/}; fi
    case $part in
      '' | .) continue ;;
      ..) cd -P .. || { REPLY="the working directory $WORKDIR is gone or closed to this user"; return 1; }; continue ;;
    esac
    if [ ! -L "./$part" ]; then
      # Held open, or where this user may pass through but not read it (a 0711 home: red team 97), known
      # by device and inode, which stat reads of . before and of .. after.
      stood=""
      if ! { exec {held}<.; } 2>/dev/null; then
        held=""
        stood=$(PATH=$system exec stat -c %d:%i -- . 2>/dev/null) || stood=gone
      fi
      if [ "$stood" = gone ] || ! cd -P -- "./$part" 2>/dev/null; then
        [ -z "$held" ] || exec {held}<&-
        REPLY="the working directory $WORKDIR is gone or closed to this user"
        return 1
      fi
      if [ -n "$held" ]; then
        [ .. -ef "/proc/self/fd/$held" ] || REPLY="the working directory $WORKDIR changed while grading entered it"
        exec {held}<&-
      elif [ "$(PATH=$system exec stat -c %d:%i -- .. 2>/dev/null)" != "$stood" ]; then
        REPLY="the working directory $WORKDIR changed while grading entered it"
      fi
      [ -z "$REPLY" ] || return 1
      continue
    fi
    hops=$((hops + 1))
    REPLY="the working directory $WORKDIR leads elsewhere through a link of another user's"
    [ "$hops" -le 40 ] || return 1
    # The folder's owner and mode, then the link's owner: whoever owns either, or may write the folder, could
    # point the link elsewhere between this look and its use.
    states=$(PATH=$system exec stat -c '%u %a' -- . "./$part" 2>/dev/null) || return 1
    [ -n "$me" ] || while IFS=$' \t' read -r key _ me _; do [ "$key" = Uid: ] && break; done < /proc/self/status
    set -- $states
    [ "$#" = 4 ] && (( (8#$2 & 8#022) == 0 )) || return 1
    for owner in "$1" "$3"; do
      [ "$owner" = 0 ] || [ "$owner" = "$me" ] || return 1
    done
    target=$(PATH=$system exec readlink -- "./$part") && [ -n "$target" ] || return 1
    [[ $target = /* ]] && { cd / || return 1; }
    rest=${target#/}${rest:+/$rest}
    [ "${#rest}" -le 4096 ] || return 1  # each step copies what is left: a long chain was slow (red team 98)
    REPLY=""
  done
}

# The working directory's folders from / down, as they are now (each its own device and inode: ./.., ./../..):
# whoever besides root and this user may have moved one into its place (a folder's owner, who may make it
# writable at will; its group's members or anyone where they may; only the entry's owner in a sticky folder)
# must be able to pass through it and every folder below it, read it for a file. Else it may be a folder of
# root's or the verifier's that the agent exchanged for its own working directory as grading entered it by
# name (red team 100: rename(2) needs no right on what it moves), holding answers the agent may not read.
# The runner and nemo_gym.verifiers.files apply the same rule. One stat of the whole chain, found from the
# kernel's folders (./.. until it is /, each a builtin look), never from $PWD: bash made that from the link
# text it read before cd, and an agent that flipped its working directory's name between a link to / and a
# folder of another user's left PWD=/ while grading stood in that folder (red team 103: 8-11 of 30 forged).
moved_in() {
  local args=(.) up=. lines entries=() me="" key seen=" " found=() who need index
  local fuid fgid fmode euid egid emode system=/usr/sbin:/usr/bin:/sbin:/bin
  while [ -e "$up" ] && ! [ "$up" -ef / ] && (( ${#args[@]} < 256 )); do  # 256: under 100 KB of arguments
    up=$up/.. args+=("$up")
  done
  lines=$(PATH=$system LC_ALL=C exec stat -c '%u %g %f' -- "${args[@]}" 2>/dev/null)
  # . itself cannot be looked at: nothing in it can be read either. Else a stat that printed nothing failed
  # (E2BIG, under a large environment: red team 104), which the count below refuses.
  [ -n "$lines" ] || [ -e . ] || return 0
  local IFS=$'\n'
  set -f
  entries=($lines)
  set +f
  IFS=$' \t\n'
  REPLY="the working directory $WORKDIR could have been put in its place by a user who may not read it"
  # Every folder up to / looked at: one this user cannot look at, or a chain too deep, is not graded.
  [ "${#entries[@]}" = "${#args[@]}" ] && [ "$up" -ef / ] || return 1
  while IFS=$' \t' read -r key _ me _; do [ "$key" = Uid: ] && break; done < /proc/self/status
  for (( index = ${#entries[@]} - 1; index > 0; index-- )); do
    set -- ${entries[index]} ${entries[index - 1]}  # folder uid gid mode, entry uid gid mode
    fuid=$1 fgid=$2 fmode=$((16#$3)) euid=$4 egid=$5 emode=$((16#$6))
    found=()
    (( fuid != 0 && fuid != me )) && found+=("u$fuid")  # whatever its mode: an owner may change it
    if (( fmode & 8#022 )); then
      if (( !(fmode & 8#1000) )); then
        (( fmode & 8#002 )) && found+=(a) || found+=("g$fgid")
      elif (( euid != 0 && euid != me )); then
        found+=("u$euid")
      fi
    fi
    for who in "${found[@]}"; do [[ $seen = *" $who "* ]] || seen="$seen$who "; done
    (( (emode & 8#170000) == 8#040000 )) && need=1 || need=4
    (( emode & need )) && continue
    for who in $seen; do
      case $who in
        u*) (( euid == ${who#u} )) || return 1 ;;
        g*) (( egid == ${who#g} && (emode & need * 8) )) || return 1 ;;
        *) return 1 ;;
      esac
    done
  done
  REPLY=""
}

# Enters the task's working directory, after prepare (the exec starts in /); else says why not in
# REPLY. One the agent removed (or closed to the verifier's user) scores 0 rather than failing the
# exec's start, a mask on the agent's demand (even between two execs, red team 55), and a link the
# agent made of it is followed once, here. Into the folders grading makes afresh (/app ->
# /tests/expected), verify would read the answers as the agent's work (red team 53). Where the task
# names its working directory there, it is the task's.
enter_workdir() {
  walk_to_workdir || return 1
  case "$WORKDIR/" in
    "$TESTS"/* | "$LOGS"/*) ;;
    *) within "$TESTS" "$LOGS" && REPLY="the working directory $WORKDIR leads into $TESTS or $LOGS (a link)" ;;
  esac
  # Then the chain is looked at (moved_in), but with $1 runner_looks: a Python verifier run as root, whose
  # runner looks at the whole chain as root. The verifier's user's own walk (user_start, or its own exec)
  # looks by that user's rights, through a pipe of that user's: only a program of that user's could write
  # into it (red team 88), and that user is no mover by the rule.
  [ -z "$REPLY" ] && { [ "${1-}" = runner_looks ] || moved_in; }
}

# What the verifier's user runs first where this shell switches to it (switch_user), under timeout, with
# none of grading's descriptors: it enters the working directory itself, by its own rights, as its own exec
# would have (a check beside a root's cd was raced, and held the results pipe: red team 88), makes sure it
# is the uid asked for, then runs "$@" (bash test.sh, through env where the task's held-back variables are set).
user_start() {
  printf '%s\n' "$(declare -f within walk_to_workdir moved_in enter_workdir)" \
    "WORKDIR=$(printf %q "$WORKDIR") TESTS=$(printf %q "$TESTS") LOGS=$(printf %q "$LOGS")" \
    'enter_workdir || { echo "$REPLY: the verifier did not run"; exit 1; }' \
    'while IFS=$'"'"' \t'"'"' read -r key real effective saved fs; do [ "$key" = Uid: ] && break; done < /proc/self/status' \
    "[ \"\$real \$effective \$saved \$fs\" = '$verifier_uid $verifier_uid $verifier_uid $verifier_uid' ] || { echo \"test.sh would run as uid \$effective, not $verifier_uid: the verifier did not run\"; exit 1; }" \
    'exec "$@"'
}

run() {
  local up held=() entry launcher=() looks=""
  exec 4>"$LOGS/test-stdout.txt" 5<"$LOGS/test-stdout.txt" 7<"$LOGS/test-stdout.txt" \
    || fail 92 "cannot create $LOGS/test-stdout.txt"
  [ "$KIND$RUN_AS" = python ] && looks=runner_looks
  if [ "${#switch_user[@]}" = 0 ] && ! enter_workdir "$looks"; then  # else the verifier's user enters it (user_start)
    echo "$REPLY: the verifier did not run" >&4
    run_started=0 elapsed=0
    exec 4>&-
    return 0
  fi
  # The variables this exec set empty (grading's own programs must not load what they name) reach
  # the verifier with their own values: test.sh's environment holds them, or, for the shim, the
  # runner sets them once it has switched users and sealed itself.
  unset -v "${BLANKED[@]}"
  if [ "$KIND" = python ]; then
    exec 3>"$OUT/report" || fail 92 "cannot create the report file"
    export NEMO_GYM_REPORT_FD=3 NEMO_GYM_KEY_FILE="$OUT/key"
    [ -f "$OUT/deferred" ] && export NEMO_GYM_DEFERRED_ENV="$OUT/deferred"
    if [ "$HANDOVER" = read ]; then
      export NEMO_GYM_RUN_AS="$RUN_AS"
      chown -- "$RUN_AS" "$LOGS" || fail 92 "cannot hand $LOGS to $RUN_AS"
    fi
  else
    if [ -f "$OUT/deferred" ]; then
      while IFS= read -r -d '' entry || [ -n "$entry" ]; do held+=("$entry"); done < "$OUT/deferred"
    fi
    [ -n "$verifier_home" ] && held+=("HOME=$verifier_home")
    [ "${#held[@]}" = 0 ] || launcher=("$(command -v env)" "${held[@]}")
  fi
  [ "${#switch_user[@]}" = 0 ] || hand_over_own "$LOGS/test-stdout.txt"
  IFS=' ' read -r up _ < /proc/uptime
  run_started=${up/./}
  umask 022
  # The held-back variables (LD_PRELOAD, LD_LIBRARY_PATH, ...) only for test.sh: root's timeout and setpriv
  # would load what they name (red team 87: the agent's library, in the task's LD_LIBRARY_PATH, forged the
  # results as root), and so would the verifier's user's start, whose stat looks at the chain for grading.
  local start=()
  # -p: no function from the environment (BASH_FUNC_read%%, an image's or a task's) is defined in the start
  # before its checks run (red team 89); test.sh, which it execs, gets them as Harbor gives them.
  [ "${#switch_user[@]}" = 0 ] || start=("${test_shell[0]}" -p -c "$(user_start)" enter)
  PATH=$verifier_path "$timeout_bin" -k "$KILL_AFTER" "$TIMEOUT" "${switch_user[@]}" "${start[@]}" "${launcher[@]}" \
    "${test_shell[@]}" "$TESTS/test.sh" \
    </dev/null >&4 2>&4 4>&- 5>&- 6>&- 7>&-
  status=$?
  umask 077
  IFS=' ' read -r up _ < /proc/uptime
  elapsed=$(( ${up/./} - run_started ))
  exec 3>&- 4>&-
  unset -v NEMO_GYM_REPORT_FD NEMO_GYM_KEY_FILE NEMO_GYM_DEFERRED_ENV NEMO_GYM_RUN_AS
}

# Whether stat's "%u %U" in "$1" names a user whose files finish copies out of $LOGS: any, unless it
# was handed over; then the admin and the verifier's user alone (the agent's files, hard-linked there by
# a program verify ran, are none of the verifier's output).
trusted_owner() {
  [ -z "$HANDOVER" ] && return 0
  local uid=${1%% *} user=${RUN_AS%%:*}
  [ -n "$1" ] && { [ "$uid" = 0 ] || [ "$uid" = "$user" ] || [ "${1#* }" = "$user" ]; }
}

# The first $1 bytes of the file "$2" into "$3". Where $LOGS was handed over, the file is opened
# without blocking (dd's iflag=nonblock): any owner may take a write lease on its file, which lives as
# long as the open description (passed to the agent's process, it outlives its taker, red team 42),
# and every other open of the file waits the kernel's lease-break-time (45 s) on a holder kill_strays
# left stopped. Such a file, or one dd cannot read, returns $LEASED at once. A dd without nonblock
# (busybox's; asked once) leaves the copy to head.
LEASED=75
nonblocking=""
copy_head() {
  if [ -n "$HANDOVER" ] && [ -z "$nonblocking" ]; then
    nonblocking=0
    dd if=/dev/null of=/dev/null iflag=nonblock,count_bytes count=0 2>/dev/null && nonblocking=1
  fi
  if [ "$nonblocking" = 1 ]; then
    dd if="$2" of="$3" iflag=nonblock,count_bytes bs=65536 count="$1" 2>/dev/null || return "$LEASED"
  else
    head -c "$1" -- "$2" > "$3"
  fi
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

# The verifier's other output (Harbor keeps all of /logs/verifier: ctrf.json, reward-details.json,
# ...): regular files with plain names (at most MAX_OUTPUT_NAME characters and MAX_OUTPUT_DEPTH
# folders deep), up to MAX_OUTPUT_FILES of them and MAX_OUTPUT_BYTES in all,
# into "$OUT/files"; what does not fit is counted in "skipped" (the meta file says so).
copy_outputs() {
  local entry name size candidates=() listed sizes=() total=0 count=0 folder input index=0 level looked=0 pattern="*"
  skipped=0
  # Level by level, to MAX_OUTPUT_DEPTH folders (the files one level deeper are counted), and at most
  # MAX_OUTPUT_SCAN entries in all: a name's length is checked before any pattern work on it.
  for ((level = 0; level <= MAX_OUTPUT_DEPTH + 1; level++)); do
    for entry in "$LOGS"/$pattern; do
      looked=$((looked + 1))
      if [ "$looked" -gt "$MAX_OUTPUT_SCAN" ]; then
        skipped=$((skipped + 1))  # and whatever else is there, unlooked at
        break 2
      fi
      [ -f "$entry" ] && [ ! -L "$entry" ] || continue
      name=${entry#"$LOGS"/}
      if [ "${#name}" -gt "$MAX_OUTPUT_NAME" ] || [ "$level" -gt "$MAX_OUTPUT_DEPTH" ]; then
        skipped=$((skipped + 1))
        continue
      fi
      case "$name" in reward.json | reward.txt | test-stdout.txt | .gym-trash-*) continue ;; esac
      for input in "${INPUTS[@]}"; do [ "$name" = "$input" ] && continue 2; done
      case "$name" in *[!A-Za-z0-9._/-]* | .* | */.*) skipped=$((skipped + 1)); continue ;; esac
      candidates+=("$name")
    done
    pattern="$pattern/*"
  done
  [ "${#candidates[@]}" = 0 ] && return 0
  listed=$(cd -- "$LOGS" && stat -c '%s %u %U' -- "${candidates[@]}") || { skipped=$((skipped + ${#candidates[@]})); return 0; }
  split_lines sizes "$listed"
  for name in "${candidates[@]}"; do
    size=${sizes[index]-}
    index=$((index + 1))
    trusted_owner "${size#* }" || { skipped=$((skipped + 1)); continue; }
    size=${size%% *}
    # Digits, and few enough that no sum below can wrap past 2^63 (a file on tmpfs may be 2^63-1
    # bytes long): bash evaluates a variable's text as an expression, `a[$(cmd)]` included.
    case "$size" in '' | *[!0-9]* | ???????????????????*) skipped=$((skipped + 1)); continue ;; esac
    if [ "$count" -ge "$MAX_OUTPUT_FILES" ] || [ "$size" -gt $((MAX_OUTPUT_BYTES - total)) ]; then
      skipped=$((skipped + 1))
      continue
    fi
    folder=$OUT/files
    case "$name" in */*) folder=$OUT/files/${name%/*} ;; esac
    if ! { mkdir -p -- "$folder" && copy_head "$size" "$LOGS/$name" "$OUT/files/$name"; } 2>/dev/null; then
      # Changed since the look (a folder now, or gone): only a process that was not stopped does
      # that (kill_strays off), so it counts as skipped, never as a mask on the agent's demand.
      rm -rf -- "$OUT/files/$name"
      skipped=$((skipped + 1))
      continue
    fi
    total=$((total + size))
    count=$((count + 1))
  done
}

finish() {
  local name path kinds="" report="" doomed=() entry sums input TMOUT=  # no timeout on read, here or below
  LC_ALL=C  # byte semantics for read -N below; test.sh has finished with the verifier's locale
  [ "$KILL_STRAYS" = 1 ] && kill_strays
  # The report first, as read (at most MAX_REPORT_CHARS): rewriting it frees the disk the key holder set
  # aside beyond it (_gym_channel.reserve), for the copies below on a disk the run filled. Never where
  # the out folder was the verifier's user's (HANDOVER=own: no report, and a link could aim the write).
  if [ "$HANDOVER" != own ] && [ -f "$OUT/report" ] && [ ! -L "$OUT/report" ]; then
    IFS= read -r -d '' -N "$MAX_REPORT_CHARS" report < "$OUT/report"
    printf '%s' "$report" > "$OUT/report"
  fi
  # Locked again only if it was handed over: else it has been the admin's, 0700, since prepare, and
  # only code run as the admin could have changed that, which could as well have written a reward.
  if [ "$is_root" = 1 ] && [ -n "$HANDOVER" ]; then
    "${make_folder[@]}" -m 0700 -- "$LOGS" || fail 92 "cannot lock $LOGS"
  fi
  if [ "$HANDOVER" = own ]; then
    # A task's own test.sh's user owned /tests, and the out folder in it, where finish now writes as the
    # admin: a link planted there would aim those writes. Both the admin's again, the out folder afresh
    # (nothing in it is needed any more: the runner's files are a Python verifier's).
    # As that user, a folder its programs closed inside is opened first (red team 77: it masked the 0).
    "${make_folder[@]}" -m 0700 -- "$TESTS" \
      && { rm -rf -- "$OUT" 2>/dev/null || { chmod -R u+rwX -- "$OUT" && rm -rf -- "$OUT"; }; } \
      && mkdir -m 0700 -- "$OUT" || fail 92 "cannot take $OUT back"
  fi
  # The runner's key holder made finish's files in the out folder beforehand, with disk set aside
  # (_gym_channel.reserve): they are written into, and the reward files' are removed when unused. For a
  # Python verifier, whose report is the result, a copy a full disk refuses is left out, never a mask.
  local copied unused=()
  for name in reward.json reward.txt; do
    path=$LOGS/$name
    copied=0
    if [ -L "$path" ]; then kinds="$kinds$name=link "
    elif [ ! -f "$path" ]; then
      [ -e "$path" ] && kinds="$kinds$name=other "
    elif [ -n "$HANDOVER" ]; then
      copy_head "$MAX_REWARD_BYTES" "$path" "$OUT/$name"
      case $? in
        0) kinds="$kinds$name=file " copied=1 ;;
        "$LEASED") kinds="$kinds$name=other " ;;  # read as unreadable: nothing of the verifier's own
        *) [ "$KIND" = python ] || fail 92 "cannot copy $name"; kinds="$kinds$name=other " ;;
      esac
    elif quick_copy head "$MAX_REWARD_BYTES" "$OUT/$name" 7<"$path" 8<"$path"; then
      kinds="$kinds$name=file " copied=1
    else
      [ "$KIND" = python ] || fail 92 "cannot copy $name"
      kinds="$kinds$name=other "
    fi
    [ "$copied" = 1 ] || { [ -e "$OUT/$name" ] && unused+=("$OUT/$name"); }
  done
  if [ -n "${run_started-}" ]; then
    quick_copy tail "$TAIL_BYTES" "$OUT/test-stdout.txt" 8<&5 || [ "$KIND" = python ] || fail 92 "cannot copy test-stdout.txt"
    exec 5<&- 7<&-
  fi
  copy_outputs
  thaw
  # One removal: the answers in /tests, what was set aside, the unused reward files, and the key and
  # held-back variables a runner that never ran leaves (it removes them as it starts).
  for entry in "$LOGS"/.gym-trash-*; do doomed+=("$entry"); done
  [ -n "$HANDOVER" ] && [ "${#INPUTS[@]}" != 0 ] && changed_inputs
  if [ "$KEEP_TESTS" != 1 ]; then
    for entry in "$TESTS"/*; do
      [ "$entry" = "$OUT" ] || doomed+=("$entry")
    done
  fi
  for name in key deferred; do [ -e "$OUT/$name" ] && doomed+=("$OUT/$name"); done
  doomed+=("${unused[@]}")
  [ "${#doomed[@]}" = 0 ] || rm -rf -- "${doomed[@]}" 2>/dev/null
  write_results
  if [ "$PIPED" = 1 ]; then
    tar -cf - -C "$OUT" . >&6 || fail 92 "cannot pack the results"
  elif [ -n "$OUT_TAR" ] && ! tar -cf "$OUT_TAR" -C "$OUT" .; then
    # A disk the run filled may hold the results but not the outputs' tar (many folders, long names: red
    # team 51): a Python verifier's outputs are then left out, counted, and its results packed again.
    [ "$KIND" = python ] && [ -d "$OUT/files" ] || fail 92 "cannot pack the results"
    for entry in "${sums[@]}"; do [[ "$entry" = files/* ]] && skipped=$((skipped + 1)); done
    rm -rf -- "$OUT/files" "$OUT_TAR"
    write_results
    tar -cf "$OUT_TAR" -C "$OUT" . || fail 92 "cannot pack the results"
  fi
}

# After a task's own test.sh ran as its user (HANDOVER=own), in an exec of that user's that its programs
# could stop or undo (red team 77): as the admin, kill what started since prepare, take both folders
# back, and remove what the run made of the kept inputs and whatever else it left in $TESTS.
reclaim() {
  local entry doomed=() TMOUT=
  [ -f "$STARTED_SEEN" ] && IFS= read -r started < "$STARTED_SEEN"
  [ "$KILL_STRAYS" = 1 ] && kill_strays
  "${make_folder[@]}" -m 0700 -- "$TESTS" "$LOGS" || fail 92 "cannot take $TESTS and $LOGS back"
  [ "${#INPUTS[@]}" != 0 ] && changed_inputs
  for entry in "$TESTS"/*; do
    [ "$KEEP_TESTS" = 1 ] && [ "$entry" != "$OUT" ] || doomed+=("$entry")
  done
  doomed+=("$STARTED_SEEN")
  [ "${#doomed[@]}" = 0 ] || rm -rf -- "${doomed[@]}" 2>/dev/null
  # The disk as root sees it: a run of that user's that did not end whole is masked only if it is full.
  # Read while what kill_strays stopped stays stopped: a leftover of the agent's let go on first took
  # back what the rm freed (red team 82: a forfeit's 0 became a mask).
  LC_ALL=C stat -f -c 'the disk: %a of %b blocks free to users, %d of %c inodes free' -- "$TESTS" 2>/dev/null
  thaw
  return 0
}

# Into "doomed", the declared inputs in $LOGS that the verifier's user's run made, replaced or changed
# (by input_states): prepare would keep them for the next grading, whose verify takes them for the
# sidecar's (red team 69: a coding step's program wrote the next step's record, or a hard link to a
# file the agent kept writing). Those the sidecar wrote before the run stay, untouched.
changed_inputs() {
  local seen="" now line lines=()
  [ -f "$INPUTS_SEEN" ] && IFS= read -r -d '' seen < "$INPUTS_SEEN"
  now=$(input_states)
  split_lines lines "$now"
  for line in "${lines[@]}"; do
    [[ $'\n'"$seen" = *$'\n'"$line"$'\n'* ]] || doomed+=("$LOGS/${line%%/*}")
  done
  doomed+=("$INPUTS_SEEN")
}

# The meta file and the checksums of every file in $OUT (into "sums", the names), as the host reads them.
write_results() {
  local entry
  printf 'status %s\nelapsed_cs %s\nkinds %s\nskipped %s\n' "${status-}" "${elapsed-}" "$kinds" "$skipped" > "$OUT/meta" \
    || fail 92 "cannot write the results' meta file"
  cd -- "$OUT" || fail 92 "cannot enter $OUT"
  shopt -s globstar
  sums=()
  for entry in * files/**; do [ "$entry" != .sums ] && [ -f "$entry" ] && [ ! -L "$entry" ] && sums+=("$entry"); done
  sha256sum -- "${sums[@]}" > .sums || fail 92 "cannot checksum the results"
  cd / || fail 92 "cannot leave $OUT"
}

for step in $STEPS; do
  "$step"
done
[ -n "$prepared_only" ] && exit 95  # test.sh is to run in an exec of its user's (see switch_user)
[ "$PIPED" = 1 ] && printf '%s' "$DONE" >&6  # the host takes it for this exit 0 (grading.DONE_MARKER)
exit 0
