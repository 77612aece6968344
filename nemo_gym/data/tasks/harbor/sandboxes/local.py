"""``LocalSandbox``: verification on this machine, treating the host as a container treats its host.

On Linux with bubblewrap, every command runs in a private mount and PID namespace:
- the host's file system is there read-only; ``/tests``, ``/logs`` and ``/tmp`` are the sandbox's own
  folders, ``/var/tmp`` and ``/dev/shm`` are empty tmpfs, and ``/root``, the caller's home and
  ``/usr/local`` are tmpfs with what the host has there bound back read-only (a ``test.sh`` can add
  files there, never change the host's); the workspace, at its own path, is the only host folder
  a command can write;
- as root it keeps Docker's default capabilities only (no ``CAP_SYS_ADMIN`` to remount, no
  ``CAP_SYS_PTRACE``), and every process it leaves dies with the namespace;
- its environment is built from the task's declared env and a minimal base (``PATH``, ``HOME``,
  ``LANG``), never the host's: a host credential in an environment variable is not there.
Without bubblewrap, the paths map to the sandbox's folders instead (the shim takes
``VERIFIER_LOGS_DIR``), commands see the host as it is, and a task's own ``test.sh`` is refused
with a pointer to ``--sandbox docker``.
"""

from __future__ import annotations

import asyncio
import functools
import io
import os
import posixpath
import pwd
import shutil
import signal
import stat
import subprocess
import tarfile
import tempfile
import weakref
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Set, Tuple

from nemo_gym.data.tasks.harbor._threads import in_thread
from nemo_gym.data.tasks.harbor.sandboxes.base import (
    CLEAN_SHELL_OPTIONS,
    MAX_EXEC_OUTPUT_BYTES,
    ExecResult,
    ExecTimeout,
    LinkEscape,
    OutputTooLarge,
    PipedResult,
    SandboxError,
    User,
    clean_shell_env,
)
from nemo_gym.data.tasks.harbor.task import normal_path, path_parts, path_within
from nemo_gym.data.tasks.harbor.workdir import mounts_refusal

# The host's top-level entries a namespaced command does not see: the sandbox brings its own.
_PRIVATE = ("tests", "logs", "tmp", "proc", "dev")
# The PATH of a host whose own names no folder a command may search.
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
# How often a command is started when bubblewrap fails to set its namespace up (see exec).
_SETUP_ATTEMPTS = 3
# How long a killed command's pipes may take to close before they are left unread: only a process
# that left its group (the sandbox without bubblewrap has no PID namespace to end it) keeps one open.
_SETTLE_SEC = 5.0
# Empty and writable, as in a fresh container. /run hides the host's sockets (the Docker engine's, the
# system bus): a read-only bind does not stop a connect().
_TMPFS = ("/var/tmp", "/dev/shm", "/run", "/var/run")
# /tmp's and the tmpfs folders' mode, a container's: every user writes there, and removes only its own
# (an agent's oracle's mktemp, a verifier's tempfile as [verifier].user).
_SCRATCH_MODE = 0o1777
_SCRATCH = ("/var/tmp", "/dev/shm")  # of _TMPFS: /run stays root's, as in a container
# Writable where a test.sh expects to write (pip's and apt's caches, a user's dotfiles), with the
# host's entries bound back read-only: files can be added, the host's cannot change.
_LAYERED = ("/root", "/usr/local")
# The host's programs and libraries (bash and Python among them), which every command runs on: a
# workspace or mount bound over one hides them, and every run fails as a sandbox fault (masked) where
# the task's image would have its own. /etc, /root or /opt can be bound over: commands still start.
_SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# Docker's default capabilities but the network's, CAP_MKNOD and CAP_SETFCAP: a root verifier can chown,
# switch users and kill in its namespace, but not mount, trace other processes or load modules; since it
# shares the host's network, neither read its traffic (CAP_NET_RAW) nor take its low ports; and since
# the workspace is a host folder, not make device nodes there that the host would honour (red team 44),
# nor give a file there capabilities (a cat that reads /etc/shadow for any host user: red team 60).
_CAPABILITIES = (
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
)


@functools.lru_cache(maxsize=None)
def host_tool(name: str) -> str:
    """The absolute path of a host program (``bwrap``, ``setpriv``, ``bash``), found once on the
    host's own PATH: a command's env may name a PATH into the workspace, which must never decide
    what runs."""
    found = shutil.which(name, path=os.environ.get("PATH") or os.defpath)
    return found or name


@functools.lru_cache(maxsize=None)
def namespaces_available() -> bool:
    """Whether bubblewrap can start a private mount and PID namespace here (probed once)."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return False
    try:
        probe = subprocess.run(
            [bwrap, "--dev-bind", "/", "/", "--unshare-pid", "--proc", "/proc", "true"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return probe.returncode == 0


def _caller() -> Tuple[str, str]:
    """The caller's user name (its uid when it has none) and home folder."""
    try:
        entry = pwd.getpwuid(os.getuid())
    except KeyError:
        return str(os.getuid()), "/"
    return entry.pw_name, entry.pw_dir


def base_env() -> Dict[str, str]:
    """The minimal environment every command starts from: the host's ``PATH`` (absolute entries
    only: a relative one would resolve in whatever folder a command runs in; a namespaced sandbox
    keeps fewer, see ``own_path``), ``HOME`` and ``LANG``."""
    path = ":".join(entry for entry in os.environ.get("PATH", "").split(":") if entry.startswith("/"))
    return {
        "PATH": path or DEFAULT_PATH,
        "HOME": _caller()[1],
        "LANG": os.environ.get("LANG", "C.UTF-8"),
    }


def own_path(path: str, own: Iterable[str]) -> str:
    """The entries of the host's ``path`` a namespaced command may search: those that are a folder
    on this machine, which the sandbox shows read-only, neither as named nor where their links lead
    lying in one of the sandbox's ``own`` folders. There, every user of the sandbox may write, and
    what one command leaves the next finds (red team 83: a venv activated from /tmp put /tmp/venv/bin
    first, where the agent's program planted a ``cat`` that test.sh ran as root)."""
    own = tuple(own)
    kept = [
        entry
        for entry in path.split(":")
        if os.path.isdir(entry)
        and not any(path_within(entry, folder) or path_within(os.path.realpath(entry), folder) for folder in own)
    ]
    return ":".join(kept)


def _host_binds() -> List[str]:
    arguments: List[str] = []
    for entry in sorted(os.listdir("/")):
        if entry in _PRIVATE:
            continue
        path = "/" + entry
        if os.path.islink(path):
            arguments += ["--symlink", os.readlink(path), path]
        else:
            arguments += ["--ro-bind", path, path]
    return arguments


def _make_room(path: str, layered: List[str]) -> List[str]:
    """What lets bwrap create a mount point at ``path`` when the host has none there: its deepest
    ancestor that exists on the (read-only) host becomes a tmpfs with the host's entries bound
    back. Nothing when the path exists, or when bwrap creates it in its own root or a writable
    folder of the sandbox."""
    if os.path.lexists(path):
        return []
    parent = posixpath.dirname(path)
    while parent != "/" and not os.path.lexists(parent):
        parent = posixpath.dirname(parent)
    writable = ("/tmp", "/tests", "/logs", "/solution", *_TMPFS, *layered)
    if parent == "/" or any(parent == folder or parent.startswith(folder + "/") for folder in writable):
        return []
    return _layered(parent)


def _hiding_refusal(workdir: str, mounts: Mapping[str, Path]) -> Optional[str]:
    """Why the workspace at ``workdir``, or one of ``mounts``, cannot be bound where it would be: it
    is or holds one of the host's ``_SYSTEM`` folders (as named, or where the host's links lead:
    ``/bin`` may be ``/usr/bin``), or ``None``."""
    placed = [(f"the working directory {workdir}", workdir)]
    placed += [(f"the mount {host}:{place}", place) for place, host in mounts.items()]
    for what, place in placed:
        for folder in _SYSTEM:
            if path_within(folder, place) or path_within(folder, os.path.realpath(place)):
                return (
                    f"{what} is or holds {folder}, which the local sandbox takes from this machine: bound there, it "
                    "would hide this machine's programs; --sandbox docker runs the task's image"
                )
    return None


def _mount_points(workdir: str, workspace: Path, mounts: Mapping[str, Path]) -> List[Path]:
    """The host folders, deepest first, that do not exist yet where a mount lies inside the workspace
    at ``workdir`` or inside another mount: bubblewrap makes them as mount points."""
    placed = [(workdir, workspace), *mounts.items()]
    points: List[Path] = []
    for place in mounts:
        for outer, host in placed:
            if place == outer or not path_within(place, outer):
                continue
            target = host
            for part in path_parts(posixpath.relpath(normal_path(place), normal_path(outer))):
                target = target / part
                if not os.path.lexists(target):
                    points.append(target)
    return sorted(set(points), key=lambda point: -len(point.parts))


def _scratch_perms(folder: str) -> Tuple[str, ...]:
    return ("--perms", f"{_SCRATCH_MODE:o}") if folder in _SCRATCH else ()


def _real_folder(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def _layered(folder: str) -> List[str]:
    """A tmpfs over ``folder`` with the host's entries bound back read-only."""
    if folder in ("", "/") or not os.path.isdir(folder) or os.path.islink(folder):
        return []
    arguments = ["--tmpfs", folder]
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.islink(path):
            arguments += ["--symlink", os.readlink(path), path]
        else:
            arguments += ["--ro-bind", path, path]
    return arguments


def defuse(folder: Path) -> None:
    """Removes the device nodes under ``folder`` and the set-user and set-group bits of its files:
    bound into the sandbox, a host folder is nosuid and nodev there, but not on the host, where a
    set-id copy of a shell the agent's program left (as root, or as any user the sandbox has) would
    lift whoever reaches it (red team 44). GNU find walks any depth (its ``-execdir`` names a file
    from its own folder, past PATH_MAX) and never follows a link."""
    command = [host_tool("find"), str(folder), "-mindepth", "1", "(", "-type", "c", "-o", "-type", "b", ")", "-delete"]
    command += ["-o", "-type", "f", "-perm", "/6000", "-execdir", host_tool("chmod"), "ug-s", "{}", "+"]
    subprocess.run(
        command, env={"PATH": "/usr/bin:/bin"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
    )


def _remove_tree(root: Path) -> None:
    try:
        shutil.rmtree(root, ignore_errors=True)
    except RecursionError:  # folders nested deeper than Python's recursion (a verifier's doing)
        subprocess.run([host_tool("rm"), "-rf", "--", str(root)], check=False)


class LocalSandbox:
    """A sandbox on this machine; use it as an async context manager (``close`` removes its folders).

    ``workdir`` is where the workspace sits inside (the task's working directory, e.g. ``/app``;
    by default, and always without bubblewrap, its own host path); ``mounts`` maps more sandbox
    paths to host folders (the agent's state beyond the workspace, e.g. ``/logs/artifacts``);
    ``network`` ``"no-network"`` (or ``"none"``) gives each command a network namespace of its own
    (loopback only). ``users`` are the user names the task names (``[agent].user``,
    ``[verifier].user``). As root, a name the host lacks gets a uid of its own in the sandbox's
    private ``/etc/passwd``, never the host's; as any other user, every name is the caller
    (``single_user``: an unprivileged caller cannot give a sandbox more uids than its own).
    """

    supports_user_groups = False

    def __init__(
        self,
        workspace: Path,
        *,
        env: Optional[Mapping[str, str]] = None,
        isolate: Optional[bool] = None,
        workdir: Optional[str] = None,
        mounts: Optional[Mapping[str, Path]] = None,
        users: Iterable[User] = (),
        network: Optional[str] = None,
    ) -> None:
        self.workspace = Path(workspace).resolve()
        if not self.workspace.is_dir():
            raise SandboxError(f"the workspace {workspace} is not a folder")
        self.isolated = namespaces_available() if isolate is None else isolate
        if network not in (None, "public", "none", "no-network"):
            raise SandboxError(
                f"the local sandbox cannot enforce network {network!r}: it runs a command with no network "
                "(network_mode 'no-network') or with this machine's, never behind an allowlist"
            )
        self._no_network = network in ("none", "no-network")
        if self._no_network and not self.isolated:
            raise SandboxError("a sandbox without network needs bubblewrap (apt-get install bubblewrap)")
        if mounts and not self.isolated:
            raise SandboxError("placing folders at sandbox paths needs bubblewrap (apt-get install bubblewrap)")
        self._mounts: Dict[str, Path] = {}
        for path, host in (mounts or {}).items():
            if not path.startswith("/") or not Path(host).is_dir():
                raise SandboxError(f"the mount {host}:{path} needs an existing host folder and an absolute path")
            self._mounts[posixpath.normpath(path)] = Path(host).resolve()
        # Bound outer first: a mount inside another goes on top of it, not under it, whatever the order given.
        self._mounts = dict(sorted(self._mounts.items(), key=lambda item: len(path_parts(item[0]))))
        self._root = Path(tempfile.mkdtemp(prefix="nemo-gym-sandbox-"))
        # A sandbox never closed (used without `async with`, or dropped) leaves no folder behind.
        self._remove_root = weakref.finalize(self, _remove_tree, self._root)
        for folder in ("tests", "logs/verifier", "tmp", "solution", "etc"):
            (self._root / folder).mkdir(parents=True)
        (self._root / "tmp").chmod(_SCRATCH_MODE)
        self.single_user = os.getuid() != 0
        self._users: Dict[str, Tuple[int, int, str]] = {}  # names the host lacks: uid, gid, home
        self._uids: Set[int] = set()  # the users named by number, which no name may be given
        # The numbers first: a name given the uid a later number turns out to be would be that user.
        for user in sorted(users, key=lambda user: not str(user).partition(":")[0].isdigit()):
            self.add_user(user)
        self.admin_user: Optional[User] = _caller()[0]  # its folders are the caller's own
        self.default_user: Optional[User] = None
        self.private_pids = self.isolated  # each command's own PID namespace
        if self.isolated:
            self.tests_dir, self.logs_dir, self.tmp_dir = "/tests", "/logs/verifier", "/tmp"
        else:
            self.tests_dir = str(self._root / "tests")
            self.logs_dir = str(self._root / "logs" / "verifier")
            self.tmp_dir = str(self._root / "tmp")
        # Without a namespace the workspace can only be where it is on the host.
        self.workdir = posixpath.normpath(workdir) if workdir and self.isolated else str(self.workspace)
        refusal = mounts_refusal(self._mounts, self.workdir, bound=True)  # grading would empty or replace them
        if refusal is None and self.isolated:
            refusal = _hiding_refusal(self.workdir, self._mounts)
        if refusal is not None:
            self._remove_root()
            raise SandboxError(refusal)
        base = base_env()
        if self.isolated:
            homes = [home for _, _, home in self._users.values()]
            own = ["/solution", *("/" + entry for entry in _PRIVATE), *_TMPFS, self.workdir, *self._mounts, *homes]
            own += [str(self.workspace), str(self._root), *map(str, self._mounts.values())]  # seen at their host paths
            base["PATH"] = own_path(base["PATH"], own) or DEFAULT_PATH
        self._env = dict(env or {})
        self.environment: Dict[str, str] = {**base, **self._env}  # what every command inherits
        # What stands for an image here: the host's programs as this sandbox's PATH finds them. Runs
        # on it learn its Python (bytecode.ImageTags) and stage that one's bytecode alone, some 65
        # files fewer to unpack and remove a run; a wrong hint costs one run a compile, never a grade.
        self.image = f"local:{self.environment.get('PATH', '')}"
        # The folders bubblewrap will make in a host folder for a mount inside it: removed again on close.
        self._mount_points = _mount_points(self.workdir, self.workspace, self._mounts) if self.isolated else []

    def add_user(self, user: User) -> None:
        """Makes ``user`` exist in the sandbox (see the class docstring); a uid needs nothing."""
        name = str(user).partition(":")[0]
        if name.isdigit():
            self._uids.add(int(name))
        if self.single_user or not name or name.isdigit() or name in self._users:
            return
        try:
            pwd.getpwnam(name)
            return
        except KeyError:
            pass
        taken = {entry.pw_uid for entry in pwd.getpwall()} | {uid for uid, _, _ in self._users.values()} | self._uids
        uid = next(number for number in range(1000, 60000) if number not in taken)
        self._users[name] = (uid, uid, f"/home/{name}")
        (self._root / "home" / name).mkdir(parents=True, exist_ok=True)
        os.chown(self._root / "home" / name, uid, uid)
        self._write_user_files()

    def _write_user_files(self) -> None:
        with open("/etc/passwd", encoding="utf-8", errors="surrogateescape") as handle:
            passwd = handle.read().rstrip("\n").split("\n")
        try:
            with open("/etc/group", encoding="utf-8", errors="surrogateescape") as handle:
                group = handle.read().rstrip("\n").split("\n")
        except OSError:
            group = []
        for name, (uid, gid, home) in sorted(self._users.items()):
            passwd.append(f"{name}:x:{uid}:{gid}::{home}:/bin/bash")
            group.append(f"{name}:x:{gid}:")
        for file, lines in (("passwd", passwd), ("group", group)):
            (self._root / "etc" / file).write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogateescape")

    async def __aenter__(self) -> LocalSandbox:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._remove_root.alive and self.isolated:
            for folder in (self.workspace, *self._mounts.values()):
                await in_thread(defuse, folder)
            for point in self._mount_points:
                try:
                    os.rmdir(point)  # only while empty: what a command put there stays
                except OSError:
                    pass
        self._remove_root()  # once: a second close does nothing

    @property
    def started(self) -> bool:
        """Usable from its construction (``async with`` is optional) until it is closed."""
        return self._remove_root.alive

    def host_path(self, sandbox_path: str) -> Path:
        """The host path behind a sandbox path; only the sandbox's folders and the workspace."""
        path = os.path.normpath(sandbox_path)
        mounts: Dict[str, Path] = {
            self.tests_dir: self._root / "tests",
            self.logs_dir: self._root / "logs" / "verifier",
            self.tmp_dir: self._root / "tmp",
            self.workdir: self.workspace,
        }
        if self.isolated:
            mounts["/logs"] = self._root / "logs"
            mounts["/solution"] = self._root / "solution"
            mounts.update(self._mounts)
        for prefix, folder in sorted(mounts.items(), key=lambda item: -len(item[0])):
            if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
                host = folder / os.path.relpath(path, prefix)
                # The agent owns these folders: a link among the path's parents (/app/sub -> /etc)
                # would lead a host-side copy to the host's own files. The last part is the
                # caller's to treat (each removes or refuses a link there).
                root, parent = os.path.realpath(folder), os.path.realpath(host.parent)
                if host != folder and parent != root and not parent.startswith(root.rstrip("/") + "/"):
                    raise LinkEscape(f"{sandbox_path} leads out of the sandbox's folders through a symbolic link")
                return host
        # Nothing persists elsewhere in this sandbox (its other folders are the host's, read-only,
        # or a tmpfs of one command): a path there is not in it.
        raise SandboxError(f"{sandbox_path} is outside the local sandbox's folders and workspace") from (
            FileNotFoundError(sandbox_path)
        )

    def _command(
        self, command: str, cwd: str, user: Optional[User], clean_shell: bool, env: Mapping[str, str]
    ) -> List[str]:
        bash = host_tool("bash")
        argv = [bash, *CLEAN_SHELL_OPTIONS, "-c", command] if clean_shell else [bash, "-c", command]
        if user is not None:
            argv = self._as_user(user) + argv
        if not self.isolated:
            return argv
        capabilities: List[str] = []
        if os.getuid() == 0:
            capabilities = ["--cap-drop", "ALL"]
            for capability in _CAPABILITIES:
                capabilities += ["--cap-add", capability]
        folders = dict.fromkeys((*_LAYERED, _caller()[1], *(("/home",) if self._users else ())))
        layered = [argument for folder in folders for argument in _layered(folder)]
        placed = [(self.workdir, self.workspace), *self._mounts.items()]
        for name, (_, _, home) in self._users.items():
            placed.append((home, self._root / "home" / name))
        # Parents first: a user's home bound after a working directory inside it hid the workspace (red team 98).
        placed.sort(key=lambda item: item[0].rstrip("/").count("/"))
        room = [argument for path, _ in placed for argument in _make_room(path, list(folders))]
        binds = [argument for path, host in placed for argument in ("--bind", str(host), path)]
        if self._users:
            for file in ("passwd", "group"):
                binds += ["--ro-bind", str(self._root / "etc" / file), f"/etc/{file}"]
        return [
            host_tool("bwrap"),
            *_host_binds(),
            *layered,
            "--dev", "/dev",
            "--proc", "/proc",
            *[
                argument
                for folder in _TMPFS
                if _real_folder(folder)
                for argument in (*_scratch_perms(folder), "--tmpfs", folder)
            ],
            "--bind", str(self._root / "tmp"), "/tmp",
            "--bind", str(self._root / "tests"), "/tests",
            "--bind", str(self._root / "logs"), "/logs",
            "--bind", str(self._root / "solution"), "/solution",
            *room,
            *binds,
            "--unshare-pid",
            # Its own System V IPC too, gone with the command: a shared memory segment it leaves
            # behind (no process owns it) would hold the host's memory for good, and the next
            # sample's sandbox, or the host, could read and write it (red team 36).
            "--unshare-ipc",
            *(["--unshare-net"] if self._no_network else []),
            "--die-with-parent",
            *capabilities,
            "--chdir", cwd,
            # The command's environment is set inside: bwrap itself runs on the host, and must never
            # load what a task's LD_PRELOAD names.
            "--clearenv",
            *[argument for name, value in env.items() for argument in ("--setenv", name, value)],
            "--",
            *argv,
        ]  # fmt: skip

    def _as_user(self, user: User) -> List[str]:
        if self.single_user:
            return []  # every name is the caller here (see the class docstring)
        name, _, _ = str(user).partition(":")
        if name in self._users:
            uid, gid, _ = self._users[name]
            return [host_tool("setpriv"), f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]
        try:
            entry = pwd.getpwuid(user) if isinstance(user, int) else pwd.getpwnam(user)
        except KeyError:
            if isinstance(user, int):
                return [host_tool("setpriv"), f"--reuid={user}", f"--regid={user}", "--clear-groups"]
            raise SandboxError(f"the local sandbox has no user named {user!r}") from None
        if entry.pw_uid == os.getuid():
            return []
        if os.getuid() != 0:
            raise SandboxError(f"the local sandbox runs as uid {os.getuid()} and cannot switch to {user!r}")
        return [host_tool("setpriv"), f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--init-groups"]

    async def exec(
        self,
        command: str,
        *,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        timeout_s: Optional[float] = None,
        user: Optional[User] = None,
        clean_shell: bool = False,
    ) -> ExecResult:
        result = await self._exec(command, None, None, cwd, env, timeout_s, user, clean_shell)
        return ExecResult(result.stdout.decode(errors="replace"), result.stderr, result.return_code)

    async def exec_piped(
        self,
        command: str,
        stdin: bytes,
        *,
        stdout_limit: int,
        cwd: Optional[str] = None,
        env: Optional[Mapping[str, str]] = None,
        timeout_s: Optional[float] = None,
        user: Optional[User] = None,
        clean_shell: bool = False,
        exit_marker: bytes = b"",
    ) -> PipedResult:
        """``exec`` with ``stdin`` on the command's standard input and its whole standard output back
        (the exit status costs nothing here: ``exit_marker`` is not needed)."""
        return await self._exec(command, stdin, stdout_limit, cwd, env, timeout_s, user, clean_shell)

    async def _exec(
        self,
        command: str,
        stdin: Optional[bytes],
        stdout_limit: Optional[int],
        cwd: Optional[str],
        env: Optional[Mapping[str, str]],
        timeout_s: Optional[float],
        user: Optional[User],
        clean_shell: bool,
    ) -> PipedResult:
        if isinstance(user, str) and ":" in user:
            raise SandboxError(f"user {user!r}: a user with a group (name:group) works on the Docker sandbox only")
        if user is not None:
            self.add_user(user)
        directory = cwd or self.workdir
        environment: Dict[str, str] = {**self.environment, **(env or {})}
        if clean_shell:
            environment = clean_shell_env(environment, {})
        if not self.isolated:
            environment["TMPDIR"] = self.tmp_dir
        argv = self._command(command, directory, user, clean_shell, environment)
        for _ in range(_SETUP_ATTEMPTS - 1):
            result = await self._run(argv, directory, environment, timeout_s, stdin, stdout_limit)
            if not (self.isolated and result.return_code == 1 and result.stderr.startswith("bwrap: ")):
                return result
            # bubblewrap could not set the namespace up (a mount of the host changing under its
            # recursive read-only bind, as the Docker engine's do): nothing ran, so try again.
        return await self._run(argv, directory, environment, timeout_s, stdin, stdout_limit)

    async def _run(
        self,
        argv: List[str],
        directory: str,
        environment: Mapping[str, str],
        timeout_s: Optional[float],
        stdin: Optional[bytes],
        stdout_limit: Optional[int],
    ) -> PipedResult:
        """Runs ``argv``: its stdout (the tail, or the whole of it up to ``stdout_limit``), its
        stderr's tail and its status."""
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                cwd=directory if not self.isolated else None,
                env=dict(environment) if not self.isolated else {"PATH": os.environ.get("PATH", os.defpath)},
                stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except (OSError, ValueError) as error:
            raise SandboxError(f"cannot start a command in the local sandbox: {error}") from error
        try:
            stdout, stderr, status = await _communicate(process, stdin, stdout_limit, timeout_s)
        finally:
            if not self.isolated:
                _kill_group(process.pid)  # whatever it left behind goes with it
        return PipedResult(stdout, stderr.decode(errors="replace"), status)

    async def upload_file(self, local_path: str, sandbox_path: str) -> None:
        target = self.host_path(sandbox_path)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink():
                target.unlink()
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW
            with open(local_path, "rb") as source, open(os.open(target, flags, 0o600), "wb") as copy:
                shutil.copyfileobj(source, copy)  # readable by the admin alone from the start
        except OSError as error:
            raise SandboxError(f"upload to {sandbox_path} failed: {error}") from error

    async def download_file(self, sandbox_path: str, local_path: str) -> None:
        source = self.host_path(sandbox_path)
        try:
            if source.is_symlink() or not source.is_file():
                raise SandboxError(f"{sandbox_path} is not a regular file in the sandbox")
            shutil.copyfile(source, local_path)
        except OSError as error:
            raise SandboxError(f"download of {sandbox_path} failed: {error}") from error

    async def put_archive(self, folder: str, data: bytes) -> None:
        """Unpacks the tar ``data`` into ``folder``: folders and regular files only, with their modes."""
        try:
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as archive:
                for member in archive:
                    parts = member.name.strip("/").split("/")
                    if any(part in ("", ".", "..") for part in parts) or not (member.isdir() or member.isfile()):
                        raise SandboxError(f"refusing the archive member {member.name!r}")
                    path = self.host_path(posixpath.join(folder, *parts))
                    if path.is_symlink():
                        path.unlink()
                    if member.isdir():
                        path.mkdir(parents=True, exist_ok=True)
                    else:
                        extracted = archive.extractfile(member)
                        assert extracted is not None
                        path.write_bytes(extracted.read())
                    path.chmod(member.mode & 0o7777)
        except (OSError, tarfile.TarError) as error:
            raise SandboxError(f"upload into {folder} failed: {error}") from error

    async def parent_links(self, path: str) -> List[str]:
        """The folders above ``path``, as written, that are symbolic links where they are the sandbox's
        own (a path elsewhere is the host's, read-only): ``get_archive`` would follow them."""
        parts = path_parts(path)
        for depth in range(1, len(parts)):
            prefix = "/" + "/".join(parts[:depth])
            try:
                if stat.S_ISLNK(os.lstat(self.host_path(prefix)).st_mode):
                    return [prefix]
            except (OSError, SandboxError):
                continue
        return []

    async def get_archive(self, path: str, *, limit: int) -> bytes:
        """A tar of ``path``: a file, or a folder and what it holds (links as links); past ``limit``
        bytes, ``SandboxError`` ending "is larger than LIMIT bytes". The host's GNU tar makes it: it
        walks through descriptors, so no depth or path length the agent builds stops it (Python's
        own walk recursed once per level and needed every full path under Linux's PATH_MAX)."""
        source = self.host_path(path)
        try:
            os.lstat(source)  # a missing path raises what source_missing looks for
        except OSError as error:
            raise SandboxError(f"download of {path} failed: {error}") from error
        argv = [host_tool("tar"), "-c", "-f", "-", "--numeric-owner", "-C", str(source.parent), "--", source.name]
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as error:
            raise SandboxError(f"download of {path} failed: cannot start tar: {error}") from error
        try:
            data, errors, status = await _communicate(process, None, limit, None)
        except SandboxError:
            raise SandboxError(f"{path} is larger than {limit} bytes") from None
        # 1: a file changed as it was read; 2: one vanished or could not be read. The archive is
        # still whole, and the caller reads what it holds (an agent's process must not be able to
        # turn a collection into a fault by deleting a file at the right time).
        if status not in (0, 1, 2):
            detail = errors.decode(errors="replace").strip()[-500:]
            raise SandboxError(f"download of {path} failed: tar exited with {status}{': ' + detail if detail else ''}")
        return data


def _retrieve(future: asyncio.Future) -> None:  # type: ignore[type-arg]
    if not future.cancelled():
        future.exception()


async def _communicate(
    process: asyncio.subprocess.Process, stdin: Optional[bytes], stdout_limit: Optional[int], timeout_s: Optional[float]
) -> Tuple[bytes, bytes, int]:
    """Feeds ``stdin`` to ``process`` and reads, until it ends, its stdout (the tail, or all of it up
    to ``stdout_limit``: ``SandboxError`` past it) and its stderr's tail; ``ExecTimeout`` past
    ``timeout_s``. Its process group is killed at either limit, and the pipes are still read to
    their end: asyncio's ``wait()`` returns only once every pipe has closed (3.11+), and it stops
    reading a pipe whose buffer is full, so a command still printing then hung the call for good."""
    assert process.stdout is not None and process.stderr is not None
    stop = functools.partial(_kill_group, process.pid)
    out = _tail(process.stdout) if stdout_limit is None else _whole(process.stdout, stdout_limit, stop)
    feeding = [] if stdin is None else [_feed(process.stdin, stdin)]
    reading = asyncio.gather(out, _tail(process.stderr), process.wait(), *feeding)
    reading.add_done_callback(_retrieve)  # a cancelled run (Ctrl-C, SIGTERM) must not log a stray error
    try:
        outputs = await asyncio.wait_for(asyncio.shield(reading), timeout_s)
    except asyncio.TimeoutError:
        raise ExecTimeout(f"the command outlived {timeout_s} s") from None
    finally:
        if not reading.done():  # timed out or cancelled
            stop()
            await asyncio.wait({reading}, timeout=_SETTLE_SEC)
            reading.cancel()
    stdout, stderr, status = outputs[0], outputs[1], outputs[2]
    assert isinstance(stdout, bytes) and isinstance(stderr, bytes) and isinstance(status, int)
    return stdout, stderr, status


async def _whole(stream: asyncio.StreamReader, limit: int, stop: Callable[[], None]) -> bytes:
    """Everything ``stream`` gives until it closes. Past ``limit`` bytes, ``stop()`` ends the writer,
    the rest is read and dropped, and ``SandboxError`` follows once the stream has closed."""
    kept = bytearray()
    over = False
    while True:
        chunk = await stream.read(1 << 16)
        if not chunk:
            if over:
                raise OutputTooLarge(f"the command printed more than {limit} bytes")
            return bytes(kept)
        if not over:
            kept += chunk
            if len(kept) > limit:
                over = True
                kept = bytearray()
                stop()


async def _feed(stream: Optional[asyncio.StreamWriter], data: bytes) -> None:
    """Writes ``data`` to a command's stdin and closes it; a command that exits without reading
    it all is fine."""
    assert stream is not None
    try:
        stream.write(data)
        await stream.drain()
        stream.close()
    except (BrokenPipeError, ConnectionResetError):
        pass


async def _tail(stream: asyncio.StreamReader, limit: int = MAX_EXEC_OUTPUT_BYTES) -> bytes:
    """Everything ``stream`` gives until it closes, keeping only the last ``limit`` bytes."""
    kept = b""
    while True:
        chunk = await stream.read(1 << 16)
        if not chunk:
            return kept
        kept = (kept + chunk)[-limit:]


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


__all__ = [
    "LocalSandbox",
    "base_env",
    "host_tool",
    "namespaces_available",
]
