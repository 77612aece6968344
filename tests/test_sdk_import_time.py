"""Importing the SDK costs next to nothing (SPEC section 11: at most 1.3x a bare interpreter start).

Each helper of ``nemo_gym.verifiers`` is imported on first use, and no module of the SDK imports
``re``, ``fractions``, ``decimal``, ``enum`` and the like (several milliseconds on a start of about
ten) until a call needs them. Each check runs in a fresh interpreter, on the SDK laid out as staging
lays it out in a sandbox, and compares with a bare start of the same interpreter: some Pythons load
``re`` at start-up already (a ``.pth`` file in site-packages, for one). ``benchmarks/sdk_import.py``
measures the time itself.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List, Set

import pytest

import nemo_gym.verifiers
from nemo_gym.data.tasks.harbor._resources import sdk_files

pytestmark = pytest.mark.every_python  # the in-sandbox part: proven on every Python (noxfile)

# What the SDK must not import before a call needs it: each costs start-up time (re brings enum,
# functools and collections; fractions brings decimal, numbers and math).
HEAVY = (
    "re",
    "enum",
    "functools",
    "collections",
    "fractions",
    "decimal",
    "numbers",
    "math",
    "unicodedata",
    "typing",
    "importlib",
)

# One call per helper, and the repr of what it returns: the patterns compiled on first use work.
CALLS = {
    "exact_match": (
        "exact_match(' The  “Paris”! ', 'paris', ignore_case=True, ignore_punctuation=True, remove_articles=True)",
        "True",
    ),
    "extract_answer": ("extract_answer('so\\n**Final Answer:** $42$.')", "'42'"),
    "extract_boxed": ("extract_boxed('so \\\\boxed{\\\\boxed{\\\\frac{1}{2}}}')", "'\\\\frac{1}{2}'"),
    "extract_tag": ("extract_tag('<answer> B </answer>')", "'B'"),
    "final_text": (
        "final_text({'output': [{'type': 'message', 'content': [{'type': 'output_text', 'text': 'hi'}]}]})",
        "'hi'",
    ),
    "numeric_match": ("numeric_match('$1,234.50', [1234.5, '½'])", "True"),
    "parse_number": ("parse_number('\\\\frac{1}{3}')", "Fraction(1, 3)"),
}

# The SDK copy's folder is the script's first argument; the script prints one module name a line.
PRELUDE = "import sys\nsys.path.insert(0, sys.argv[1])\n"
SHOW = "\nprint('\\n'.join(sorted(sys.modules)))\n"


@pytest.fixture(scope="module")
def staged(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The SDK as staged into a sandbox: an empty ``nemo_gym/__init__.py`` and ``nemo_gym/verifiers/``."""
    root = tmp_path_factory.mktemp("staged")
    for name, content in sdk_files():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(content)
    return root


def _run(code: str, staged: Path) -> List[str]:
    """The lines ``code`` prints in a fresh isolated interpreter (no PYTHON* variable, no user site)."""
    completed = subprocess.run(
        [sys.executable, "-I", "-c", PRELUDE + code, str(staged)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=staged,
    )
    assert completed.returncode == 0, completed.stderr.decode()
    return completed.stdout.decode().splitlines()


@pytest.fixture(scope="module")
def at_start(staged: Path) -> Set[str]:
    """The heavy modules a bare start of this interpreter loads by itself."""
    return set(HEAVY) & set(_run(SHOW, staged))


def _sdk_modules(modules: List[str]) -> List[str]:
    return [name for name in modules if name.startswith("nemo_gym.verifiers.")]


def test_importing_the_package_imports_no_submodule(staged: Path, at_start: Set[str]) -> None:
    modules = _run("import nemo_gym.verifiers" + SHOW, staged)
    assert "nemo_gym.verifiers" in modules
    assert _sdk_modules(modules) == []
    assert set(HEAVY) & set(modules) <= at_start


def test_importing_the_package_as_installed_imports_no_submodule(tmp_path: Path) -> None:
    # The package as this test run imports it (a namespace nemo_gym, or NeMo Gym's own beside it).
    completed = subprocess.run(
        [sys.executable, "-c", "import sys, nemo_gym.verifiers" + SHOW],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert completed.returncode == 0, completed.stderr.decode()
    assert _sdk_modules(completed.stdout.decode().splitlines()) == []


@pytest.mark.parametrize("name", nemo_gym.verifiers.__all__)
def test_a_helper_imports_its_own_module_and_nothing_heavy_until_called(
    name: str, staged: Path, at_start: Set[str]
) -> None:
    call, expected = CALLS[name]
    script = f"from nemo_gym.verifiers import {name}{SHOW}print('---')\nprint(repr({call}))\n"
    lines = _run(script, staged)
    modules, result = lines[: lines.index("---")], lines[lines.index("---") + 1 :]
    assert set(HEAVY) & set(modules) <= at_start
    home = getattr(nemo_gym.verifiers, name).__module__
    helpers = {"nemo_gym.verifiers._extract", "nemo_gym.verifiers._match", "nemo_gym.verifiers._numbers"}
    helpers |= {"nemo_gym.verifiers._response", "nemo_gym.verifiers.files"}
    assert helpers & set(_sdk_modules(modules)) == {home}  # no other helper's module
    assert result == [expected]


def test_the_files_module_imports_nothing_heavy(staged: Path, at_start: Set[str], tmp_path: Path) -> None:
    (tmp_path / "answer.txt").write_text("42\n")
    script = (
        "import nemo_gym.verifiers.files\nfrom nemo_gym.verifiers import files\n"
        f"assert files.read_text({str(tmp_path)!r}, 'answer.txt') == '42'" + SHOW
    )
    modules = _run(script, staged)
    assert "nemo_gym.verifiers.files" in modules
    assert set(HEAVY) & set(modules) <= at_start


def test_what_is_not_a_number_loads_no_fractions(staged: Path, at_start: Set[str]) -> None:
    script = (
        "from nemo_gym.verifiers import parse_number\n"
        "assert [parse_number(v) for v in ('5 apples', '', '1/', None, [1], b'1', True)] == [None] * 7" + SHOW
    )
    assert {"fractions", "decimal"} & set(_run(script, staged)) <= at_start


def test_a_decimal_made_after_the_sdk_was_imported_is_still_read_as_one(staged: Path) -> None:
    script = (
        "from nemo_gym.verifiers import numeric_match, parse_number\n"
        "assert parse_number('1.5') == 1.5\n"
        "from decimal import Decimal\n"
        "from fractions import Fraction\n"
        "assert parse_number(Decimal('1.50')) == Fraction(3, 2)\n"
        "assert parse_number(Decimal('NaN')) is None and parse_number(Decimal('sNaN')) is None\n"
        "assert parse_number(Decimal('1e999999999')) is None  # the exponent cap applies, as to text\n"
        "assert numeric_match(Decimal('0.1'), '0.1') and numeric_match('10%', Decimal('0.1'), percent='either')\n"
        "print('ok')"
    )
    assert _run(script, staged) == ["ok"]


def test_dir_and_star_import_list_every_helper() -> None:
    assert set(nemo_gym.verifiers.__all__) <= set(dir(nemo_gym.verifiers))
    namespace: Dict[str, Any] = {}
    exec("from nemo_gym.verifiers import *", namespace)
    assert sorted(name for name in namespace if name != "__builtins__") == sorted(nemo_gym.verifiers.__all__)
    for name in nemo_gym.verifiers.__all__:
        helper = getattr(nemo_gym.verifiers, name)
        assert getattr(sys.modules[helper.__module__], name) is helper


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        nemo_gym.verifiers.nope  # noqa: B018
    with pytest.raises(ImportError):
        exec("from nemo_gym.verifiers import nope", {})


# The shipped examples' calls on answers as an agent most often writes them: plain ASCII text is
# labelled, compared and read as a number without re, unicodedata or fractions.
PLAIN_CALLS = [
    "exact_match(' Paris\\n', 'paris', ignore_case=True)",
    "numeric_match(extract_answer('12 x 0.35.\\n\\nAnswer: $4.20'), '4.20')",
    "extract_answer('so\\n**Final Answer:** 42') == '42'",
    "not numeric_match('1000000000000', 1000000000001) and numeric_match('2.5', [2, 2.5])",
]


@pytest.mark.parametrize("call", PLAIN_CALLS)
def test_a_plain_ascii_answer_loads_nothing_heavy(call: str, staged: Path, at_start: Set[str]) -> None:
    script = f"from nemo_gym.verifiers import exact_match, extract_answer, numeric_match\nassert {call}" + SHOW
    assert set(HEAVY) & set(_run(script, staged)) <= at_start
