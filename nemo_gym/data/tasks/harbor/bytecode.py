"""Bytecode shipped with the shim: the modules staged into ``/tests`` compiled ahead of time for each
CPython the shim supports, so that a sandbox's interpreter loads them instead of compiling them in
every run. ``/tests`` is fresh in every sandbox and the runner starts with ``-B``, so nothing is
ever cached there: compiling the runner alone costs a cold interpreter 3-5 ms, a quarter of a bare
start, and a verifier that imports the SDK pays as much again.

Each file is a checked-hash ``.pyc`` (PEP 552): the interpreter uses it only while the source hash
it holds matches the staged ``.py`` beside it, and compiles that source otherwise. Stale bytecode
costs time, never correctness; ``tests/test_bytecode.py`` keeps it fresh on every Python of the
matrix. After changing the shim or the SDK, regenerate it (the interpreters default to pyenv's
3.8-3.13 builds)::

    python -m nemo_gym.data.tasks.harbor.bytecode [PYTHON ...]

The files live in the shim's ``bytecode/<cache tag>/`` folder (``cpython-312``), named as their
source is staged, with ``.pyc`` for ``.py``; staging puts each where its interpreter looks for it,
``__pycache__/<module>.<cache tag>.pyc`` beside the source.

A sandbox needs one interpreter's bytecode, not six: the server's runner says which it is (its
cache tag, in the results), and later runs on the same image stage that one alone (``for_tag``,
``ImageTags``), which spares the sandbox unpacking and removing some 65 files per run. Those runs
get the SDK as one zip too (``SDK_BUNDLE``: its sources, for tracebacks, and that bytecode beside
them, where zipimport looks; ``nemo_gym/__init__.py`` points the package in there), which spares
them 16 more: every file a sandbox unpacks costs it.
"""

from __future__ import annotations

import functools
import io
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Dict, FrozenSet, Iterable, List, Optional, Sequence, Tuple

from nemo_gym.data.tasks.harbor._resources import SDK_BUNDLE, shim_dir

if TYPE_CHECKING:
    from nemo_gym.data.tasks.harbor.staging import ShimFile

# The interpreters the shim supports, by the cache tag their bytecode carries.
CACHE_TAGS = ("cpython-38", "cpython-39", "cpython-310", "cpython-311", "cpython-312", "cpython-313")
# How many images ``ImageTags`` remembers (a server sees a few; a bound keeps a long one small).
_REMEMBERED_IMAGES = 1024
# gym_runner.py is the script test.sh runs: Python compiles a script every time and caches none.
_SCRIPTS = frozenset(["gym_runner.py"])
# What each interpreter runs, given the laid-out folder and where to write: checked-hash bytecode
# for every module in it, named by source path relative to the folder (as py_compile writes it).
# A module's `from __future__ import annotations` becomes the compiler flag it stands for, its line
# left blank: run, the statement imports the __future__ module, a cost of every start (the runner,
# which ships no such line, avoids it by writing its annotations as strings).
_COMPILE = """
import __future__, ast, importlib.util, marshal, os, sys
folder, out = sys.argv[1:3]
for name in sys.argv[3:]:
    with open(os.path.join(folder, name), "rb") as handle:
        source = handle.read()
    lines, flags = source.splitlines(keepends=True), 0
    for node in ast.parse(source).body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            if lines[node.lineno - 1].strip() == b"from __future__ import annotations":
                lines[node.lineno - 1], flags = b"\\n", __future__.annotations.compiler_flag
    code = compile(b"".join(lines), "/tests/" + name, "exec", flags=flags, dont_inherit=True)
    target = os.path.join(out, sys.implementation.cache_tag, name[:-3] + ".pyc")
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "wb") as handle:  # PEP 552: checked hash (0b11) of the source as staged
        handle.write(importlib.util.MAGIC_NUMBER + (0b11).to_bytes(4, "little"))
        handle.write(importlib.util.source_hash(source) + marshal.dumps(code))
"""


def bytecode_dir() -> Path:
    return shim_dir() / "bytecode"


def compiled_names(names: Iterable[str]) -> List[str]:
    """Which of the staged files ``names`` an interpreter imports, and so has bytecode shipped."""
    return sorted(name for name in names if name.endswith(".py") and name not in _SCRIPTS)


def cache_name(name: str, tag: str) -> str:
    """Where an interpreter of cache tag ``tag`` looks for the bytecode of the staged ``name`` (in the
    sandbox, ``_gym_runner.cached_name`` says the same for the runner's late modules)."""
    folder, _, file = name.rpartition("/")
    return f"{folder + '/' if folder else ''}__pycache__/{file[: -len('.py')]}.{tag}.pyc"


def shipped(names: Iterable[str]) -> Dict[str, bytes]:
    """The shipped bytecode of the staged modules ``names``: staged name -> content."""
    root = bytecode_dir()
    modules = compiled_names(names)
    files = {}
    for tag in CACHE_TAGS:
        for name in modules:
            path = root / tag / (name[: -len(".py")] + ".pyc")
            if path.is_file():
                files[cache_name(name, tag)] = path.read_bytes()
    return files


def for_tag(files: Sequence[ShimFile], tag: Optional[str]) -> Tuple[ShimFile, ...]:
    """``files`` without the shim's shipped bytecode for interpreters other than ``tag``'s (none of
    it dropped for a ``tag`` of ``None``, or one the shim does not ship for): an interpreter never
    reads another's. The task's own files stay, ``.pyc`` or not, even at the same names (a published
    task's copy of the SDK): a task may read them as data.

    For a known ``tag``, the SDK's modules become one ``SDK_BUNDLE`` (``sdk_bundle``) where they are
    the shim's own, byte for byte: never a task's own copy (one of another release would lose its
    modules to a package that does not point into the bundle), nor beside a task's own file in
    ``nemo_gym/`` (outside the package it belongs to) or of the bundle's name."""
    if tag not in CACHE_TAGS:
        return tuple(files)
    shipped, ours = _shipped_names(), _static_by_name()
    kept = tuple(file for file in files if shipped.get(file.name, tag) == tag or ours.get(file.name) != file)
    sdk = {file.name: file for file in kept if file.name.startswith("nemo_gym/")}
    bundled = _sdk_names(tag)
    if (
        not bundled <= sdk.keys()
        or any(ours.get(name) != file for name, file in sdk.items())
        or any(file.name.split("/")[0] == SDK_BUNDLE for file in kept)
    ):
        return kept
    return (*(file for file in kept if file.name not in bundled), sdk_bundle(tag))


@functools.lru_cache(maxsize=None)
def _static_by_name() -> Dict[str, ShimFile]:
    from nemo_gym.data.tasks.harbor.staging import static_files

    return {file.name: file for file in static_files()}


@functools.lru_cache(maxsize=None)
def sdk_bundle(tag: str) -> ShimFile:
    """The SDK's modules as one stored (uncompressed: no zlib to import) zip for interpreters of
    ``tag``: each source, and its shipped bytecode beside it as ``<module>.pyc``, where zipimport looks;
    checked-hash, as in ``__pycache__``. ``nemo_gym/__init__.py`` stays a file, and points the package
    in here (``_resources.PACKAGE_INIT``). Made of the staged files themselves, with fixed times: the
    same bytes in every process."""
    from nemo_gym.data.tasks.harbor.staging import ShimFile

    ours = _static_by_name()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as bundle:
        for name in _bundled_sources():
            entries = [(name, ours[name].data)]
            compiled = ours.get(cache_name(name, tag)) if name.endswith(".py") else None
            if compiled is not None:
                entries.append((name[: -len(".py")] + ".pyc", compiled.data))
            for entry, content in entries:
                info = zipfile.ZipInfo(entry, date_time=(1980, 1, 1, 0, 0, 0))
                info.external_attr = 0o644 << 16
                bundle.writestr(info, content)
    return ShimFile(SDK_BUNDLE, buffer.getvalue())


@functools.lru_cache(maxsize=None)
def _bundled_sources() -> Tuple[str, ...]:
    """The staged SDK files a bundle holds: those of ``nemo_gym/verifiers/``, but their bytecode."""
    names = (name for name in _static_by_name() if name.startswith("nemo_gym/verifiers/"))
    return tuple(sorted(name for name in names if "__pycache__/" not in name))


@functools.lru_cache(maxsize=None)
def _sdk_names(tag: str) -> FrozenSet[str]:
    """The staged names the bundle for ``tag`` stands for: the SDK's modules and their bytecode."""
    names = _bundled_sources()
    return frozenset([*names, *(cache_name(name, tag) for name in compiled_names(names))])


@functools.lru_cache(maxsize=None)
def _shipped_names() -> Dict[str, str]:
    """Where staging lays the shim's bytecode out, by the tag each file is for."""
    from nemo_gym.data.tasks.harbor.staging import static_sources

    modules = compiled_names(static_sources())
    return {cache_name(name, tag): tag for tag in CACHE_TAGS for name in modules}


class ImageTags:
    """The cache tag each image's runner last reported, for the ``size`` images used most recently.

    A hint, never trusted for more: a wrong tag (an image rebuilt on another Python, or one a root
    verify wrote) costs one run the compile of the shim, and that run's report puts it right."""

    def __init__(self, size: int = _REMEMBERED_IMAGES) -> None:
        self._tags: OrderedDict[str, str] = OrderedDict()
        self._size = size

    def get(self, image: Optional[str]) -> Optional[str]:
        tag = self._tags.get(image) if image else None
        if tag is not None:
            self._tags.move_to_end(image)  # type: ignore[arg-type]
        return tag

    def learn(self, image: Optional[str], reported: Optional[bytes]) -> None:
        """Remembers what a run on ``image`` reported (the runner's ``cache_tag`` file); anything but a
        tag the shim ships for is ignored."""
        if not image or reported is None:
            return
        tag = reported.decode("ascii", "replace").strip()
        if tag in CACHE_TAGS:
            self._tags[image] = tag
            self._tags.move_to_end(image)
            while len(self._tags) > self._size:
                self._tags.popitem(last=False)


def build(pythons: Sequence[str], sources: Dict[str, bytes], out: Path) -> None:
    """Compiles the staged modules ``sources`` (name -> content) with each interpreter of
    ``pythons`` into ``out/<cache tag>/``, replacing what each tag held."""
    names = compiled_names(sources)
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / "tests"
        for name in names:
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).write_bytes(sources[name])
        for python in pythons:
            fresh = Path(scratch) / "out"
            shutil.rmtree(fresh, ignore_errors=True)
            subprocess.run([python, "-I", "-c", _COMPILE, str(folder), str(fresh), *names], check=True)
            for tagged in fresh.iterdir():
                if tagged.name not in CACHE_TAGS:
                    raise SystemExit(f"{python} is {tagged.name}; the shim supports {', '.join(CACHE_TAGS)}")
                shutil.rmtree(out / tagged.name, ignore_errors=True)
                shutil.copytree(tagged, out / tagged.name)


def _pyenv_pythons() -> List[str]:
    root = Path(os.environ.get("PYENV_ROOT") or Path.home() / ".pyenv")
    found = []
    for tag in CACHE_TAGS:
        version = f"3.{tag[len('cpython-3') :]}"
        matches = sorted((root / "versions").glob(f"{version}.*/bin/python{version}"))
        if not matches:
            raise SystemExit(f"no pyenv build of Python {version} under {root}; name the interpreters instead")
        found.append(str(matches[-1]))
    return found


def main(argv: Sequence[str]) -> int:
    from nemo_gym.data.tasks.harbor.staging import static_sources

    pythons = list(argv) or _pyenv_pythons()
    build(pythons, static_sources(), bytecode_dir())
    print(f"bytecode for {len(pythons)} interpreters written to {bytecode_dir()}")
    return 0


__all__ = [
    "CACHE_TAGS",
    "SDK_BUNDLE",
    "ImageTags",
    "build",
    "bytecode_dir",
    "cache_name",
    "compiled_names",
    "for_tag",
    "main",
    "sdk_bundle",
    "shipped",
]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
