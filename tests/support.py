"""Helpers shared by test modules (importable: pytest puts tests/ on sys.path)."""

from __future__ import annotations

import contextlib
import inspect
import os
import subprocess
from pathlib import Path
from typing import Dict, Iterator, Mapping, Optional, Sequence, Union

import pytest

# The shipped examples (the README's and the suite's).
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def make_bin(folder: Path, **links: str) -> Path:
    """A folder of symlinks (name -> target) to build a PATH from."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, target in links.items():
        (folder / name).symlink_to(target)
    return folder


def pyenv_python(version: str) -> Path:
    """The pyenv build of ``version`` (e.g. "3.7"), which this machine kind provides."""
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    matches = sorted((root / "versions").glob(f"{version}.*/bin/python{version}"))
    if not matches:
        pytest.fail(f"no pyenv build of Python {version} under {root}/versions (the machine provides 2.7 and 3.6-3.13)")
    return matches[-1]


PRELOAD_SOURCE = r"""
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>
__attribute__((constructor)) static void mark(void) {
  char comm[64] = "?", line[128];
  int handle = open("/proc/self/comm", O_RDONLY);
  if (handle >= 0) { ssize_t n = read(handle, comm, sizeof comm - 1); if (n > 0) comm[n - 1] = 0; close(handle); }
  umask(0);
  handle = open(MARK, O_WRONLY | O_APPEND | O_CREAT, 0666);
  if (handle >= 0) { int n = snprintf(line, sizeof line, "%s %d\n", comm, (int)geteuid()); write(handle, line, n); close(handle); }
}
"""

# Grading's own programs: none may ever load what a task's LD_PRELOAD names.
GRADING_PROGRAMS = {"mkdir", "mv", "rm", "chown", "chmod", "head", "tail", "sha256sum", "id", "tar", "stat", "bwrap"}


def preload_library(folder: Path, mark: str) -> Path:
    """A shared library whose constructor appends "<program> <euid>" to ``mark`` wherever it loads:
    the agent's LD_PRELOAD, built with the machine's gcc."""
    return compile_c(folder, "mark.so", PRELOAD_SOURCE, "-shared", "-fPIC", f'-DMARK="{mark}"')


def loaded_by(mark: Path) -> set:
    """The programs that loaded the library, as ``(program, euid)`` pairs."""
    if not mark.exists():
        return set()
    return {tuple(line.rsplit(" ", 1)) for line in mark.read_text().splitlines() if line}


HOPPER_SOURCE = r"""
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
/* hopper RUNNER_PID ALIVE_FILE: leaves zombies while the runner lives (a slow /proc to scan), then
   takes a new pid as fast as fork allows for a few seconds, then says it is alive, forever. */
int main(int argc, char **argv) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%s", argv[1]);
  if (fork() != 0) return 0;
  setsid();
  for (int i = 0; i < 2000 && access(path, F_OK) == 0; i++) if (fork() == 0) _exit(0);
  while (access(path, F_OK) == 0) usleep(1000);
  time_t end = time(NULL) + 6;
  while (time(NULL) < end) { pid_t child = fork(); if (child > 0) _exit(0); }
  for (;;) { FILE *alive = fopen(argv[2], "w"); if (alive) { fprintf(alive, "%d\n", getpid()); fclose(alive); } sleep(1); }
}
"""


def compile_c(folder: Path, name: str, source: str, *options: str) -> Path:
    """A program or library built from ``source`` with the machine's gcc (the attacks need C speed)."""
    import shutil
    import subprocess

    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.fail("this machine kind provides gcc, which these attacks need")
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.c").write_text(source)
    subprocess.run([compiler, *options, "-o", str(folder / name), str(folder / f"{name}.c")], check=True)
    return folder / name


# verify runs the agent's program; its daemon copies the runner's report line (key and all) with
# another score, and plants a matching reward.json.
REWRITER = '''
import subprocess, sys
CODE = """
import glob, os, time
if os.fork(): os._exit(0)
os.setsid()
if os.fork(): os._exit(0)
end = time.time() + 20
while time.time() < end:
    for path in glob.glob("/tests/.gym-out-*/report"):
        try:
            line = open(path).read()
        except OSError:
            continue
        if " reward " in line:
            prefix, _, _ = line.partition(" reward ")
            open(path, "w").write(prefix + ' reward {"reward": 1}')
            open("/logs/verifier/reward.json", "w").write('{"reward": 1}')
            os._exit(0)
    time.sleep(0.001)
"""
def verify():
    subprocess.run([sys.executable, "-c", CODE])
    return 0.0
'''


def write_files(root: Path, files: Mapping[str, Union[str, bytes]], *, dedent: bool = False) -> Path:
    """Writes ``files`` (relative name -> text or bytes) under ``root`` (created); ``.sh`` files and
    files in a ``bin/`` folder get the run bit. ``dedent`` strips the common indentation of texts."""
    import textwrap

    root.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(textwrap.dedent(content) if dedent else content)
        if name.endswith(".sh") or "bin/" in name:
            path.chmod(0o755)
    return root


def pack_results(files: "Dict[str, bytes]", sums: "bool" = True) -> "bytes":  # noqa: UP037 (runs in sandboxes)
    """Results as finish packs them (``./<name>`` members, with ``.sums``), as a forger would. Standard
    library only, imports inside: its source also runs inside sandboxes (``IN_SANDBOX``)."""
    import hashlib
    import io
    import tarfile

    files = dict(files)
    if sums:
        files[".sums"] = "".join(
            f"{hashlib.sha256(data).hexdigest()}  {name}\n" for name, data in files.items()
        ).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for name, data in files.items():
            info = tarfile.TarInfo("./" + name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def grading_shell() -> "Optional[int]":  # noqa: UP037 (runs in sandboxes)
    """Inside a sandbox: the grading shell, the ancestor whose fd 6 is a pipe (the exec's stdout)."""
    import os

    pid = os.getppid()
    while pid > 1:
        try:
            if os.readlink(f"/proc/{pid}/fd/6").startswith("pipe:"):
                return pid
        except OSError:
            pass
        with open(f"/proc/{pid}/stat") as handle:
            pid = int(handle.read().rsplit(")", 1)[1].split()[1])
    return None


# The two above, for programs that run inside a sandbox.
IN_SANDBOX = inspect.getsource(pack_results) + "\n\n" + inspect.getsource(grading_shell) + "\n\n"

# verify as the agent's program would act in it: it reads its stdin and writes a results tar claiming a
# reward of 1 into every pipe it reaches (the grading exec's stdout among them for root), with the
# marker that says grading exited 0 (grading.DONE_MARKER) after it, then scores 0.
PIPE_FORGER = (
    IN_SANDBOX
    + """
import json, os, sys
def forged() -> bytes:  # results claiming a reward of 1, as finish would pack them
    files = {"reward.json": b'{"reward": 1}\\n', "meta": b"status 0\\nelapsed_cs 1\\nkinds reward.json=file \\nskipped 0\\n"}
    return pack_results(files) + b"\\nnemo-gym-grading-done\\n"
def verify(workspace):
    seen = {"stdin": sys.stdin.buffer.read(), "written": [], "denied": []}
    seen["stdin"] = len(seen["stdin"])
    try:
        os.write(6, forged())
        seen["written"].append("fd 6")
    except OSError:
        seen["denied"].append("fd 6")
    pid = os.getpid()
    while pid > 1:  # every pipe of every ancestor: the grading shell's stdout among them
        for fd in os.listdir(f"/proc/{pid}/fd") if os.access(f"/proc/{pid}/fd", os.R_OK) else []:
            path = f"/proc/{pid}/fd/{fd}"
            try:
                if os.readlink(path).startswith("pipe:"):
                    with open(path, "wb") as handle:
                        handle.write(forged())
                    seen["written"].append(path)
            except OSError:
                seen["denied"].append(path)
        with open(f"/proc/{pid}/stat") as handle:
            pid = int(handle.read().rsplit(")", 1)[1].split()[1])
    print("pipes:", json.dumps(seen))  # what a user other than root can leave
    try:
        (workspace / "pipes.json").write_text(json.dumps(seen))  # root's forgery replaced the output
    except OSError:
        pass
    return 0.0
"""
)


@contextlib.contextmanager
def nested_folders(folder: Path, parts: Sequence[str], *, scratch: Path) -> Iterator[str]:
    """Folders ``parts`` inside each other under ``folder`` (made), with a file ``end.txt`` in the
    innermost, made through descriptors: the path may pass Linux's PATH_MAX, as an agent's can. Yields
    the innermost folder's path relative to ``folder``. Afterwards ``scratch`` (the test's folder) is
    emptied with ``rm -rf``, copies of the tree included: pytest's own cleanup recurses once per level
    and would fail a later session on a tree this deep."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        handle = os.open(folder, os.O_RDONLY)
        try:
            for part in parts:
                os.mkdir(part, dir_fd=handle)
                inner = os.open(part, os.O_RDONLY, dir_fd=handle)
                os.close(handle)
                handle = inner
            with open(os.open("end.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=handle), "w") as end:
                end.write("the end")
        finally:
            os.close(handle)
        yield "/".join(parts)
    finally:
        subprocess.run(["rm", "-rf", "--", *(str(path) for path in scratch.iterdir())], check=True)
