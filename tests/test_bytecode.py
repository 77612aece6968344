"""The shim's shipped bytecode (``nemo_gym/data/tasks/harbor/bytecode.py``): there for every
supported interpreter, fresh for this one, loaded by the runner and the SDK, and never loaded once
the source beside it differs."""

from __future__ import annotations

import importlib.util
import json
import marshal
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

from nemo_gym.data.tasks.harbor._resources import shim_dir
from nemo_gym.data.tasks.harbor.bytecode import CACHE_TAGS, bytecode_dir, cache_name, compiled_names
from nemo_gym.data.tasks.harbor.staging import lay_out, shim_files, static_files, static_sources

pytestmark = pytest.mark.every_python  # the in-sandbox part: proven on every Python (noxfile)

REGENERATE = "regenerate it with `python -m nemo_gym.data.tasks.harbor.bytecode`"
_CHECKED_HASH = 0b11  # PEP 552 flags: hash-based, checked against the source


def test_every_supported_interpreter_has_bytecode_for_every_module_and_no_other():
    assert sorted(path.name for path in bytecode_dir().iterdir()) == sorted(CACHE_TAGS), REGENERATE
    expected = {name[: -len(".py")] + ".pyc" for name in compiled_names(static_sources())}
    assert "_gym_runner.pyc" in expected and "nemo_gym/verifiers/_match.pyc" in expected
    for tag in CACHE_TAGS:
        folder = bytecode_dir() / tag
        found = {path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file()}
        assert found == expected, f"{tag}: {REGENERATE}"


def test_this_interpreters_bytecode_is_checked_and_matches_the_staged_sources():
    sources = static_sources()
    for name in compiled_names(sources):
        data = (bytecode_dir() / sys.implementation.cache_tag / (name[: -len(".py")] + ".pyc")).read_bytes()
        assert data[:4] == importlib.util.MAGIC_NUMBER, f"{name}: {REGENERATE}"
        assert int.from_bytes(data[4:8], "little") == _CHECKED_HASH, f"{name} must be checked-hash: {REGENERATE}"
        assert data[8:16] == importlib.util.source_hash(sources[name]), f"{name} changed since: {REGENERATE}"


def test_staging_puts_it_where_each_interpreter_looks():
    staged = {file.name for file in static_files()}
    for tag in CACHE_TAGS:
        assert cache_name("_gym_runner.py", tag) == f"__pycache__/_gym_runner.{tag}.pyc"
        assert f"__pycache__/_gym_runner.{tag}.pyc" in staged
        assert f"nemo_gym/verifiers/__pycache__/files.{tag}.pyc" in staged
    assert not any(name.startswith("__pycache__/gym_runner.") for name in staged)  # a script: never cached


def _run_shim(
    tests: Path,
    workspace: Path,
    logs: Path,
    *,
    python: str = sys.executable,
    verbose: bool = False,
    env: Optional[Dict[str, str]] = None,
) -> subprocess.CompletedProcess:
    """gym_runner.py as test.sh starts it, from ``workspace``; with ``verbose``, -v and stderr apart
    (Python names each bytecode file it loads), else stderr in stdout."""
    return subprocess.run(
        [python, *(["-v"] if verbose else []), "-E", "-S", "-s", "-B", str(tests / "gym_runner.py")],
        cwd=workspace,
        env={"VERIFIER_LOGS_DIR": str(logs), "PATH": "/usr/bin:/bin", **(env or {})},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE if verbose else subprocess.STDOUT,
        text=True,
        timeout=60,
    )


def _run_verbose(tmp_path: Path, verifier: bytes) -> subprocess.CompletedProcess:
    """The shim laid out for ``verifier``, run verbose (``_run_shim``)."""
    tests, workspace, logs = tmp_path / "tests", tmp_path / "workspace", tmp_path / "logs"
    lay_out(tests, shim_files(verifier, {}))
    workspace.mkdir()
    return _run_shim(tests, workspace, logs, verbose=True)


def test_the_runner_and_the_sdk_load_it(tmp_path: Path):
    verifier = b"from nemo_gym.verifiers import exact_match\ndef verify():\n    return exact_match('a', 'a')\n"
    completed = _run_verbose(tmp_path, verifier)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert json.loads((tmp_path / "logs" / "reward.json").read_text()) == {"reward": True}
    tag = sys.implementation.cache_tag
    for name in ("_gym_runner.py", "nemo_gym/verifiers/__init__.py", "nemo_gym/verifiers/_match.py"):
        assert f"code object from '{tmp_path / 'tests' / cache_name(name, tag)}'" in completed.stderr, name


@pytest.mark.parametrize("layout", ["folder", "bundle"])
def test_the_shipped_sdk_imports_no_future_module_and_keeps_its_annotations_strings(tmp_path: Path, layout: str):
    """Run, ``from __future__ import annotations`` imports the ``__future__`` module, a cost of every
    start: the SDK's bytecode is compiled with the flag that statement stands for instead."""
    from nemo_gym.data.tasks.harbor.bytecode import for_tag

    verifier = (
        b"import sys\n"
        b"from nemo_gym.verifiers import exact_match, extract_answer, final_text, numeric_match, files\n"
        b"def verify():\n"
        b"    assert exact_match.__annotations__['expected'] == 'Any', exact_match.__annotations__\n"
        b"    return 0.25 if '__future__' in sys.modules else 0.5\n"
    )
    tests, workspace = tmp_path / "tests", tmp_path / "workspace"
    files = shim_files(verifier, {})
    lay_out(tests, for_tag(files, sys.implementation.cache_tag) if layout == "bundle" else files)
    workspace.mkdir()
    completed = _run_shim(tests, workspace, tmp_path / "logs")
    assert json.loads((tmp_path / "logs" / "reward.json").read_text()) == {"reward": 0.5}, completed.stdout


def test_only_a_line_that_is_the_annotations_import_alone_becomes_the_flag(tmp_path: Path):
    """The line is left blank, so tracebacks keep their line numbers; any other ``__future__`` import
    (more names, or more on the line) is compiled as written."""
    from nemo_gym.data.tasks.harbor.bytecode import build

    sources = {
        "alone.py": b'"""Doc."""\nfrom __future__ import annotations\n\n\ndef f(a: Nope) -> Nope:\n    return a\n',
        "more.py": b"from __future__ import annotations, division\nx: Nope = 1\n",
        "beside.py": b"from __future__ import annotations; y = 2\nx: Nope = 1\n",
    }
    build([sys.executable], sources, tmp_path)
    namespaces: Dict[str, Dict[str, Any]] = {}
    for name, source in sources.items():
        data = (tmp_path / sys.implementation.cache_tag / (name[:-3] + ".pyc")).read_bytes()
        assert data[8:16] == importlib.util.source_hash(source)
        namespaces[name] = {}
        exec(marshal.loads(data[16:]), namespaces[name])
    alone = namespaces["alone.py"]
    assert alone["f"].__annotations__ == {"a": "Nope", "return": "Nope"} and "annotations" not in alone
    assert alone["f"].__code__.co_firstlineno == 5 and alone["__doc__"] == "Doc."
    assert "annotations" in namespaces["more.py"] and namespaces["more.py"]["__annotations__"] == {"x": "Nope"}
    assert namespaces["beside.py"]["y"] == 2 and "annotations" in namespaces["beside.py"]


def test_bytecode_whose_source_changed_is_not_used(tmp_path: Path):
    """Only checked-hash bytecode ships: a staged runner that differs from its bytecode runs as written."""
    tests = tmp_path / "tests"
    lay_out(tests, shim_files(b"def verify():\n    return 1\n", {}))
    runner = tests / "_gym_runner.py"
    source = runner.read_text()
    assert 'print(f"reward.json: {text}")' in source
    runner.write_text(source.replace('print(f"reward.json: {text}")', 'print(f"edited, reward.json: {text}")'))
    (tmp_path / "workspace").mkdir()
    completed = _run_shim(tests, tmp_path / "workspace", tmp_path / "logs")
    assert completed.returncode == 0, completed.stdout
    assert 'edited, reward.json: {"reward": 1}' in completed.stdout


def test_a_late_module_uses_the_bytecode_read_with_its_source_only_when_they_match(monkeypatch):
    """The server's root runner loads a late module from bytes it read before any code of the task
    ran (``_gym_runner.late_module``): from the bytecode among them when that was compiled from
    this very source, as the import system would check it, and from the source otherwise."""
    spec = importlib.util.spec_from_file_location("_gym_runner_under_test", shim_dir() / "_gym_runner.py")
    assert spec is not None and spec.loader is not None
    runner = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(runner)
    monkeypatch.setitem(sys.modules, "_gym_runner", runner)  # what the late module imports from
    source = static_sources()["_gym_await.py"]
    shipped = (bytecode_dir() / sys.implementation.cache_tag / "_gym_await.pyc").read_bytes()
    assert runner.cached_name("_gym_await") == cache_name("_gym_await.py", sys.implementation.cache_tag)
    # The shipped header with other code behind it shows which of the two was run.
    marked = shipped[:16] + marshal.dumps(compile("LOADED_FROM = 'bytecode'", "marked", "exec"))
    # (the bytecode read, the source read, what ran): a source one byte longer, or no bytecode, compiles
    for bytecode, given, expected in (
        (marked, source, "bytecode"),
        (marked, source + b"\n", None),
        (b"", source, None),
    ):
        code = runner._code(bytecode, given, "/tests/_gym_await.py")
        assert code.co_filename == "/tests/_gym_await.py"
        namespace: dict = {}
        exec(code, namespace)
        assert namespace.get("LOADED_FROM") == expected
        assert ("run" in namespace) == (expected is None)


def test_for_tag_keeps_one_interpreters_bytecode_and_everything_else():
    # Found in review: a task's own bytecode (read as data, or imported unchecked) is never dropped,
    # whatever the tag: stock Harbor stages it, so the server must too.
    from nemo_gym.data.tasks.harbor.bytecode import CACHE_TAGS, for_tag
    from nemo_gym.data.tasks.harbor.staging import ShimFile, static_files

    own = [ShimFile(f"__pycache__/checker.{tag}.pyc", b"the task's own") for tag in ("cpython-38", "cpython-312")]
    files = [*static_files(), *own, ShimFile("data/__pycache__/x.cpython-311.pyc", b"data")]
    kept = for_tag(files, "cpython-312")
    # (the SDK's files go into one bundle: test_the_bundle_stands_for_the_sdk_files_alone)
    dropped = (
        {file.name for file in files}
        - {file.name for file in kept}
        - {file.name for file in files if file.name.startswith("nemo_gym/")}
    )
    assert dropped and all(name.endswith(".pyc") and ".cpython-312." not in name for name in dropped)
    assert {name.rsplit(".", 2)[1] for name in dropped} == set(CACHE_TAGS) - {"cpython-312"}
    assert all(file in kept for file in own) and files[-1] in kept
    static_bytecode = [file for file in static_files() if file.name.endswith(".pyc") and "nemo_gym/" not in file.name]
    assert len([file for file in kept if file in static_bytecode]) == len(static_bytecode) // len(CACHE_TAGS)
    for unknown in (None, "cpython-314", "pypy-310", "../x"):
        assert for_tag(files, unknown) == tuple(files)


def test_image_tags_remember_only_tags_the_shim_ships_for_and_only_so_many():
    from nemo_gym.data.tasks.harbor.bytecode import ImageTags

    tags = ImageTags(size=2)
    for reported in (b"../../etc", b"cpython-314", b"", b"x" * 64, None):
        tags.learn("a", reported)
        assert tags.get("a") is None
    tags.learn("a", b"cpython-312\n")
    tags.learn(None, b"cpython-38")
    tags.learn("b", b"cpython-38")
    assert (tags.get("b"), tags.get(None), tags.get("a")) == ("cpython-38", None, "cpython-312")
    tags.learn("c", b"cpython-39")  # "a" was used last: "b" goes
    assert (tags.get("a"), tags.get("b"), tags.get("c")) == ("cpython-312", None, "cpython-39")


SDK_USER = (
    b"from nemo_gym.verifiers import exact_match\n"
    b"from nemo_gym.verifiers.files import read_text\n"
    b"def verify(workspace):\n"
    b"    import nemo_gym.verifiers._match as match\n"
    b"    print('loaded from', match.__file__)\n"
    b"    return exact_match(read_text(workspace, 'answer.txt'), '42')\n"
)


def test_a_known_interpreter_gets_the_sdk_as_one_zip_and_loads_its_bytecode(tmp_path: Path):
    """Later runs on a known image stage the SDK's modules as one file (``for_tag``), where the
    staged ``nemo_gym/__init__.py`` points the package, and the SDK loads from the bytecode in it
    (zipimport names a module after the ``.pyc`` it ran); an error inside the SDK still shows its
    source lines."""
    from nemo_gym.data.tasks.harbor.bytecode import SDK_BUNDLE, for_tag

    tests, workspace = tmp_path / "tests", tmp_path / "workspace"
    lay_out(tests, for_tag(shim_files(SDK_USER, {}), sys.implementation.cache_tag))
    assert (tests / SDK_BUNDLE).is_file() and not (tests / "nemo_gym" / "verifiers").exists()
    workspace.mkdir()
    (workspace / "answer.txt").write_text("42\n")
    completed = _run_shim(tests, workspace, tmp_path / "logs")
    assert completed.returncode == 0, completed.stdout
    assert f"loaded from {tests / SDK_BUNDLE}/nemo_gym/verifiers/_match.pyc" in completed.stdout
    assert json.loads((tmp_path / "logs" / "reward.json").read_text()) == {"reward": True}
    (tests / "verifier.py").write_text(
        "from nemo_gym.verifiers.files import read_text\ndef verify(workspace):\n    return read_text(workspace, '/abs')\n"
    )
    failed = _run_shim(tests, workspace, tmp_path / "logs")
    assert 'in _relative_parts\n    raise ValueError(f"{function}(): path must be relative' in failed.stdout, (
        failed.stdout
    )


def test_the_bundle_stands_for_the_sdk_files_alone(tmp_path: Path):
    """For a known tag the SDK's files and that tag's bytecode of them become the bundle, which holds
    each source and its bytecode beside it; for an unknown tag nothing is bundled; a task's own file
    in ``nemo_gym/`` keeps the SDK a folder (it belongs in the package); a task's own file or folder
    named like the bundle never reaches the sandbox (the shim's names win; red team round 23)."""
    import io
    import zipfile

    from nemo_gym.data.tasks.harbor._resources import sdk_files
    from nemo_gym.data.tasks.harbor.bytecode import SDK_BUNDLE, for_tag, sdk_bundle
    from nemo_gym.data.tasks.harbor.staging import ShimFile

    planted = [ShimFile(SDK_BUNDLE, b"the task's own"), ShimFile(f"{SDK_BUNDLE}/notes.txt", b"a folder of it")]
    files = shim_files(b"def verify():\n    return 1\n", {}, task_files=planted)
    assert not any(file.name.startswith(SDK_BUNDLE) for file in files)
    tag = sys.implementation.cache_tag
    bundled = for_tag(files, tag)
    names = {file.name for file in bundled}
    assert not any(name.startswith("nemo_gym/verifiers/") for name in names)
    assert [file for file in bundled if file.name == SDK_BUNDLE] == [sdk_bundle(tag)]
    gone = {file.name for file in files} - names
    assert {name for name in gone if not name.startswith("nemo_gym/")} == {
        name for name in gone if name.endswith(".pyc") and f".{tag}." not in name and not name.startswith("nemo_gym/")
    }
    assert {name for name in gone if name.startswith("nemo_gym/")} == {
        file.name
        for file in files
        if file.name.startswith("nemo_gym/verifiers/")
        or (file.name.startswith("nemo_gym/__pycache__/") and f".{tag}." not in file.name)
    }
    assert {"nemo_gym/__init__.py", f"nemo_gym/__pycache__/__init__.{tag}.pyc"} <= names
    with zipfile.ZipFile(io.BytesIO(sdk_bundle(tag).data)) as bundle:
        content = {name: bundle.read(name) for name in bundle.namelist()}
    for name, data in sdk_files()[1:]:  # all but nemo_gym/__init__.py
        assert name.startswith("nemo_gym/verifiers/") and content[name] == data
        if name.endswith(".py"):
            assert content[name[: -len(".py")] + ".pyc"] == (bytecode_dir() / tag / (name[:-3] + ".pyc")).read_bytes()
    assert "nemo_gym/__init__.py" not in content
    assert sdk_bundle(tag).data == sdk_bundle.__wrapped__(tag).data  # the same bytes every time
    assert for_tag(files, None) == tuple(files)
    own = ShimFile("nemo_gym/verifiers/extra.py", b"X = 1\n")
    with_own = for_tag(shim_files(b"def verify():\n    return 1\n", {}, task_files=[own]), tag)
    assert own in with_own and SDK_BUNDLE not in {file.name for file in with_own}


def test_the_bundle_shadows_an_installed_nemo_gym_as_the_folder_does(tmp_path: Path):
    """NeMo Gym itself installs a ``nemo_gym`` package: in a sandbox that has it in site-packages,
    the staged SDK still wins, bundled (before site-packages on sys.path) as in its folder."""
    from nemo_gym.data.tasks.harbor.bytecode import for_tag

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    (site,) = venv.glob("lib/python3*/site-packages")
    (site / "nemo_gym").mkdir()
    (site / "nemo_gym" / "__init__.py").write_text("raise ImportError('the installed nemo_gym was imported')\n")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    (workspace / "answer.txt").write_text("42\n")
    for layout, files in (
        ("folder", shim_files(SDK_USER, {})),
        ("bundle", for_tag(shim_files(SDK_USER, {}), sys.implementation.cache_tag)),
    ):
        tests = tmp_path / layout
        lay_out(tests, files)
        completed = _run_shim(tests, workspace, tmp_path / layout / "logs", python=str(venv / "bin" / "python"))
        assert completed.returncode == 0, (layout, completed.stdout)
        assert f"loaded from {tests}" in completed.stdout, (layout, completed.stdout)


HELPER_USER = (
    b"import subprocess, sys\n"
    b"def verify(workspace):\n"
    b"    ran = subprocess.run([sys.executable, '-s', __file__.rsplit('/', 1)[0] + '/check.py', str(workspace)],\n"
    b"                         stdout=subprocess.PIPE, text=True)\n"
    b"    print(ran.stdout)\n"
    b"    return ran.stdout.strip().endswith('True')\n"
)
HELPER = (
    "import sys\n"
    "import nemo_gym.verifiers as sdk\n"
    "from nemo_gym.verifiers import exact_match\n"
    "print('helper sdk', sdk.__file__)\n"
    "print(exact_match(open(sys.argv[1] + '/answer.txt').read().strip(), '42'))\n"
)


@pytest.mark.parametrize("layout", ["folder", "bundle"])
def test_a_helper_script_verify_starts_gets_the_staged_sdk(tmp_path: Path, layout: str):
    """Found by red team round 23: a helper script of the task in /tests that verify runs as its own
    process finds the SDK beside it, as in the folder, and never the agent's ``nemo_gym`` on the
    task's PYTHONPATH (the runner keeps the workspace off its own path; a child inherits the variable):
    with the modules' bundle on the runner's sys.path alone, the helper had no SDK, or the agent's."""
    from nemo_gym.data.tasks.harbor.bytecode import for_tag
    from nemo_gym.data.tasks.harbor.staging import ShimFile

    files = shim_files(HELPER_USER, {}, task_files=[ShimFile("check.py", HELPER.encode())])
    tests, workspace = tmp_path / "tests", tmp_path / "workspace"
    lay_out(tests, for_tag(files, sys.implementation.cache_tag) if layout == "bundle" else files)
    forged = workspace / "nemo_gym" / "verifiers"
    forged.mkdir(parents=True)
    (workspace / "nemo_gym" / "__init__.py").write_text("")
    (forged / "__init__.py").write_text("def exact_match(*args):\n    return True\n")
    (workspace / "answer.txt").write_text("41\n")  # wrong
    completed = _run_shim(tests, workspace, tmp_path / "logs", env={"PYTHONPATH": str(workspace)})
    assert completed.returncode == 0, completed.stdout
    assert f"helper sdk {tests}/" in completed.stdout, completed.stdout
    assert json.loads((tmp_path / "logs" / "reward.json").read_text()) == {"reward": False}
    (workspace / "answer.txt").write_text("42\n")
    shutil.rmtree(workspace / "nemo_gym")
    completed = _run_shim(tests, workspace, tmp_path / "logs")
    assert json.loads((tmp_path / "logs" / "reward.json").read_text()) == {"reward": True}, completed.stdout


@pytest.mark.parametrize("layout", ["folder", "bundle"])
def test_importing_the_staged_package_imports_nothing_a_path_could_shadow(tmp_path: Path, layout: str):
    """Found by red team round 24: the staged ``nemo_gym/__init__.py`` that finds the bundle imported
    ``os``, which a helper started with ``-S`` has not loaded yet (nor frozen, before 3.11): an ``os.py``
    on the task's PYTHONPATH into the workspace ran. It uses the built-in ``posix`` alone."""
    from nemo_gym.data.tasks.harbor.bytecode import for_tag

    files = shim_files(b"def verify():\n    return 1\n", {})
    tests, workspace = tmp_path / "tests", tmp_path / "workspace"
    lay_out(tests, for_tag(files, sys.implementation.cache_tag) if layout == "bundle" else files)
    workspace.mkdir()
    for name in ("os", "posixpath", "stat", "genericpath"):
        (workspace / f"{name}.py").write_text(f"open({str(workspace / 'ran')!r}, 'a').write({name!r})\n")
    helper = "import sys; import nemo_gym.verifiers as sdk; print(sdk.__file__); print('os' in sys.modules)"
    completed = subprocess.run(
        [sys.executable, "-S", "-c", helper],
        cwd=tests,
        env={"PYTHONPATH": str(workspace), "PATH": "/usr/bin:/bin"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        timeout=60,
    )
    assert completed.returncode == 0, completed.stdout
    assert completed.stdout.startswith(str(tests) + "/"), completed.stdout
    assert not (workspace / "ran").exists(), (workspace / "ran").read_text()


def test_a_shell_tasks_own_files_all_stay_on_a_known_image():
    """Found by red team round 24: a task's own ``test.sh`` task lost its own copy of the SDK (a
    published task's, maybe of another release) to the bundle, got a bundle it never had, and had its
    own file of the bundle's name staged beside it. Only the shim's own files, byte for byte, change."""
    from nemo_gym.data.tasks.harbor.bytecode import SDK_BUNDLE, for_tag
    from nemo_gym.data.tasks.harbor.staging import ShimFile

    tag = sys.implementation.cache_tag
    test_sh = ShimFile("test.sh", b"#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n", 0o755)
    vendored = [
        ShimFile("nemo_gym/__init__.py", b""),
        ShimFile("nemo_gym/verifiers/__init__.py", b"# the task's own copy\n"),
        ShimFile(
            f"nemo_gym/verifiers/__pycache__/__init__.{'cpython-38' if tag != 'cpython-38' else 'cpython-39'}.pyc",
            b"own",
        ),
    ]
    for own in ([test_sh], [test_sh, *vendored], [test_sh, ShimFile(SDK_BUNDLE, b"the task's own data file")]):
        assert for_tag(own, tag) == tuple(own)
    # A published task of this very release ships the shim's files byte for byte: those may be bundled.
    ours = [file for file in static_files() if file.name.startswith("nemo_gym/")]
    assert SDK_BUNDLE in {file.name for file in for_tag([test_sh, *ours], tag)}


PREVIOUS_STUB = b'"""NeMo Gym\'s verifier SDK, as staged into a sandbox: nothing more on purpose."""\n'


def test_a_published_task_grades_alike_once_a_python_task_taught_the_image(tmp_path: Path, monkeypatch):
    """Red team round 24, end to end: a task published by an earlier release (its own ``test.sh`` and
    SDK copy), graded on an image whose Python a Python task taught the server, still grades with
    its own copy."""
    import asyncio

    from support import EXAMPLES

    from nemo_gym.data.tasks.harbor import verification
    from nemo_gym.data.tasks.harbor.bytecode import ImageTags
    from nemo_gym.data.tasks.harbor.publishing import publish_for_harbor
    from nemo_gym.data.tasks.harbor.sandboxes import LocalSandbox
    from nemo_gym.data.tasks.harbor.task import load_task
    from nemo_gym.data.tasks.harbor.verification import plan_verification, run_verification

    monkeypatch.setattr(verification, "IMAGE_TAGS", ImageTags())
    dataset = tmp_path / "ds"
    shutil.copytree(EXAMPLES / "answer-file", dataset / "answer-file")
    publish_for_harbor(dataset, tmp_path / "published")
    published = tmp_path / "published" / "answer-file"
    (published / "tests" / "nemo_gym" / "__init__.py").write_bytes(PREVIOUS_STUB)  # as the last release wrote it
    shutil.rmtree(published / "tests" / "nemo_gym" / "__pycache__", ignore_errors=True)
    workspace = tmp_path / "ws"
    shutil.copytree(EXAMPLES / "answer-file" / "workspace", workspace)

    def run(task_dir: Path) -> float:
        plan = plan_verification(load_task(task_dir))

        async def go() -> float:
            async with LocalSandbox(workspace) as sandbox:
                sandbox.image = "img"  # a sandbox of a named image, as a provider's or Docker's
                outcome = await run_verification(plan, sandbox)
                assert not outcome.masked, outcome
                return outcome.reward

        return asyncio.run(go())

    assert run(published) == 1.0
    assert run(dataset / "answer-file") == 1.0  # a Python verifier: its runner reports the tag
    assert verification.IMAGE_TAGS.get("img") in CACHE_TAGS
    assert run(published) == 1.0


def test_a_local_sandbox_learns_its_python_and_stages_that_ones_bytecode_alone(tmp_path: Path, monkeypatch):
    """The host stands for a local sandbox's image: after one run reports its Python, later runs on
    a sandbox with the same PATH unpack one interpreter's bytecode and the SDK's bundle, and grade alike."""
    import asyncio
    import io
    import tarfile

    from support import EXAMPLES

    from nemo_gym.data.tasks.harbor import verification
    from nemo_gym.data.tasks.harbor.bytecode import SDK_BUNDLE, ImageTags
    from nemo_gym.data.tasks.harbor.sandboxes import LocalSandbox
    from nemo_gym.data.tasks.harbor.task import load_task
    from nemo_gym.data.tasks.harbor.verification import plan_verification, run_verification

    monkeypatch.setattr(verification, "IMAGE_TAGS", ImageTags())
    staged: List[List[str]] = []
    piped = LocalSandbox.exec_piped

    async def spy(self: LocalSandbox, command: str, stdin: bytes, **options: Any) -> Any:
        with tarfile.open(fileobj=io.BytesIO(stdin)) as archive:
            staged.append(archive.getnames())
        return await piped(self, command, stdin, **options)

    monkeypatch.setattr(LocalSandbox, "exec_piped", spy)
    plan = plan_verification(load_task(EXAMPLES / "answer-file"))
    workspace = tmp_path / "ws"
    shutil.copytree(EXAMPLES / "answer-file" / "workspace", workspace)
    (workspace / "answer.txt").write_text("Paris\n")

    async def go() -> List[float]:
        rewards = []
        for _ in range(2):  # a fresh sandbox each time: the hint outlives one
            async with LocalSandbox(workspace) as sandbox:
                outcome = await run_verification(plan, sandbox)
                assert not outcome.masked, outcome
                rewards.append(outcome.reward)
        return rewards

    assert asyncio.run(go()) == [1.0, 1.0]
    tags = [{tag for tag in CACHE_TAGS for name in names if name.endswith(f".{tag}.pyc")} for names in staged]
    assert tags[0] == set(CACHE_TAGS)
    assert len(tags[1]) == 1 and tags[1] <= set(CACHE_TAGS)
    assert not any(name.endswith(SDK_BUNDLE) for name in staged[0])
    assert any(name.endswith(SDK_BUNDLE) for name in staged[1])
