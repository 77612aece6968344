"""Which interpreter root's ``test.sh`` starts: never one whose start-up code another user can change.

Every interpreter start imports ``encodings`` from its standard library before any code of the
runner's runs (with ``-E -S -s -B``; on 3.8-3.10 ``codecs``, ``io``, ``abc`` and ``os`` too). An image
that gives the agent a library (a ``chown -R`` of ``lib/python3.X`` so that it can install packages)
would hand the agent root, and the run's key, before the runner could look. Each attack plants an
``encodings`` that records who ran it, and each control shows the trap works on whoever starts it.
Red team 27 found the cases after the first check (a library told by its ``os.py`` alone).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

import pytest
from test_attacks import needs_root, task, verify

pytestmark = pytest.mark.every_python  # the in-sandbox part: proven on every Python (noxfile)

AGENT = 65534
STDLIB = Path(os.__file__).parent  # the running interpreter's: nox runs 3.8-3.13
X_Y = STDLIB.name  # python3.X
VERIFIER = "def verify():\n    return 1.0\n"


def _trap(marker: Path) -> str:
    """Appends ``encodings <euid>`` to ``marker``; where the agent renamed os.py to os_real.py, puts
    the real os back into sys.modules, so that the run goes on as usual (3.8-3.10 import os from disk)."""
    return textwrap.dedent(
        f"""\
        import posix as _p, sys as _s
        _fd = _p.open({str(marker)!r}, _p.O_WRONLY | _p.O_APPEND | _p.O_CREAT, 0o666)
        _p.write(_fd, b"encodings %d\\n" % _p.geteuid()); _p.close(_fd)
        _real = __path__[0].rsplit("/", 1)[0] + "/os_real.py"
        if "os" not in _s.modules and _p.access(_real, _p.F_OK):
            import _frozen_importlib as _b, _frozen_importlib_external as _e
            _spec = _b.spec_from_loader("os", _e.SourceFileLoader("os", _real))
            _m = _b.module_from_spec(_spec); _s.modules["os"] = _m; _spec.loader.exec_module(_m)
        """
    )


def trapped_stdlib(dest: Path, marker: Path, original: Path = STDLIB, *, keep_os: bool = True) -> Path:
    """A standard library at ``dest``: ``original``'s entries linked in, ``encodings`` copied with the
    trap first, and os.py kept, or renamed os_real.py (Python's landmark gone)."""
    dest.mkdir(parents=True)
    for entry in STDLIB.iterdir():
        if entry.name not in ("encodings", "os.py", "site-packages", "__pycache__"):
            (dest / entry.name).symlink_to(original / entry.name)
    (dest / ("os.py" if keep_os else "os_real.py")).symlink_to(original / "os.py")
    shutil.copytree(STDLIB / "encodings", dest / "encodings", ignore=shutil.ignore_patterns("__pycache__"))
    init = dest / "encodings" / "__init__.py"
    init.write_text(_trap(marker) + init.read_text())
    return dest


def copied_interpreter(folder: Path) -> Path:
    """``folder/python3``: a copy of this interpreter (root's, not a link), so that Python looks for
    its library from ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(os.path.realpath(sys.executable), folder / "python3")
    return folder


def give_to_agent(top: Path) -> None:
    for path in [top, *top.rglob("*")]:
        os.lchown(path, AGENT, AGENT)


def ran(marker: Path) -> str:
    return marker.read_text() if marker.exists() else ""


FALLBACK = os.path.dirname(os.path.realpath(sys.executable))  # root's, with its library beside it


@pytest.fixture
def base() -> Iterator[Path]:
    """A folder for the installations under test whose folders above are root's and nobody else's
    (/opt): under /tmp, a sticky folder further up would decide some cases alone."""
    needs_root()
    folder = Path(tempfile.mkdtemp(prefix="nemo-gym-attack-", dir="/opt"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder)


@pytest.mark.parametrize("given", ["nothing", "the standard library's folder", "the folder above it"])
def test_an_interpreter_whose_standard_library_another_user_can_change_is_never_started_by_root(tmp_path, given):
    """test.sh must not start it, and falls back to the next interpreter on PATH (LocalSandbox, as
    the server grades)."""
    needs_root()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    marker = workspace / "hijacked"
    copied_interpreter(tmp_path / "pfx" / "bin")
    lib = trapped_stdlib(tmp_path / "pfx" / "lib" / X_Y, marker)
    if given == "the standard library's folder":
        give_to_agent(lib)
    elif given == "the folder above it":
        lib.parent.chmod(0o777)  # the agent may rename lib/python3.X away and put its own in place
    env = {"PATH": f"/opt/pfx/bin:{FALLBACK}:/usr/bin:/bin"}
    task_dir = task(tmp_path / "task", {"tests/verifier.py": VERIFIER})
    outcome = verify(task_dir, workspace, sandbox_env=env, mounts={"/opt/pfx": tmp_path / "pfx"})
    if given == "nothing":  # the trap works on whoever starts it: root did, as nothing forbade it
        assert ran(marker).startswith("encodings 0"), ran(marker)
    else:
        assert ran(marker) == "", (
            f"root started an interpreter whose standard library the agent can change: {ran(marker)}"
        )
    assert (outcome.reward, outcome.masked) == (1.0, False), outcome


def _refused_and_graded(run, marker: Path) -> None:
    assert ran(marker) == "", f"root started it: {ran(marker)!r}\n{run.output}"
    assert run.reward == {"reward": 1.0}, run.output  # the next interpreter on PATH graded


@pytest.mark.parametrize(
    "variable",
    ["BASHOPTS=failglob", "GLOBIGNORE={pfx}/lib/*", "BASHOPTS=nullglob:nocaseglob", "SHELLOPTS=noglob"],
)
def test_shell_options_from_the_environment_do_not_hide_a_standard_library(run_shim, tmp_path, base, variable):
    """Stock Harbor runs test.sh with the task's env, and bash takes BASHOPTS and SHELLOPTS from it: a
    glob that matched nothing must not end test.sh (failglob), and no option may hide the library it
    checks (noglob left the pattern unexpanded, so no library was ever checked). bash takes GLOBIGNORE
    from the environment as a plain variable, without its effect: the case keeps it so."""
    marker = tmp_path / "workspace" / "hijacked"
    copied_interpreter(base / "pfx" / "bin")
    give_to_agent(trapped_stdlib(base / "pfx" / "lib" / X_Y, marker))
    (base / "pfx" / "lib64").mkdir()  # with no python3* in it (Debian's /usr/lib64): a glob that matches nothing
    name, value = variable.replace("{pfx}", str(base / "pfx")).split("=")
    _refused_and_graded(run_shim(VERIFIER, path=f"{base}/pfx/bin:{FALLBACK}", env={name: value}), marker)


@pytest.mark.parametrize("suffix", ["/", "/.", "//", "/./", "/.//"])
def test_a_path_entry_spelt_with_a_trailing_slash_still_has_its_library_checked(run_shim, tmp_path, base, suffix):
    """ENV PATH=/opt/x/bin/:$PATH is a common spelling: "${1%/*}" was then the interpreter's own
    folder, so test.sh looked in bin/lib/, while Python tidies the path and uses the library beside."""
    marker = tmp_path / "workspace" / "hijacked"
    bin_dir = copied_interpreter(base / "pfx" / "bin")
    give_to_agent(trapped_stdlib(base / "pfx" / "lib" / X_Y, marker))
    _refused_and_graded(run_shim(VERIFIER, path=f"{bin_dir}{suffix}:{FALLBACK}"), marker)


def test_an_interpreter_at_the_top_of_its_prefix_has_its_library_checked(run_shim, tmp_path, base):
    """Python's search starts in the interpreter's own folder: flat/python3 uses flat/lib/python3.X."""
    marker = tmp_path / "workspace" / "hijacked"
    flat = copied_interpreter(base / "flat")
    give_to_agent(trapped_stdlib(flat / "lib" / X_Y, marker))
    os.lchown(flat / "lib", 0, 0)  # only the library is the agent's
    _refused_and_graded(run_shim(VERIFIER, path=f"{flat}:{FALLBACK}"), marker)


def test_a_sticky_folder_further_up_cannot_supply_the_library(run_shim, tmp_path, base):
    """No library beside the interpreter (a copied binary): Python walks up every folder for
    lib/python3.X/os.py, and test.sh allowed sticky ones, where the agent can make lib/ (as in /tmp)."""
    marker = tmp_path / "workspace" / "hijacked"
    sticky = base / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    bin_dir = copied_interpreter(sticky / "inst" / "bin")  # root's; nothing beside it
    give_to_agent(trapped_stdlib(sticky / "lib" / X_Y, marker).parent)  # what the agent may create there
    _refused_and_graded(run_shim(VERIFIER, path=f"{bin_dir}:{FALLBACK}"), marker)


def test_a_venv_whose_pyvenv_cfg_another_user_can_change_is_never_started_by_root(run_shim, tmp_path, base):
    """A venv's folders and interpreter are root's, but the agent can write its pyvenv.cfg: its
    ``home`` names the agent's own installation, whose library Python uses."""
    marker = tmp_path / "workspace" / "hijacked"
    agents = copied_interpreter(base / "agents" / "bin")
    trapped_stdlib(base / "agents" / "lib" / X_Y, marker)
    give_to_agent(base / "agents")
    venv = base / "venv"
    copied_interpreter(venv / "bin")  # a copy: 3.8 looks for pyvenv.cfg beside a link's target
    (venv / "lib" / X_Y / "site-packages").mkdir(parents=True)
    config = venv / "pyvenv.cfg"
    config.write_text(f"home = {agents}\ninclude-system-site-packages = false\n")
    marker.parent.mkdir()
    probe = subprocess.run([str(venv / "bin" / "python3"), "-E", "-S", "-c", "pass"])
    assert probe.returncode == 0 and ran(marker).startswith("encodings 0"), ran(marker)  # the trap works
    marker.unlink()
    os.lchown(config, AGENT, AGENT)
    _refused_and_graded(run_shim(VERIFIER, path=f"{venv}/bin:{FALLBACK}"), marker)


def _in_a_mount_namespace(*mounts: Tuple[Path, Path]) -> List[str]:
    script = " && ".join(f"mount --bind '{source}' '{target}'" for source, target in mounts)
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script + ' && exec "$@"', "sh"]


@pytest.mark.parametrize("os_py", ["removed", "kept"])
@pytest.mark.parametrize("owned", ["the standard library", "the lib folder holding it"])
def test_a_library_the_agent_owns_is_refused_with_its_os_py_or_without(tmp_path, owned, os_py):
    """test.sh told a library by its os.py, which whoever owns the library can remove. Python then
    falls back on the prefix it was built for, which is that very folder for any usual install
    (python:3.x images, pyenv, Debian's /usr): its encodings ran as root. The real installation's
    folders are replaced in a private mount namespace only."""
    needs_root()
    if shutil.which("unshare") is None or subprocess.run(["unshare", "-m", "true"]).returncode != 0:
        pytest.fail("this machine kind runs unshare -m as root (util-linux)")
    prefix = Path(sys.base_prefix)  # the real installation: the prefix it was built for is where it is
    real_lib = prefix / "lib"
    assert (real_lib / X_Y / "os.py").is_file()
    original = tmp_path / "original-lib"  # the real lib/, seen from here once the other is mounted over it
    original.mkdir()
    marker = tmp_path / "marker"
    keep = os_py == "kept"
    if owned == "the standard library":  # a chown -R of lib/python3.X
        stdlib = trapped_stdlib(tmp_path / "agents" / X_Y, marker, original / X_Y, keep_os=keep)
        give_to_agent(stdlib)
        mounts = [(real_lib, original), (stdlib, real_lib / X_Y)]
    else:  # a chown of lib/: the agent moved python3.X aside and made its own
        lib = tmp_path / "agents" / "lib"
        lib.mkdir(parents=True)
        for entry in real_lib.iterdir():
            if entry.name != X_Y:
                (lib / entry.name).symlink_to(original / entry.name)
        trapped_stdlib(lib / X_Y, marker, original / X_Y, keep_os=keep)
        give_to_agent(lib)
        mounts = [(real_lib, original), (lib, real_lib)]
    tests = tmp_path / "tests"
    from nemo_gym.data.tasks.harbor.staging import lay_out, shim_files

    lay_out(tests, shim_files(VERIFIER.encode(), {}))
    (tmp_path / "workspace").mkdir()
    run = subprocess.run(
        [*_in_a_mount_namespace(*mounts), "/bin/bash", str(tests / "test.sh")],
        cwd=tmp_path / "workspace",
        env={"PATH": f"{prefix}/bin:/usr/bin:/bin", "VERIFIER_LOGS_DIR": str(tmp_path / "logs")},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        timeout=120,
    )
    output = run.stdout.decode(errors="replace")
    assert ran(marker) == "", f"root started it: {ran(marker)!r}\n{output}"
    assert 'reward.json: {"reward": 1.0}' in output, output  # the next interpreter on PATH graded


# --- Red team 28: Python's searches up the tree (the library's and lib-dynload's, each on its own) ---

DYNLOAD = STDLIB / "lib-dynload"
# The runner reads task_data.json with _json's scanner, as root, before verify runs.
DATA_VERIFIER = "def verify(task_data):\n    return float(task_data['score'])\n"


def honest_library_without_lib_dynload(dest: Path) -> Path:
    """Root's standard library beside the interpreter, os.py and all, but no lib-dynload (an
    installation whose extension modules are built in, or kept elsewhere)."""
    dest.mkdir(parents=True)
    for entry in STDLIB.iterdir():
        if entry.name not in ("lib-dynload", "site-packages", "__pycache__"):
            (dest / entry.name).symlink_to(entry)
    return dest


def trapped_lib_dynload(dest: Path, marker: Path) -> Path:
    """An agent's lib-dynload: the real extension modules, but _json is a .py that records who
    imported it and then loads the real one (so the run goes on as usual)."""
    dest.mkdir(parents=True)
    real_json = None
    for entry in DYNLOAD.iterdir():
        if entry.name.startswith("_json."):
            real_json = entry
            continue
        (dest / entry.name).symlink_to(entry)
    assert real_json is not None, "this build keeps _json in lib-dynload"
    (dest / "_json.py").write_text(
        textwrap.dedent(
            f"""\
            import posix as _p, sys as _s
            _fd = _p.open({str(marker)!r}, _p.O_WRONLY | _p.O_APPEND | _p.O_CREAT, 0o666)
            _p.write(_fd, b"_json %d\\n" % _p.geteuid()); _p.close(_fd)
            import importlib.util as _u
            _spec = _u.spec_from_file_location("_json", {str(real_json)!r})
            _m = _u.module_from_spec(_spec); _spec.loader.exec_module(_m); _s.modules["_json"] = _m
            """
        )
    )
    return dest


def _trap_works(python: Path, marker: Path, code: str = "import json") -> None:
    """The control: the trap runs for whoever starts this interpreter (here root, directly)."""
    marker.parent.mkdir(parents=True, exist_ok=True)
    assert os.spawnv(os.P_WAIT, str(python), [str(python), "-E", "-S", "-s", "-B", "-c", code]) == 0
    assert ran(marker).startswith(("encodings 0", "_json 0")), ran(marker)
    marker.unlink()


def test_exec_prefix_is_searched_separately_up_a_sticky_folder(run_shim, tmp_path, base):
    """A library with os.py beside the interpreter lets sticky folders further up pass, but Python
    looks for lib/python3.X/lib-dynload on its own, from the interpreter's folder up: without one
    beside, the first one up the tree (one the agent makes in /tmp) is exec_prefix, on sys.path."""
    marker = tmp_path / "workspace" / "hijacked"
    sticky = base / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    bin_dir = copied_interpreter(sticky / "inst" / "bin")
    honest_library_without_lib_dynload(sticky / "inst" / "lib" / X_Y)
    trapped_lib_dynload(sticky / "lib" / X_Y / "lib-dynload", marker)
    give_to_agent(sticky / "lib")
    _trap_works(bin_dir / "python3", marker)
    _refused_and_graded(run_shim(DATA_VERIFIER, {"score": 1}, path=f"{bin_dir}:{FALLBACK}"), marker)


def test_exec_prefix_is_searched_in_a_lib_folder_of_an_ancestor(run_shim, tmp_path, base):
    """No sticky folder needed: an ancestor's own lib/ (not beside the interpreter, never checked)
    that the agent owns supplies lib-dynload."""
    marker = tmp_path / "workspace" / "hijacked"
    bin_dir = copied_interpreter(base / "tools" / "inst" / "bin")
    honest_library_without_lib_dynload(base / "tools" / "inst" / "lib" / X_Y)
    trapped_lib_dynload(base / "tools" / "lib" / X_Y / "lib-dynload", marker)
    give_to_agent(base / "tools" / "lib")
    _trap_works(bin_dir / "python3", marker)
    _refused_and_graded(run_shim(DATA_VERIFIER, {"score": 1}, path=f"{bin_dir}:{FALLBACK}"), marker)


def test_nothing_beside_walks_up_into_an_ancestors_lib_folder(run_shim, tmp_path, base):
    """Nothing beside the interpreter: test.sh checks that no folder further up is writable, but
    Python looks in each one's lib/python3.X/ for os.py, and an ancestor's lib/ is never checked."""
    marker = tmp_path / "workspace" / "hijacked"
    bin_dir = copied_interpreter(base / "tools" / "inst" / "bin")  # root's; nothing beside it
    give_to_agent(trapped_stdlib(base / "tools" / "lib" / X_Y, marker).parent)
    _trap_works(bin_dir / "python3", marker, "pass")
    _refused_and_graded(run_shim(VERIFIER, path=f"{bin_dir}:{FALLBACK}"), marker)


def test_a_link_to_its_neighbour_does_not_make_sticky_folders_safe(run_shim, tmp_path, base):
    """python3 -> python3.X, the usual layout: the link makes test.sh allow sticky folders further
    up, but Python resolves it to the same folder and walks up from there (into /tmp/lib)."""
    marker = tmp_path / "workspace" / "hijacked"
    sticky = base / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    bin_dir = copied_interpreter(sticky / "inst" / "bin")
    (bin_dir / "python3").rename(bin_dir / X_Y)
    (bin_dir / "python3").symlink_to(X_Y)  # in its own folder: nothing else to check
    give_to_agent(trapped_stdlib(sticky / "lib" / X_Y, marker).parent)  # what the agent may create there
    _trap_works(bin_dir / "python3", marker, "pass")
    _refused_and_graded(run_shim(VERIFIER, path=f"{bin_dir}:{FALLBACK}"), marker)


def test_a_library_of_another_version_beside_does_not_stop_the_walk(run_shim, tmp_path, base):
    """test.sh takes any lib/python3*/os.py as the library beside; Python looks only for its own
    version's, and walks up past one of another version (into a sticky folder)."""
    marker = tmp_path / "workspace" / "hijacked"
    sticky = base / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    bin_dir = copied_interpreter(sticky / "inst" / "bin")
    other = sticky / "inst" / "lib" / "python3.99"
    other.mkdir(parents=True)
    (other / "os.py").write_text("")  # root's, of another version
    give_to_agent(trapped_stdlib(sticky / "lib" / X_Y, marker).parent)
    _trap_works(bin_dir / "python3", marker, "pass")
    _refused_and_graded(run_shim(VERIFIER, path=f"{bin_dir}:{FALLBACK}"), marker)


def test_a_path_entry_ending_in_dot_dot_has_its_folder_above_checked(run_shim, tmp_path, base):
    """PATH=/opt/x/bin/..: "${1%/*}" is /opt/x/bin, a folder below, not the one above, so the
    library Python finds there (beside the real folder's parent) is never checked."""
    marker = tmp_path / "workspace" / "hijacked"
    inst = copied_interpreter(base / "pfx" / "inst")  # inst/python3: a flat installation
    (inst / "bin").mkdir()
    give_to_agent(trapped_stdlib(base / "pfx" / "lib" / X_Y, marker).parent)
    _trap_works(inst / "python3", marker, "pass")
    _refused_and_graded(run_shim(VERIFIER, path=f"{inst}/bin/..:{FALLBACK}"), marker)


def test_errexit_from_the_environment_does_not_end_the_search(run_shim, tmp_path, base):
    """Stock Harbor passes the task's env, and bash takes SHELLOPTS from it: with errexit, the first
    interpreter refused ended test.sh (status 1, no message, no fallback, no reward)."""
    agents = copied_interpreter(base / "agents" / "bin")
    give_to_agent(base / "agents")
    run = run_shim(VERIFIER, path=f"{agents}:{FALLBACK}", env={"SHELLOPTS": "errexit"})
    assert run.reward == {"reward": 1.0}, run.output


WHICH = "import sys\n\ndef verify():\n    print('ran by', sys.prefix)\n    return 1.0\n"


def test_a_link_to_its_neighbour_under_a_sticky_folder_is_refused_before_anyone_made_lib(run_shim, tmp_path, base):
    """python3 -> python3.X under a sticky folder with nothing further up yet: the agent could make
    sticky/lib/python3.X after the check and before the start, so test.sh must not rely on finding
    none (the same-folder link gets no allowance for sticky folders)."""
    sticky = base / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    bin_dir = copied_interpreter(sticky / "inst" / "bin")
    (bin_dir / "python3").rename(bin_dir / X_Y)
    (bin_dir / "python3").symlink_to(X_Y)
    (sticky / "inst" / "lib").mkdir()
    (sticky / "inst" / "lib" / X_Y).symlink_to(STDLIB)  # an honest library beside, the real one
    run = run_shim(WHICH, path=f"{bin_dir}:{FALLBACK}")
    assert run.reward == {"reward": 1.0}, run.output
    assert "ran by" in run.output and f"ran by {sticky}" not in run.output, run.output
    assert (
        f"verifier note: using {FALLBACK}/python3; passed over: {sticky}/inst/bin/python3 is in a folder" in run.output
    ), run.output


def test_a_venv_under_a_sticky_folder_is_started(run_shim, tmp_path, base):
    """A venv searches for its library from its home, never from its own folder up: a sticky folder
    above it (a root venv in /tmp) is no way in, and refusing it would fail honest runs."""
    sticky = base / "sticky"
    sticky.mkdir()
    sticky.chmod(0o1777)
    real = os.path.realpath(sys.executable)
    made = subprocess.run([real, "-m", "venv", "--without-pip", "--copies", str(sticky / "venv")])
    assert made.returncode == 0
    run = run_shim(WHICH, path=f"{sticky}/venv/bin:{FALLBACK}")
    assert run.reward == {"reward": 1.0}, run.output
    assert f"ran by {sticky / 'venv'}" in run.output, run.output


# --- Red team 29: folder links on the way, a linked pyvenv.cfg, build trees, a zip in lib/ ---


def test_a_folder_link_into_a_folder_the_agent_owns_is_refused(run_shim, tmp_path, base):
    """PATH names a root installation through a root folder link (link -> data/inst) whose target's
    parent, data/, is the agent's. test.sh stats the spelt ancestors (link: '0 777 symbolic link',
    skipped), never data/, so the agent can swap data/inst once the check is done (races allowed):
    Python looks for link/lib by its spelling, which is then the agent's. The control replays the
    swap and starts the interpreter as root by the same path."""
    marker = tmp_path / "workspace" / "hijacked"
    base.chmod(0o755)  # mkdtemp made it 700: the agent reaches data/ through it
    data = base / "data"
    copied_interpreter(data / "inst" / "bin")
    (data / "inst" / "lib").mkdir()
    (data / "inst" / "lib" / X_Y).symlink_to(STDLIB)  # an honest library beside
    os.lchown(data, AGENT, AGENT)  # only data/ itself is the agent's
    (base / "link").symlink_to(data / "inst")
    evil = data / "evil"  # what the agent prepared (root copies the library: /root is closed to it)
    evil.mkdir()
    (evil / "bin").symlink_to(data / "old" / "bin")
    trapped_stdlib(evil / "lib" / X_Y, marker)
    give_to_agent(evil)
    run = run_shim(WHICH, path=f"{base}/link/bin:{FALLBACK}")
    accepted = f"ran by {base}/link" in run.output
    # What the agent does once the check passed: inst aside, its own inst in its place.
    pid = os.fork()
    if pid == 0:  # as the agent
        try:
            os.setgid(AGENT)
            os.setuid(AGENT)
            (data / "inst").rename(data / "old")
            evil.rename(data / "inst")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    _trap_works(base / "link" / "bin" / "python3", marker, "pass")  # root runs the agent's encodings
    assert not accepted, run.output


def test_a_linked_pyvenv_cfg_is_checked_at_its_target(run_shim, tmp_path, base):
    """pyvenv.cfg as a link (root's): stat prints '0 777 symbolic link' and the line is skipped;
    Python reads the target, here the agent's, whose home is the agent's library."""
    marker = tmp_path / "workspace" / "hijacked"
    agents = copied_interpreter(base / "agents" / "bin")
    trapped_stdlib(base / "agents" / "lib" / X_Y, marker)
    (base / "agents" / "cfg").write_text(f"home = {agents}\n")
    give_to_agent(base / "agents")
    venv = base / "venv"
    copied_interpreter(venv / "bin")
    (venv / "lib" / X_Y / "site-packages").mkdir(parents=True)
    (venv / "pyvenv.cfg").symlink_to(base / "agents" / "cfg")
    _trap_works(venv / "bin" / "python3", marker, "pass")
    _refused_and_graded(run_shim(VERIFIER, path=f"{venv}/bin:{FALLBACK}"), marker)


def test_a_build_tree_reads_Lib_which_is_never_checked(run_shim, tmp_path, base):
    """An interpreter in its build tree (pybuilddir.txt beside it on 3.11+, Modules/Setup.local on
    3.8-3.10): Python's library is Lib/, capital L, which test.sh never looks at."""
    marker = tmp_path / "workspace" / "hijacked"
    tree = copied_interpreter(base / "cpython")
    (tree / "pybuilddir.txt").write_text("build/lib\n")
    (tree / "Modules").mkdir()
    (tree / "Modules" / "Setup.local").write_text("")
    give_to_agent(trapped_stdlib(tree / "Lib", marker))
    _trap_works(tree / "python3", marker, "pass")
    _refused_and_graded(run_shim(VERIFIER, path=f"{tree}:{FALLBACK}"), marker)


def test_an_agents_zip_in_roots_lib_is_checked(run_shim, tmp_path, base):
    """lib/python3XY.zip comes first on sys.path (and, 3.11+, Python looks for it up the tree first):
    the python3* glob keeps folders only ([ -d ]), so a zip file there, the agent's, is never stat'ed."""
    import zipfile

    marker = tmp_path / "workspace" / "hijacked"
    pfx = base / "pfx"
    bin_dir = copied_interpreter(pfx / "bin")
    (pfx / "lib").mkdir()
    (pfx / "lib" / X_Y).symlink_to(STDLIB)  # root's honest library
    trapped = trapped_stdlib(tmp_path / "agents-src", marker)
    zip_path = pfx / "lib" / f"python{sys.version_info[0]}{sys.version_info[1]}.zip"
    with zipfile.ZipFile(zip_path, "w") as archive:
        for entry in (trapped / "encodings").rglob("*.py"):
            archive.write(entry, str(entry.relative_to(trapped)))
    os.lchown(zip_path, AGENT, AGENT)  # the agent's file in root's lib/
    _trap_works(bin_dir / "python3", marker, "pass")
    _refused_and_graded(run_shim(VERIFIER, path=f"{bin_dir}:{FALLBACK}"), marker)


# --- Red team 60: a .pth file (root's) that puts a folder of the agent's on sys.path ---

FORGER = (
    "import os, sys\n"
    "runner = sys.modules.get('_gym_runner')\n"
    "if runner is not None:\n"
    "    runner.call_verify = lambda verify, here: 1.0\n"
    "print('the agent ran in the runner as', os.geteuid())\n"
)
IMPORTS_THE_AGENTS = (
    "def verify():\n"
    "    try:\n"
    "        import agents_module  # noqa: F401\n"
    "    except ImportError:\n"
    "        return 0.25\n"
    "    return 0.5\n"
)


def _agents_folder(
    tmp_path: Path, base: Path, where: str, name: str, contents: Dict[str, str]
) -> Tuple[Path, Dict[str, str]]:
    """A folder of the agent's holding ``contents``: ``name`` in run_shim's workspace, or a folder under
    ``base`` the agent owns; and the workspace files run_shim is to write (the first case's)."""
    if where == "inside the working directory":
        return tmp_path / "workspace" / name, {f"{name}/{file}": text for file, text in contents.items()}
    agents = base / "agents"
    agents.mkdir()
    for file, text in contents.items():
        (agents / file).write_text(text)
    give_to_agent(agents)
    return agents, {}


@pytest.mark.parametrize("where", ["inside the working directory", "a folder the agent owns"])
def test_a_pth_file_never_puts_the_agents_folder_on_the_runners_path(run_shim, tmp_path, base, where):
    """An editable install writes a root-owned ``.pth`` holding the project's folder (``/app/src``, or
    ``/app`` itself), which the agent owns: ``site.main()`` put it on sys.path and imported the agent's
    ``sitecustomize.py`` from it inside the runner, which then graded a wrong answer 1.0 (and later
    imports found the agent's modules there). Such an entry is dropped before anything imports from
    it, as a ``PYTHONPATH`` entry would be; a root folder's ``sitecustomize`` still runs."""
    real = os.path.realpath(sys.executable)
    made = subprocess.run([real, "-m", "venv", "--without-pip", "--copies", str(base / "venv")])
    assert made.returncode == 0
    site_packages = next((base / "venv").glob("lib/python3*/site-packages"))
    agents, files = _agents_folder(tmp_path, base, where, "src", {"sitecustomize.py": FORGER, "agents_module.py": ""})
    (site_packages / "__editable__.project-0.1.pth").write_text(f"{agents}\n")
    run = run_shim(IMPORTS_THE_AGENTS, workspace_files=files, path=f"{base}/venv/bin:{FALLBACK}")
    assert "the agent ran" not in run.output, run.output
    assert run.reward == {"reward": 0.25}, run.output
    assert f"verifier warning: {agents} (from __editable__.project-0.1.pth) " in run.output, run.output
    # A root folder outside the working directory is the image's own: its modules and sitecustomize stay.
    image = base / "image"
    image.mkdir()
    (image / "sitecustomize.py").write_text("print('the image customized its Python')\n")
    (image / "agents_module.py").write_text("")
    (site_packages / "__editable__.project-0.1.pth").write_text(f"{image}\n")
    run = run_shim(IMPORTS_THE_AGENTS, workspace_files=files, path=f"{base}/venv/bin:{FALLBACK}")
    assert run.reward == {"reward": 0.5} and "the image customized its Python" in run.output, run.output


def _root_venv(base: Path) -> Path:
    """A root venv under ``base`` (no pip): its site-packages folder."""
    made = subprocess.run(
        [os.path.realpath(sys.executable), "-m", "venv", "--without-pip", "--copies", str(base / "venv")]
    )
    assert made.returncode == 0
    return next((base / "venv").glob("lib/python3*/site-packages"))


def test_a_pth_import_line_never_finds_its_module_in_a_folder_of_the_agents(run_shim, tmp_path, base):
    """Red team 62: site runs a ``.pth`` file's import lines while it goes, and the folder of an
    earlier ``.pth`` (the editable install's ``/app/src``) was still on sys.path when a later one ran
    (Debian's two dist-packages: ``distutils-precedence.pth`` imported the agent's ``_distutils_hack``,
    after the runner was sealed). A folder joins sys.path only once it is checked, line by line."""
    site_packages = _root_venv(base)
    image = base / "image"
    image.mkdir()
    (image / "rootmod.py").write_text("print('the image module ran')\n")
    agents = tmp_path / "workspace" / "src"
    (site_packages / "a-editable.pth").write_text(f"{agents}\n")
    (site_packages / "b-image.pth").write_text(f"{image}\nimport rootmod\n")
    files = {"src/rootmod.py": FORGER}
    run = run_shim(IMPORTS_THE_AGENTS, workspace_files=files, path=f"{base}/venv/bin:{FALLBACK}")
    assert "the agent ran" not in run.output and "the image module ran" in run.output, run.output
    assert run.reward == {"reward": 0.25}, run.output


def test_a_pth_file_with_a_byte_order_mark_reads_as_without_it_and_loads_no_codec(run_shim, base):
    """The runner reads ``.pth`` files itself (``_add_pth``): a leading byte order mark is dropped, as
    the "utf-8-sig" codec drops it, without importing that codec (a start-up cost of every run)."""
    site_packages = _root_venv(base)
    image = base / "image"
    image.mkdir()
    (image / "rootmod.py").write_text("print('the image module ran')\n")
    (site_packages / "image.pth").write_bytes(b"\xef\xbb\xbf" + f"{image}\nimport rootmod\n".encode())
    verifier = "import sys\ndef verify():\n    return 0.25 if 'encodings.utf_8_sig' in sys.modules else 0.5\n"
    run = run_shim(verifier, path=f"{base}/venv/bin:{FALLBACK}")
    assert "the image module ran" in run.output and run.reward == {"reward": 0.5}, run.output


def test_a_pth_import_line_that_puts_the_agents_folder_first_is_undone_before_the_runner_imports(
    run_shim, tmp_path, base
):
    """Red team 62: ``import sys; sys.path.insert(0, ...)`` (easy-install's idiom) with the agent's
    folder: the runner then imported its own ``_gym_channel`` to check the entries, and found the
    agent's there first (stock Harbor's mode, uid 0)."""
    site_packages = _root_venv(base)
    agents = tmp_path / "workspace" / "src"
    (site_packages / "easy-install.pth").write_text(f"import sys; sys.path.insert(0, {str(agents)!r})\n")
    forged = FORGER + "def safe_entries(*args):\n    return {}, []\n"
    files = {f"src/{name}.py": forged for name in ("_gym_channel", "_gym_runner_rare", "sitecustomize")}
    run = run_shim(IMPORTS_THE_AGENTS, workspace_files=files, path=f"{base}/venv/bin:{FALLBACK}")
    assert "the agent ran" not in run.output, run.output
    assert run.reward == {"reward": 0.25}, run.output
    assert f"verifier warning: {agents} (from easy-install.pth) is inside the working directory" in run.output


def test_a_folder_kept_on_the_path_is_the_one_checked(run_shim, tmp_path, base):
    """Red team 62: the checks read a link's target, and sys.path kept the link, which the agent's
    process could point elsewhere between the check and the import; a folder that did not exist
    (a link to nothing yet) passed unchecked. Kept: the resolved folder; dropped: one that is none."""
    site_packages = _root_venv(base)
    image = base / "image"
    image.mkdir()
    (base / "linked").symlink_to(image)
    (site_packages / "linked.pth").write_text(f"{base / 'linked'}\n")
    probe = (
        "import sys\n\ndef verify():\n"
        f"    print('linked' if {str(base / 'linked')!r} in sys.path else 'resolved' if {str(image)!r} in sys.path "
        "else 'none')\n    return 1.0\n"
    )
    run = run_shim(probe, path=f"{base}/venv/bin:{FALLBACK}", env={"PYTHONPATH": f"{base / 'nothing-yet'}"})
    assert "resolved" in run.output, run.output
    assert f"PYTHONPATH entry {str(base / 'nothing-yet')!r} is no folder or file" in run.output, run.output


# --- Red team 63: what stock Harbor's mode (no channel) still let through ---


def test_site_packages_another_user_can_change_is_refused_under_stock_harbor_too(run_shim, tmp_path, base):
    """Red team 63: an image that opens site-packages to every user (so that anyone may pip install):
    the agent's ``.pth`` ran as root inside the runner and graded a wrong answer 1.0 under stock
    Harbor, while NeMo Gym's server refused to grade there. Both refuse now, and no reward stands."""
    site_packages = _root_venv(base)
    site_packages.chmod(0o777)
    planted = site_packages / "zz-agent.pth"
    planted.write_text(
        "import sys; print('the agent ran in the runner'); sys.modules['_gym_runner'].call_verify = lambda v, h: 1.0\n"
    )
    os.chown(planted, AGENT, AGENT)
    run = run_shim(IMPORTS_THE_AGENTS, path=f"{base}/venv/bin:{FALLBACK}")
    assert "the agent ran" not in run.output and run.reward is None, run.output
    assert f"{site_packages} is writable by its group or by everyone" in run.output, run.output
    assert run.returncode == 1


def test_a_path_entry_that_cannot_be_resolved_is_dropped_and_a_planted_reward_never_stands(run_shim, tmp_path):
    """Red team 63: a PYTHONPATH entry made a chain of 1,500 links crashed the runner (RecursionError in
    realpath, 3.8-3.12) before it removed the reward.json the agent had planted, which stock Harbor
    then read. The entry is dropped; the planted reward is removed first thing, whatever fails next."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    chain = tmp_path / "chain"
    chain.mkdir()
    previous = str(tmp_path)
    for index in range(1500):
        os.symlink(previous, chain / f"l{index}")
        previous = str(chain / f"l{index}")
    logs = tmp_path / "logs" / "verifier"
    logs.mkdir(parents=True)
    (logs / "reward.json").write_text('{"reward": 1.0}')
    run = run_shim(IMPORTS_THE_AGENTS, env={"PYTHONPATH": previous})
    assert run.reward == {"reward": 0.25} and "Traceback" not in run.output, run.output
    try:
        os.path.realpath(previous)  # 3.13 walks the chain without recursing: the entry resolves, and is root's
    except RecursionError:
        assert f"PYTHONPATH entry {previous!r} cannot be resolved" in run.output, run.output


@pytest.mark.parametrize("owner", ["the agent", "the verifier's user"])
def test_a_verifier_user_starts_no_interpreter_another_user_owns(tmp_path, owner):
    """Red team 63: stock Harbor runs test.sh as ``[verifier].user``, and test.sh took the first
    python3 on PATH unchecked for any user but root: the agent's project venv (``/app/.venv``, first
    on the image's PATH) ran the agent's code in the runner. Every user's test.sh now checks it, each
    trusting root's and its own; NeMo Gym's server (test.sh as root) already refused it."""
    import asyncio

    from nemo_gym.data.tasks.harbor.sandboxes import LocalSandbox
    from nemo_gym.data.tasks.harbor.sandboxes.local import namespaces_available
    from nemo_gym.data.tasks.harbor.staging import lay_out, shim_files

    needs_root()
    if not namespaces_available():
        pytest.skip("users of their own need bubblewrap")
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    real = os.path.realpath(sys.executable)
    (venv / "python3").write_text(f'#!/bin/sh\necho started by $(id -u) > /tmp/venv-ran\nexec {real} "$@"\n')
    (venv / "python3").chmod(0o755)
    workspace = tmp_path / "ws"
    workspace.mkdir()

    async def run() -> Tuple[str, str]:
        async with LocalSandbox(
            workspace, workdir="/app", users=("grader",), mounts={"/venv": tmp_path / "venv"}
        ) as sandbox:
            uid = (await sandbox.exec("id -u", user="grader")).stdout.strip()
            for path in [tmp_path / "venv", venv, venv / "python3"]:
                os.lchown(path, AGENT if owner == "the agent" else int(uid), 0)
            lay_out(sandbox.host_path("/tests"), shim_files(VERIFIER.encode(), {}))
            os.chmod(sandbox.host_path("/logs/verifier"), 0o777)
            env = {"PATH": f"/venv/bin:{FALLBACK}:/usr/bin:/bin"}
            result = await sandbox.exec("bash /tests/test.sh; cat /tmp/venv-ran", cwd="/app", env=env, user="grader")
            return result.stdout, uid

    output, uid = asyncio.run(run())
    assert 'reward.json: {"reward": 1.0}' in output, output
    if owner == "the agent":
        assert "started by" not in output, output
    else:
        assert f"started by {uid}" in output, output


@pytest.mark.parametrize("group", [50, 0, 65534])
def test_site_packages_its_group_may_write_is_refused_whoever_seems_to_be_in_the_group(run_shim, tmp_path, base, group):
    """Red team 65: counting a group-writable site-packages safe when /etc/group and /etc/passwd show no
    other user in its group (Debian's staff, root:staff 2775 on /usr/local) let an agent started as
    agent:staff (or with the container's group_add, or a second group line with the same gid) plant
    _distutils_hack.py there, which Debian's distutils-precedence.pth imported in the runner. Group
    write is refused, whatever the group files say."""
    site_packages = _root_venv(base)
    os.chown(site_packages, 0, group)
    site_packages.chmod(0o2775)
    run = run_shim(IMPORTS_THE_AGENTS, path=f"{base}/venv/bin:{FALLBACK}")
    assert run.reward is None and "is writable by its group or by everyone" in run.output, run.output


def test_site_packages_that_cannot_be_listed_is_skipped_as_site_skips_it(tmp_path):
    """Red team 64: a site-packages the verifier's user cannot list (0711) made the check raise: the run
    failed as 'cannot write reward.json' under stock Harbor, with a traceback and no report under NeMo
    Gym's server. site itself skips such a folder, and so does the check."""
    from nemo_gym.data.tasks.harbor._resources import shim_dir

    probe = (
        "import os, sys\n"
        f"sys.path.insert(0, {str(shim_dir())!r})\n"
        "import _gym_runner\n"
        "def refuse(path):\n"
        "    raise PermissionError(13, 'Permission denied', path)\n"
        "os.listdir = refuse\n"
        "print(_gym_runner.unsafe_site())\n"
    )
    result = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0 and result.stdout == "[]\n", result.stdout + result.stderr


def test_a_reward_file_the_runner_cannot_remove_is_said_to_be_no_score(run_shim, tmp_path):
    """Red team 64: where the agent owns /logs/verifier (stock Harbor, a [verifier].user), a reward it
    planted and the runner cannot remove stood, while the run said "the run scores 0". The runner
    still cannot remove it, but says so. (A folder named reward.txt fails the same removal here.)"""
    logs = tmp_path / "logs" / "verifier"
    (logs / "reward.txt").mkdir(parents=True)
    (logs / "reward.txt" / "x").write_text("1")
    run = run_shim("def verify():\n    return 1.0\n")
    assert run.reward is None and run.returncode == 1, run.output
    assert f"verifier warning: reward.txt in {logs} cannot be removed (" in run.output, run.output
    assert "stock Harbor would read it" in run.output


# --- Red team 66 ---


@pytest.mark.parametrize("where", ["inside the working directory", "a folder the agent owns"])
def test_a_pth_import_line_that_adds_a_site_dir_never_reads_the_agents_pth_files(run_shim, tmp_path, base, where):
    """Red team 66: ``import site; site.addsitedir(X)`` in a root ``.pth`` (a project venv's packages made
    visible to the system Python) read X's ``.pth`` files within that one line, before X was vetted:
    the agent's ``.pth`` in X ran in the runner (1.0, root or [verifier].user, both modes). A ``.pth``
    file is read only from a site dir of the interpreter's own or a folder vetted as any other."""
    site_packages = _root_venv(base)
    forge = (
        "import sys; print('the agent ran in the runner'); sys.modules['_gym_runner'].call_verify = lambda v, h: 1.0\n"
    )
    agents, files = _agents_folder(tmp_path, base, where, "venv-site", {"evil.pth": forge})
    (site_packages / "project-venv.pth").write_text(f"import site; site.addsitedir({str(agents)!r})\n")
    run = run_shim(IMPORTS_THE_AGENTS, workspace_files=files, path=f"{base}/venv/bin:{FALLBACK}")
    assert "the agent ran" not in run.output, run.output
    assert run.reward == {"reward": 0.25}, run.output


def test_a_zip_on_the_path_is_kept_as_a_folder_would_be(run_shim, tmp_path, base):
    """Red team 66: a root zip (a zipped egg in easy-install.pth) was dropped as 'no folder' once path
    entries were vetted, and a verify importing from it failed; one another user can change is not."""
    import zipfile

    site_packages = _root_venv(base)
    egg = base / "answers.egg"
    with zipfile.ZipFile(egg, "w") as archive:
        archive.writestr("agents_module.py", "")
    (site_packages / "easy-install.pth").write_text(f"{egg}\n")
    run = run_shim(IMPORTS_THE_AGENTS, path=f"{base}/venv/bin:{FALLBACK}")
    assert run.reward == {"reward": 0.5}, run.output
    os.chown(egg, AGENT, AGENT)
    run = run_shim(IMPORTS_THE_AGENTS, path=f"{base}/venv/bin:{FALLBACK}")
    assert run.reward == {"reward": 0.25} and f"{egg} (from easy-install.pth) belongs to uid" in run.output, run.output


def test_an_interpreter_shim_never_chooses_from_the_working_directory(run_shim, tmp_path, base):
    """Red team 66: a version manager's shim (asdf's, root's, first on PATH) passed test.sh's checks and
    then chose the interpreter from ``.tool-versions`` in its working directory, the agent's, which may
    name any folder (``python path:/home/agent/py``): the agent's program ran in the runner's place, as
    root, with NeMo Gym's key. test.sh starts the interpreter from ``/``, and the runner goes back to
    the working directory through a descriptor test.sh opened on it."""
    shims = base / "shims"
    shims.mkdir()
    (shims / "python3").write_text(
        "#!/bin/bash\n"
        'if [ -f .tool-versions ]; then exec "$(cat .tool-versions)/python3" "$@"; fi\n'
        f'exec {os.path.realpath(sys.executable)} "$@"\n'
    )
    (shims / "python3").chmod(0o755)
    marker = tmp_path / "agent-python-ran"
    agents = tmp_path / "workspace" / "py"
    files = {
        ".tool-versions": f"{agents}\n",
        "py/python3": f'#!/bin/sh\necho ran > {marker}\nexec {os.path.realpath(sys.executable)} "$@"\n',
    }
    agents.mkdir(parents=True)
    (agents / "python3").write_text(files["py/python3"])
    (agents / "python3").chmod(0o755)  # run_shim writes the files again, and keeps the mode
    probe = "import os\n\ndef verify(workspace):\n    print('graded in', os.getcwd())\n    return 1.0\n"
    run = run_shim(probe, workspace_files=files, path=f"{shims}:{FALLBACK}")
    assert not marker.exists(), run.output
    assert run.reward == {"reward": 1.0}, run.output
    assert f"graded in {tmp_path / 'workspace'}\n" in run.output, run.output


def test_a_working_directory_the_verifier_cannot_read_is_entered_by_path(tmp_path):
    """Red team 68: a working directory of mode 0711 (the agent's to set) cannot be opened by a
    verifier's user other than root, so test.sh skipped ``cd /`` and started the interpreter there:
    asdf's shim found the agent's ``.tool-versions`` by name (execute permission is enough), and the
    agent's program ran in the runner's place under stock Harbor's ``[verifier].user``. test.sh now
    always starts it in ``/``, and the runner enters such a folder by its path (only while it is the
    one test.sh saw: the next test)."""
    import asyncio

    from nemo_gym.data.tasks.harbor.sandboxes import LocalSandbox
    from nemo_gym.data.tasks.harbor.sandboxes.local import namespaces_available
    from nemo_gym.data.tasks.harbor.staging import lay_out, shim_files

    needs_root()
    if not namespaces_available():
        pytest.skip("users of their own need bubblewrap")
    real = os.path.realpath(sys.executable)
    shims = tmp_path / "shims" / "bin"
    shims.mkdir(parents=True)
    (shims / "python3").write_text(
        f'#!/bin/bash\nif [ -f .tool-versions ]; then exec "$(cat .tool-versions)/python3" "$@"; fi\nexec {real} "$@"\n'
    )
    (shims / "python3").chmod(0o755)
    workspace = tmp_path / "ws"
    (workspace / "py").mkdir(parents=True)
    (workspace / ".tool-versions").write_text("/app/py\n")
    (workspace / "py" / "python3").write_text(f'#!/bin/sh\necho agent-python-ran >&2\nexec {real} "$@"\n')
    (workspace / "py" / "python3").chmod(0o755)
    for path in [workspace, workspace / "py", workspace / "py" / "python3", workspace / ".tool-versions"]:
        os.lchown(path, AGENT, AGENT)
    workspace.chmod(0o711)
    probe = "import os\n\ndef verify():\n    print('graded in', os.getcwd(), os.environ['PWD'])\n    return 1.0\n"

    async def run() -> str:
        async with LocalSandbox(
            workspace, workdir="/app", users=("grader",), mounts={"/shims": tmp_path / "shims"}
        ) as sandbox:
            lay_out(sandbox.host_path("/tests"), shim_files(probe.encode(), {}))
            logs = sandbox.host_path("/logs/verifier")
            os.chmod(logs, 0o777)
            (logs / "reward.json").write_text('{"reward": 1.0}')  # planted
            env = {"PATH": f"/shims/bin:{FALLBACK}:/usr/bin:/bin"}
            command = "bash /tests/test.sh; echo status $?"
            return (await sandbox.exec(command, cwd="/app", env=env, user="grader")).stdout

    output = asyncio.run(run())
    assert "agent-python-ran" not in output, output
    assert "graded in /app /app\n" in output and 'reward.json: {"reward": 1.0}\nstatus 0' in output, output


def test_a_working_directory_entered_by_path_is_entered_again_for_the_next_interpreter(tmp_path):
    """The first python3 on PATH is too old: test.sh goes back into a folder it cannot open (0711) by
    its path, checks it is still the one it saw, and starts the next interpreter in / with the same
    hand-over; verify runs there, and no planted reward stands."""
    import asyncio

    from nemo_gym.data.tasks.harbor.sandboxes import LocalSandbox
    from nemo_gym.data.tasks.harbor.sandboxes.local import namespaces_available
    from nemo_gym.data.tasks.harbor.staging import lay_out, shim_files

    needs_root()
    if not namespaces_available():
        pytest.skip("users of their own need bubblewrap")
    real = os.path.realpath(sys.executable)
    old, newer = tmp_path / "shims" / "old", tmp_path / "shims" / "newer"
    old.mkdir(parents=True)
    newer.mkdir()
    # gym_runner.py's answer for an interpreter older than 3.8, given by one that checks it was started in /
    (old / "python3").write_text('#!/bin/sh\necho "old python started in $(pwd)"\nexit 86\n')
    (newer / "python").write_text(f'#!/bin/sh\nexec {real} "$@"\n')
    for script in (old / "python3", newer / "python"):
        script.chmod(0o755)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    os.lchown(workspace, AGENT, AGENT)
    workspace.chmod(0o711)
    probe = "import os\n\ndef verify():\n    print('graded in', os.getcwd(), os.environ['PWD'])\n    return 1.0\n"

    async def run() -> str:
        async with LocalSandbox(
            workspace, workdir="/app", users=("grader",), mounts={"/shims": tmp_path / "shims"}
        ) as sandbox:
            lay_out(sandbox.host_path("/tests"), shim_files(probe.encode(), {}))
            logs = sandbox.host_path("/logs/verifier")
            os.chmod(logs, 0o777)
            (logs / "reward.txt").write_text("1")  # planted
            env = {"PATH": "/shims/old:/shims/newer:/usr/bin:/bin"}
            command = "bash /tests/test.sh; echo status $?; ls /logs/verifier"
            return (await sandbox.exec(command, cwd="/app", env=env, user="grader")).stdout

    output = asyncio.run(run())
    assert "old python started in /\n" in output, output
    assert "passed over: python3 is too old;" in output, output
    assert "graded in /app /app\n" in output and 'reward.json: {"reward": 1.0}\nstatus 0' in output, output
    assert output.rstrip().endswith("status 0\nreward.json"), output  # the planted reward.txt is gone


def _runner_entering(tests: Path, logs: Path, path: Path, seen: os.stat_result) -> subprocess.CompletedProcess:
    """gym_runner.py started in / as test.sh starts it for a folder it could not open: told to enter
    ``path``, which test.sh saw as ``seen``."""
    return subprocess.run(
        [os.path.realpath(sys.executable), "-E", "-S", "-s", "-B", str(tests / "gym_runner.py")],
        cwd="/",
        env={
            "VERIFIER_LOGS_DIR": str(logs),
            "PATH": "/usr/bin:/bin",
            "NEMO_GYM_CWD": str(path),
            "NEMO_GYM_CWD_ID": f"{seen.st_dev}:{seen.st_ino}",
        },
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("given", ["another folder", "a folder that is gone"])
def test_a_working_directory_entered_by_path_must_still_be_the_one_test_sh_saw(tmp_path, given):
    """The path test.sh gives (a folder its user could not open) could be swapped by the agent's process
    before the runner enters it: the runner compares the folder it entered with the device and inode
    test.sh saw, and refuses a run where they differ, removing a reward the agent planted."""
    from nemo_gym.data.tasks.harbor.staging import lay_out, shim_files

    tests, workspace, logs = tmp_path / "tests", tmp_path / "workspace", tmp_path / "logs"
    lay_out(tests, shim_files(b"def verify():\n    return 0.5\n", {}))
    workspace.mkdir()
    logs.mkdir()
    (logs / "reward.json").write_text('{"reward": 1.0}')  # planted
    entered = workspace if given == "another folder" else tmp_path / "gone"
    completed = _runner_entering(tests, logs, entered, os.stat(tmp_path))  # test.sh saw tmp_path
    assert completed.returncode == 1 and not (logs / "reward.json").exists(), completed.stdout
    assert completed.stdout.startswith("verifier error: "), completed.stdout
    assert "removed the reward.json that was there before the run" in completed.stdout, completed.stdout
    completed = _runner_entering(tests, logs, workspace, os.stat(workspace))  # the folder test.sh saw
    assert completed.returncode == 0 and (logs / "reward.json").read_text() == '{"reward": 0.5}\n', completed.stdout
