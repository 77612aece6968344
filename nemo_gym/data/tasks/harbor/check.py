"""``gym-harbor check``: everything about a task or a dataset that can be known without a sandbox.

Each finding names its file and key and says what to do, in one line. Errors are what will fail
for sure (a file that does not load, a ``verify`` the runner cannot call, an unclosed ``${``);
warnings are what will quietly grade wrong or not everywhere (an unknown key, which Harbor ignores
too; ``$NAME`` that is not a template; an import the image must provide; a task that cannot be
published for Harbor). Nothing here runs the author's code: ``verifier.py`` is read as source.
"""

from __future__ import annotations

import ast
import difflib
import functools
import importlib.util
import os
import posixpath
import re
import sys
import sysconfig
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from nemo_gym.data.tasks.harbor._resources import SHIM_FILES
from nemo_gym.data.tasks.harbor.staging import StagingError, task_test_files
from nemo_gym.data.tasks.harbor.task import (
    ROWS_FILE,
    Dataset,
    Task,
    TaskError,
    is_single_task,
    load_dataset,
    load_task,
    no_task_reason,
    read_text_file,
    read_toml,
)

ERROR, WARNING = "error", "warning"
# The key of a finding that only says a task cannot be published for Harbor.
PUBLISH_KEY = "publish --harbor"

# The keys Harbor's TaskConfig (harbor 0.26, schema 1.4) knows, by table: ``True`` is a value,
# ``None`` a table whose keys are free (``metadata``, an env table), ``[...]`` an array of tables.
Schema = Dict[str, Any]


def _values(*names: str) -> Schema:
    return {name: True for name in names}


_HEALTHCHECK = _values("command", "interval_sec", "timeout_sec", "start_period_sec", "start_interval_sec", "retries")
_ENVIRONMENT: Schema = {
    **_values(
        "build_timeout_sec",
        "docker_image",
        "os",
        "cpus",
        "memory_mb",
        "storage_mb",
        "gpus",
        "gpu_types",
        "skills_dir",
        "workdir",
        "allow_internet",
        "network_mode",
        "allowed_hosts",
    ),
    "env": None,
    "tpu": _values("type", "topology"),
    "mcp_servers": [_values("name", "transport", "url", "command", "args", "headers")],
    "healthcheck": _HEALTHCHECK,
}
_ARTIFACT = [_values("source", "destination", "exclude", "service")]
_VERIFIER: Schema = {
    **_values("timeout_sec", "user", "environment_mode", "network_mode", "allowed_hosts"),
    "env": None,
    "environment": _ENVIRONMENT,
    "collect": [_values("command", "service", "timeout_sec", "user")],
}
_AGENT = _values("timeout_sec", "user", "network_mode", "allowed_hosts")
TASK_KEYS: Schema = {
    **_values("schema_version", "version", "source", "multi_step_reward_strategy"),
    "task": {**_values("name", "version", "description", "keywords"), "authors": [_values("name", "email")]},
    "metadata": None,
    "verifier": _VERIFIER,
    "agent": _AGENT,
    "environment": _ENVIRONMENT,
    "solution": {"env": None},
    "artifacts": _ARTIFACT,
    "steps": [
        {
            **_values("name", "min_reward"),
            "agent": _AGENT,
            "verifier": _VERIFIER,
            "healthcheck": _HEALTHCHECK,
            "artifacts": _ARTIFACT,
        }
    ],
}
# This package's dataset.toml (Harbor's own dataset.toml is another format); "*" is any task id.
DATASET_KEYS: Schema = {"timeout_multiplier": True, "gym": {"tasks": {"*": {"verifier": _values("inputs")}}}}

_DOLLAR_NAME = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")
_WHOLE_TEMPLATE = re.compile(r"\$\{([^}:]+)(?::-(.*))?\}")


@dataclass(frozen=True)
class Finding:
    """One thing ``check`` found: in ``path`` (and at ``key``, when there is one)."""

    severity: str
    path: str
    key: str
    message: str

    def __str__(self) -> str:
        where = f"{self.path}: {self.key}" if self.key else self.path
        return f"{where}: {self.severity}: {self.message}"

    def as_dict(self) -> Dict[str, str]:
        return asdict(self)


def unknown_keys(
    table: Mapping[str, Any], schema: Schema, where: str, prefix: str = "", *, near_only: bool = False
) -> List[Finding]:
    """A warning per key of ``table`` that ``schema`` does not know, with the closest known one;
    ``near_only``: only the keys that have one (the likely typos)."""
    findings: List[Finding] = []
    for key, value in table.items():
        name = f"{prefix}{key}"
        if key not in schema and "*" not in schema:
            close = difflib.get_close_matches(str(key), [str(known) for known in schema if known != "*"], n=1)
            if near_only and not close:
                continue
            hint = f"; did you mean {prefix}{close[0]}?" if close else ""
            # A misspelt table takes its settings with it: say which, as they silently keep their defaults.
            inner = [str(item) for item in value] if isinstance(value, dict) else []
            lost = f", and with it {', '.join(inner[:3])}{' and more' if len(inner) > 3 else ''}" if inner else ""
            findings.append(Finding(WARNING, where, name, f"unknown key, ignored (as Harbor ignores it){lost}{hint}"))
            continue
        shape = schema.get(key, schema.get("*"))
        if isinstance(shape, list) and isinstance(value, list):
            for index, item in enumerate(value):
                if isinstance(item, dict):
                    findings += unknown_keys(item, shape[0], where, f"{name}[{index}].", near_only=near_only)
        elif isinstance(shape, dict) and isinstance(value, dict):
            findings += unknown_keys(value, shape, where, f"{name}.", near_only=near_only)
    return findings


def misspelt_keys(toml_path: Path) -> List[Finding]:
    """The unknown keys of the task.toml at ``toml_path`` that are near a known one: a typo whose
    setting silently keeps its default (``timeout_secs``), said by ``verify`` as ``check`` says it."""
    try:
        config = read_toml(toml_path) if toml_path.is_file() else {}
    except TaskError:
        return []  # loading the task says it
    return unknown_keys(config, TASK_KEYS, str(toml_path), near_only=True)


def template_findings(env: Mapping[str, Any], where: str, table: str) -> List[Finding]:
    """Values that look like templates but are not: they reach the verifier as literal text."""
    findings: List[Finding] = []
    for key, value in env.items():
        if not isinstance(value, str) or "$" not in value or _WHOLE_TEMPLATE.fullmatch(value):
            continue
        name = f"{table}.{key}"
        if "${" in value and "}" not in value[value.index("${") :]:
            message = f"{value!r} opens ${{ and never closes it: it reaches the verifier as literal text"
            findings.append(Finding(ERROR, where, name, message))
        elif _DOLLAR_NAME.fullmatch(value):
            message = f"{value!r} is not a template and reaches the verifier as literal text; write ${{{value[1:]}}}"
            findings.append(Finding(WARNING, where, name, message))
        elif "${" in value:
            message = (
                f"{value!r} is not a template: only a whole value like ${{VAR}} or ${{VAR:-default}} is "
                "filled, and this reaches the verifier as literal text"
            )
            findings.append(Finding(WARNING, where, name, message))
    return findings


def _env_tables(config: Mapping[str, Any]) -> Iterable[Tuple[str, Mapping[str, Any]]]:
    """Every env table of a task.toml, by its dotted name."""

    def table(holder: Any, *keys: str) -> Optional[Mapping[str, Any]]:
        for key in keys:
            holder = holder.get(key) if isinstance(holder, dict) else None
        return holder if isinstance(holder, dict) else None

    for name in ("verifier.env", "environment.env", "solution.env", "verifier.environment.env"):
        found = table(config, *name.split("."))
        if found is not None:
            yield name, found
    steps = config.get("steps")
    for index, step in enumerate(steps if isinstance(steps, list) else []):
        for name in ("verifier.env", "verifier.environment.env"):
            found = table(step, *name.split("."))
            if found is not None:
                yield f"steps[{index}].{name}", found


# --- verifier.py, read as source ----------------------------------------------------------------

_KNOWN_ARGUMENTS = ("workspace", "task_data", "response", "state")


def _is_stdlib(name: str) -> bool:
    names = getattr(sys, "stdlib_module_names", None)  # Python 3.10+
    if names is not None:
        return name in names or name in sys.builtin_module_names
    if name in sys.builtin_module_names:
        return True
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    origin = getattr(spec, "origin", None) or ""
    stdlib = sysconfig.get_paths()["stdlib"]
    return bool(origin) and origin.startswith(stdlib) and "site-packages" not in origin


def verifier_findings(
    path: Path, siblings: Sequence[str] = (), *, alone: bool = False, elsewhere: Optional[Mapping[str, Path]] = None
) -> List[Finding]:
    """What reading ``verifier.py`` tells: it parses, defines a ``verify`` the runner can call, and
    imports only what the sandbox has (the standard library, the SDK, files beside it). ``alone``: a
    dataset's ``verifier.py``, staged without the files beside it, which it must not import or read.
    ``elsewhere``: modules of the task's other ``tests/`` folders (another step's), by the folder."""
    where = str(path)
    try:
        source = path.read_bytes()
        tree = ast.parse(source, filename=where)
    except (OSError, ValueError) as error:
        return [Finding(ERROR, where, "", f"cannot read it ({error})")]
    except SyntaxError as error:
        return [Finding(ERROR, where, f"line {error.lineno}", f"is not valid Python: {error.msg}")]
    findings: List[Finding] = []
    try:
        ast.parse(source, filename=where, feature_version=(3, 8))
    except SyntaxError as error:
        message = f"uses syntax newer than Python 3.8 ({error.msg}): the image's python3 must be new enough"
        findings.append(Finding(WARNING, where, f"line {error.lineno}", message))
    findings += _verify_findings(tree, where)
    findings += _reward_file_findings(tree, where)
    if alone:
        beside = sorted(item.name for item in path.parent.iterdir() if item.name != path.name)
        findings += _beside_alone_findings(tree, path.parent, beside)
        # Their imports are said above; the standard library's check passes over them.
        siblings = [*siblings, *(Path(name).stem for name in beside)]
    findings += _import_findings(tree, where, siblings, elsewhere or {})
    return findings


def _reward_file_findings(tree: ast.Module, where: str) -> List[Finding]:
    """A reward file named in the source (stock Harbor's habit, writing /logs/verifier/reward.txt): the
    runner writes reward.json from verify's return value, and removes one verify wrote when the run fails."""
    named = {
        node.value.rsplit("/", 1)[-1]
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
    }
    message = (
        "names a reward file: verify's return value is the score, and a reward file verify writes is removed "
        "(a failed run) or ignored; return the score instead"
    )
    return [Finding(WARNING, where, name, message) for name in ("reward.json", "reward.txt") if name in named]


# A dataset's verifier.py goes to /tests with the shim and nothing else of the dataset's root.
_ALONE = "only verifier.py of a dataset's root is staged in /tests, nothing beside it"


def _beside_alone_findings(tree: ast.Module, folder: Path, beside: Sequence[str]) -> List[Finding]:
    """A dataset's verifier.py that imports a module beside it (an error), or names a file beside it
    as in ``Path(__file__).parent / "aliases.json"`` (a warning: the text may mean something else):
    it passes where it is and fails in every sandbox."""
    where = str(folder / "verifier.py")
    modules = {Path(name).stem for name in beside if name.endswith(".py")}
    files = {name for name in beside if (folder / name).is_file()}
    findings: List[Finding] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            tops = [alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            tops = [node.module.split(".")[0]]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in files:
            message = (
                f"names {node.value}, which is beside it here and not in the sandbox: {_ALONE}; put the data in "
                "each row's fields (task_data) or in verifier.py itself"
            )
            findings.append(Finding(WARNING, where, f"line {node.lineno}", message))
            continue
        else:
            continue
        for top in tops:
            if top in modules or top in beside:
                message = f"imports {top}, which is beside it here and not in the sandbox: {_ALONE}; copy it in"
                findings.append(Finding(ERROR, where, f"line {node.lineno}", message))
    return findings


def _returns_a_value(function: ast.AST) -> bool:
    """Whether ``function``'s own body (not a function nested in it) has a ``return`` with a value."""
    pending = list(ast.iter_child_nodes(function))
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Return) and node.value is not None:
            return True
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            pending.extend(ast.iter_child_nodes(node))
    return False


def _verify_definition(tree: ast.Module) -> Optional[ast.AST]:
    """The statement that binds ``verify`` last at the top level (it wins, as at run time)."""
    definition: Optional[ast.AST] = None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "verify":
            definition = node
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.ImportFrom, ast.Import, ast.ClassDef)):
            names = _bound_names(node)
            if "verify" in names:
                definition = node
    return definition


def _top_level_functions(tree: ast.Module) -> List[str]:
    return [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _declares(path: Path, name: str) -> bool:
    """Whether the ``def verify`` of the ``verifier.py`` at ``path`` names the argument ``name``."""
    arguments = _verify_arguments(path)
    return arguments is not None and name in _names(arguments)


def missing_task_data(task: Task, verifier: Path) -> Optional[str]:
    """Why the ``verify`` of ``verifier`` gets ``{}`` for ``task_data`` (a ``KeyError`` at its first
    field, the usual sign), when it declares the argument and ``task`` has no ``task_data.json``."""
    if task.task_data or (task.path / "task_data.json").exists() or not _declares(verifier, "task_data"):
        return None
    beside = verifier.parent / "task_data.json"
    if beside.is_file() and (verifier.parent / "test.sh").is_file():
        return None  # a published task: its test.sh (the shim) runs verifier.py on the tests/ file
    message = f"verify declares task_data, but {task.path / 'task_data.json'} does not exist: it gets {{}}"
    if beside.is_file():
        message += f" ({beside} is replaced by it: move that file beside task.toml)"
    return message


def never_reads(path: Path, name: str) -> bool:
    """Whether the ``verify`` of the ``verifier.py`` at ``path`` is certain never to get the argument
    ``name``: a ``def`` that neither declares it nor takes ``**kwargs`` (anything else may)."""
    arguments = _verify_arguments(path)
    return arguments is not None and arguments.kwarg is None and name not in _names(arguments)


def _names(arguments: ast.arguments) -> List[str]:
    return [item.arg for item in (*getattr(arguments, "posonlyargs", []), *arguments.args, *arguments.kwonlyargs)]


def _verify_arguments(path: Path) -> Optional[ast.arguments]:
    try:
        definition = _verify_definition(ast.parse(path.read_bytes()))
    except (OSError, SyntaxError, ValueError):
        return None
    return definition.args if isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _verify_findings(tree: ast.Module, where: str) -> List[Finding]:
    definition = _verify_definition(tree)
    if definition is None:
        message = "defines no `verify` at the top level: the runner calls verify(workspace, task_data, ...)"
        near = difflib.get_close_matches("verify", _top_level_functions(tree), n=1, cutoff=0.6)
        if near:
            message += f"; did you mean to name `{near[0]}` verify?"
        return [Finding(ERROR, where, "verify", message)]
    if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return []  # a partial, a class, an import: the runner finds its signature at run time
    arguments = definition.args
    positional = [*getattr(arguments, "posonlyargs", []), *arguments.args]
    first_default = len(positional) - len(arguments.defaults)
    findings: List[Finding] = []
    required = [item.arg for index, item in enumerate(positional) if index < first_default]
    required += [item.arg for item, default in zip(arguments.kwonlyargs, arguments.kw_defaults) if default is None]
    for name in required:
        if name not in _KNOWN_ARGUMENTS:
            message = (
                f"declares `{name}`, which the runner cannot supply: it can declare workspace, task_data, "
                "response and state (or give it a default)"
            )
            findings.append(Finding(ERROR, where, f"verify({name})", message))
    if not _returns_a_value(definition):
        message = "has no `return` with a value: it returns None, which the runner refuses (every run scores 0)"
        findings.append(Finding(WARNING, where, "verify", message))
    defaulted = [item.arg for index, item in enumerate(positional) if index >= first_default]
    defaulted += [item.arg for item, default in zip(arguments.kwonlyargs, arguments.kw_defaults) if default is not None]
    for name in defaulted:
        # A default is the author's own setting (threshold=0.5); a name close to one the runner gives
        # is a misspelling that would keep its default in every run.
        near = difflib.get_close_matches(name, _KNOWN_ARGUMENTS, n=1, cutoff=0.6)
        if name not in _KNOWN_ARGUMENTS and near:
            message = (
                f"declares `{name}` with a default, which the runner never replaces: it supplies only workspace, "
                f"task_data, response and state; did you mean `{near[0]}`?"
            )
            findings.append(Finding(WARNING, where, f"verify({name})", message))
    return findings


@functools.lru_cache(maxsize=256)
def unusable_verify(source: bytes) -> Optional[str]:
    """Why the runner can never call the ``verify`` of ``source`` (a ``verifier.py``), or ``None``:
    what ``check`` finds for certain, whatever the sandbox, so that every sample would score 0 for the
    author's mistake. Certain means: it parses here, and binds no ``verify`` anywhere (no star import,
    nor the name as a string, as ``globals()["verify"]`` would use), or its last top-level ``verify``
    is a ``def`` that requires an argument the runner cannot supply. A syntax error is left to the
    sandbox, whose Python may be newer than this host's."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    dynamic = any(
        (isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names))
        or (isinstance(node, ast.Constant) and node.value == "verify")
        for node in ast.walk(tree)
    )
    findings = [finding for finding in _verify_findings(tree, "") if finding.severity == ERROR]
    if not findings or (dynamic and findings[0].key == "verify"):
        return None
    return findings[0].message


def _bound_names(node: ast.AST) -> List[str]:
    if isinstance(node, ast.ClassDef):
        return [node.name]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(alias.asname or alias.name).split(".")[0] for alias in node.names]
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return [target.id for target in targets if isinstance(target, ast.Name)]


# What a verifier may import that the shim stages beside it (verifier.py is itself, to the runner).
_SHIM_MODULES = frozenset(["verifier", *(name[: -len(".py")] for name in SHIM_FILES if name.endswith(".py"))])


def _import_findings(
    tree: ast.Module, where: str, siblings: Sequence[str], elsewhere: Mapping[str, Path]
) -> List[Finding]:
    findings: List[Finding] = []
    seen = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules = [(alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            modules = [(node.module, node.lineno)]
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            # The runner imports verifier.py as the top-level module `verifier`, which has no package.
            named = "." * node.level + (node.module or "")
            plain = f"import {node.module}" if node.module else "import the module by its name"
            message = (
                f"the relative import `from {named} import ...` fails: verifier.py is no package's module; {plain}"
            )
            findings.append(Finding(ERROR, where, f"line {node.lineno}", message))
            continue
        else:
            continue
        for module, line in modules:
            top = module.split(".")[0]
            if module in seen or top in siblings or top in _SHIM_MODULES:
                continue
            seen.add(module)
            inner = module.split(".")[1] if "." in module else ""
            if top == "tests" and inner in siblings:
                # tests/ is staged as /tests, on sys.path: its modules import by their own names.
                message = (
                    f"imports {module}, which is no module in the sandbox: tests/ is on sys.path there; import {inner}"
                )
                findings.append(Finding(ERROR, where, f"line {line}", message))
            elif top == "nemo_gym":
                if not (module == "nemo_gym" or module.startswith("nemo_gym.verifiers")):
                    message = f"imports {module}, which is not in the sandbox: only nemo_gym.verifiers is staged there"
                    findings.append(Finding(ERROR, where, f"line {line}", message))
                else:
                    findings += _sdk_name_findings(node, module, where, line)
            elif top in elsewhere:
                message = (
                    f"imports {top}, which is in {elsewhere[top]} only: a step's tests/ is staged for that "
                    f"step alone; move it to the task's tests/ to share it"
                )
                findings.append(Finding(ERROR, where, f"line {line}", message))
            elif not _is_stdlib(top):
                message = (
                    f"imports {top}, which is not in the standard library: the task's image must provide it "
                    "(the local sandbox runs this machine's Python, so it may pass there and fail in a container)"
                )
                findings.append(Finding(WARNING, where, f"line {line}", message))
    return findings


def _sdk_names(module: str) -> Optional[Tuple[str, ...]]:
    """The public names of the SDK's ``module`` (its submodule ``files`` counts for the package),
    ``None`` for a module the SDK does not have (``_SDK_MODULES``)."""
    from nemo_gym import verifiers
    from nemo_gym.verifiers import files

    if module == "nemo_gym.verifiers":
        return (*verifiers.__all__, "files")
    return tuple(files.__all__) if module == "nemo_gym.verifiers.files" else None


_SDK_MODULES = ("nemo_gym.verifiers", "nemo_gym.verifiers.files")


def _sdk_name_findings(node: ast.AST, module: str, where: str, line: int) -> List[Finding]:
    """A name the SDK does not have fails the import with ImportError in the sandbox: say so here,
    with the nearest name it has (``extract_answers``: did you mean ``extract_answer``?)."""
    if module == "nemo_gym" or module.rpartition(".")[2].startswith("_"):
        return []  # a private module is the author's own risk
    names = _sdk_names(module)
    if names is None:
        near = difflib.get_close_matches(module, _SDK_MODULES, n=1, cutoff=0.6)
        hint = f" (did you mean {near[0]}?)" if near else ""
        return [Finding(ERROR, where, f"line {line}", f"imports {module}, which the SDK does not have{hint}")]
    if not isinstance(node, ast.ImportFrom):
        return []
    findings = []
    for alias in node.names:
        if alias.name == "*" or alias.name in names or alias.name.startswith("_"):
            continue
        near = difflib.get_close_matches(alias.name, names, n=1, cutoff=0.6)
        hint = f"; did you mean {near[0]}?" if near else f"; it has {', '.join(sorted(names))}"
        message = f"imports {alias.name} from {module}, which has no such name{hint}"
        findings.append(Finding(ERROR, where, f"line {line}", message))
    return findings


# --- tasks and datasets ---------------------------------------------------------------------------


def check_task(task_dir: Path, *, dataset_root: Optional[Path] = None) -> List[Finding]:
    """The findings for one task folder."""
    task_dir = Path(task_dir)
    findings: List[Finding] = []
    toml_path = task_dir / "task.toml"
    if not toml_path.exists():
        names = [entry.name for entry in task_dir.iterdir() if entry.is_file()]
        for near in difflib.get_close_matches("task.toml", names, n=1, cutoff=0.75):
            unread = "is not read (a task's settings are in task.toml): did you mean task.toml?"
            findings.append(Finding(WARNING, str(task_dir / near), "", unread))
    if toml_path.is_file():
        try:
            config = read_toml(toml_path)
        except TaskError as error:
            return [_error(error, toml_path)]
        findings += unknown_keys(config, TASK_KEYS, str(toml_path))
        for name, table in _env_tables(config):
            findings += template_findings(table, str(toml_path), name)
    try:
        task = load_task(task_dir)
    except TaskError as error:
        return [*findings, _error(error, toml_path if toml_path.is_file() else task_dir)]
    verifiers = sorted(task.path.glob("tests/verifier.py")) + sorted(task.path.glob("steps/*/tests/verifier.py"))
    if not verifiers and not (task.path / "tests").is_dir() and task.dataset_root is not None:
        verifiers = [path for path in [task.dataset_root / "verifier.py"] if path.is_file()]
    shared = task.path / "tests"
    for tests in [shared, *sorted(task.path.glob("steps/*/tests"))]:
        try:
            if tests.is_dir():
                task_test_files(tests)  # what every run stages: a link out or a FIFO stops each one
        except StagingError as error:
            findings.append(Finding(ERROR, str(tests), "", f"cannot be staged: {error}"))
    for path in verifiers:
        if path.parent == task.dataset_root:
            findings += verifier_findings(path, alone=True)
        else:
            # A step's tests/ lies over the task's in /tests: the task's modules import there too.
            beneath = _siblings(shared) if path.parent != shared and shared.is_dir() else []
            others = {
                name: folder
                for folder in sorted(task.path.glob("steps/*/tests"), reverse=True)
                if folder != path.parent and folder.is_dir()
                for name in _siblings(folder)
            }
            findings += verifier_findings(path, _siblings(path.parent) + beneath, elsewhere=others)
        message = missing_task_data(task, path)
        if message is not None:
            findings.append(Finding(WARNING, str(path), "verify(task_data)", message))
    findings += _oracle_findings(task)
    findings += _programs_findings(task)
    dockerfile = task.path / "environment" / "Dockerfile"
    findings += _workdir_findings(task, dockerfile)
    if task.environment.docker_image and dockerfile.is_file():
        message = (
            f"is never built: [environment].docker_image {task.environment.docker_image!r} is set, and Harbor "
            "(as --sandbox docker) then runs that image; remove one of the two"
        )
        findings.append(Finding(WARNING, str(dockerfile), "", message))
    return findings + _verifier_choices(task)


# How a verify starts a program: a module that does nothing else, or one of these functions.
_PROCESS_MODULES = frozenset(("subprocess", "pty"))
_PROCESS_CALLS = ("system", "popen", "exec", "spawn", "posix_spawn", "create_subprocess_", "fork")


def starts_programs(tree: ast.Module) -> bool:
    """Whether the module, read as source, may start a program: it imports ``subprocess`` or ``pty``,
    or names ``os.system``, ``os.popen``, an ``exec``/``spawn`` function, ``fork`` or asyncio's
    ``create_subprocess_*``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(alias.name.split(".")[0] in _PROCESS_MODULES for alias in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in _PROCESS_MODULES:
            return True
        names = []
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("os", "asyncio"):
            names = [node.attr]
        if isinstance(node, ast.ImportFrom) and node.module in ("os", "asyncio"):
            names = [alias.name for alias in node.names]
        if any(name.startswith(_PROCESS_CALLS) for name in names):
            return True
    return False


def _programs_findings(task: Task) -> List[Finding]:
    """A Python verify that starts programs (the agent's, in a coding task) while the agent has a user
    of its own (README: Threat model), said once per verifier.py: as root, the program gets root, and
    with it this grade and every later one in the sandbox; as another user, it can read every file
    staged in ``/tests`` but the runner's inputs, so answers kept in a data file there are its to print
    (each step stages its own)."""
    from nemo_gym.data.tasks.harbor.sandboxes.base import names_root
    from nemo_gym.data.tasks.harbor.verification import PYTHON, task_verifier  # it imports this module

    findings: Dict[Tuple[str, str], Finding] = {}
    runs: List[Optional[str]] = [item.name for item in task.steps] or [None]
    for step in runs:
        try:
            choice = task_verifier(task, step)
        except TaskError:
            continue  # said elsewhere
        user = task.verifier_user_of(step)
        if choice.kind != PYTHON or choice.verifier_path is None or task.agent_user_of(step) is None or user is None:
            continue  # a root agent can do anything already
        try:
            tree = ast.parse(choice.verifier_path.read_bytes())
        except (OSError, SyntaxError, ValueError):
            continue  # said by verifier_findings
        if not starts_programs(tree):
            continue
        if names_root(user):
            whose = "[verifier].user" if step is None else f"[steps.verifier].user of {step!r} (or [verifier].user)"
            message = (
                f"verify starts programs and runs as root, while the agent has a user of its own: a program of "
                f"the agent's it runs gets root, and can forge this grade and later ones; set {whose} to a user of "
                "the image other than the agent's"
            )
            findings.setdefault(
                (str(choice.verifier_path), "root"), Finding(WARNING, str(choice.verifier_path), "", message)
            )
            continue
        readable = _staged_data_files(choice.tests_dirs)
        if readable:
            shown = ", ".join(readable[:_SHOWN_FILES]) + (
                f" and {len(readable) - _SHOWN_FILES} more" if len(readable) > _SHOWN_FILES else ""
            )
            message = (
                f"verify starts programs, which run as {user!r} and can read every file staged in /tests but "
                f"verifier.py ({shown}): a program of the agent's it runs can print an answer it finds there; keep "
                "answers in task_data.json, which only the runner reads"
            )
            findings.setdefault(
                (str(choice.verifier_path), message), Finding(WARNING, str(choice.verifier_path), "", message)
            )
    return list(findings.values())


# How many of the readable data files a finding names.
_SHOWN_FILES = 5


def _staged_data_files(folders: Sequence[Path]) -> List[str]:
    """The files other than Python modules that ``folders`` (a run's tests/ folders, the later ones
    over the earlier) stage in /tests, as /tests paths: the task's data, where answers hide."""
    found = set()
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in folder.rglob("*"):
            relative = path.relative_to(folder)
            if path.is_file() and "__pycache__" not in relative.parts and path.suffix not in (".py", ".pyc"):
                found.add(f"/tests/{relative.as_posix()}")
    return sorted(found)


def _workdir_findings(task: Task, dockerfile: Path) -> List[Finding]:
    """``[environment].workdir`` away from the folder the Dockerfile copies the task's files into:
    Harbor starts every command in the workdir, so the agent and the oracle never meet them there."""
    from nemo_gym.data.tasks.harbor.image_build import copied_workdir
    from nemo_gym.data.tasks.harbor.workdir import dockerfile_workdir_refusal

    refusal = dockerfile_workdir_refusal(task)
    if refusal is not None:
        return [Finding(ERROR, str(dockerfile), "WORKDIR", refusal)]
    workdir = task.environment.workdir
    try:
        copied = copied_workdir(read_text_file(dockerfile)) if workdir and dockerfile.is_file() else None
    except (OSError, ValueError):
        return []  # building it says why
    if copied is None or posixpath.normpath(str(workdir)) == copied:
        return []
    message = (
        f"copies files into its WORKDIR {copied}, but [environment].workdir is {workdir!r}, where the agent, "
        f"the oracle and the verifier start (as Harbor runs them): set workdir = {copied!r}, or copy there"
    )
    return [Finding(WARNING, str(dockerfile), "WORKDIR", message)]


def _oracle_findings(task: Task) -> List[Finding]:
    """A task (or step) whose oracle ``dataset validate`` cannot run: no ``solution/`` folder, or one
    with neither ``answer.md`` nor ``solve.sh``. A row's ``solution`` field is its oracle."""
    from nemo_gym.data.tasks.harbor.validation import solution_dir  # it imports much more than check needs

    if task.path == task.dataset_root:
        return []
    findings: List[Finding] = []
    steps: List[Optional[str]] = [item.name for item in task.steps] or [None]
    for step in steps:
        folder = solution_dir(task, step)
        if folder is None:
            where, says = str(task.path), "has no solution/ folder"
        elif not (folder / "answer.md").is_file() and not (folder / "solve.sh").is_file():
            where, says = str(folder), "holds neither answer.md nor solve.sh"
        else:
            continue
        whose = f"step {step!r}" if step is not None else "the task"
        message = f"{says}: dataset validate has no oracle to run for {whose}"
        findings.append(Finding(WARNING, where, "", message))
    return findings


# Of the rows without an oracle, the most one warning names.
ROWS_NAMED = 5


def _row_oracle_findings(dataset: Dataset) -> List[Finding]:
    """One warning for the rows whose oracle ``dataset validate`` cannot run: a row's is its
    ``solution`` field (a string), else the dataset's ``solution/`` folder."""
    if not dataset.rows or (dataset.root / "solution").is_dir():
        return []
    lacking = [row_id for row_id, row in dataset.rows.items() if not isinstance(row.get("solution"), str)]
    if not lacking:
        return []
    named = ", ".join(lacking[:ROWS_NAMED]) + (
        f" and {len(lacking) - ROWS_NAMED} more" if len(lacking) > ROWS_NAMED else ""
    )
    message = (
        f"{len(lacking)} row(s) have no `solution` field (the answer, a string), so dataset validate has no oracle "
        f"to run for them: {named}"
    )
    for row_id in lacking:  # the first misspelling, named: the rest are likely the same slip
        keys = [str(key) for key in dataset.rows[row_id] if key != "solution"]  # a solution not a string: said
        near = difflib.get_close_matches("solution", keys, n=1, cutoff=0.7)
        if near:
            message += f" (row {row_id!r} has `{near[0]}`: did you mean `solution`?)"
            break
    return [Finding(WARNING, str(dataset.root / ROWS_FILE), "solution", message)]


def _verifier_choices(task: Task) -> List[Finding]:
    """For the task and each of its steps, the verifier a run would choose (``choose_verifier``): an
    error where there is none (``verify`` and ``validate`` refuse the task there); a warning for a
    ``verifier.py`` passed over for a ``test.sh`` (Harbor runs test.sh), unless the test.sh names it
    (it may run it itself): the task's, and each step's over it."""
    from nemo_gym.data.tasks.harbor.verification import TEST_SH, choose_verifier  # it imports this module

    findings: List[Finding] = []
    names: List[Optional[str]] = [step.name for step in task.steps] or [None]
    for step in names:
        try:
            choice = choose_verifier(task.path, task.dataset_root, step)
        except TaskError as error:
            findings.append(_error(error, task.path))
            continue
        shells = [folder / "test.sh" for folder in choice.tests_dirs if (folder / "test.sh").is_file()]
        if choice.kind != TEST_SH or b"verifier.py" in shells[0].read_bytes():
            continue
        for folder in choice.tests_dirs:
            message = (
                f"is never run: {shells[0]} grades instead (a test.sh wins, as Harbor runs it); remove one of them"
            )
            finding = Finding(WARNING, str(folder / "verifier.py"), "", message)
            if (folder / "verifier.py").is_file() and finding not in findings:
                findings.append(finding)
    return findings


def _siblings(folder: Path) -> List[str]:
    return [path.stem for path in folder.glob("*.py")] + [path.name for path in folder.iterdir() if path.is_dir()]


def _error(error: TaskError, default: Path) -> Finding:
    """An error finding under the file the message begins with (``task_data.json: cannot read ...``
    is that file's, not task.toml's), else under ``default``; the path is said once."""
    text = str(error)
    named, _, rest = text.partition(": ")
    if rest and os.path.isabs(named) and os.path.lexists(named):
        return Finding(ERROR, named, "", rest)
    prefix = f"{default}: "
    return Finding(ERROR, str(default), "", text[len(prefix) :] if text.startswith(prefix) else text)


def check(path: Path) -> List[Finding]:
    """The findings for a task folder or a dataset (its settings, every task, and what cannot be
    published for Harbor), in the order of the files. Paths are said as ``path`` was given: a
    relative one stays relative (loading a task resolves its folder)."""
    path = Path(path)
    resolved = str(path.resolve())
    if str(path) == resolved:
        return _check(path)

    def as_given(text: str) -> str:
        return str(path) if text == resolved else text.replace(resolved + os.sep, str(path) + os.sep)

    return [replace(found, path=as_given(found.path), message=as_given(found.message)) for found in _check(path)]


def _check(path: Path) -> List[Finding]:
    from nemo_gym.data.tasks.harbor.publishing import publish_problems, task_publish_problems

    if not path.is_dir():
        return [Finding(ERROR, str(path), "", "is not a folder")]
    if is_single_task(path):
        findings = check_task(path)
        if not any(finding.severity == ERROR for finding in findings):
            findings += _publish_findings(path, task_publish_problems)
        return findings
    findings = []
    settings = path / "dataset.toml"
    if settings.is_file():
        try:
            findings += unknown_keys(read_toml(settings), DATASET_KEYS, str(settings))
        except TaskError as error:
            findings.append(_error(error, settings))
    try:
        dataset = load_dataset(path)
    except TaskError as error:
        return [*findings, _error(error, path)]
    if not dataset.task_ids:
        return [*findings, Finding(ERROR, str(path), "", no_task_reason(path).split(": ", 1)[1])]
    for task_id in dataset.inputs:
        if task_id not in dataset.task_ids:  # a misspelt name: its inputs would be kept for no task
            near = difflib.get_close_matches(task_id, dataset.task_ids, n=1, cutoff=0.6)
            guess = f"; did you mean {near[0]!r}?" if near else f" (its tasks: {', '.join(dataset.task_ids[:10])})"
            message = f"names no task of the dataset, so its inputs are kept for none{guess}"
            findings.append(Finding(WARNING, str(settings), f'gym.tasks."{task_id}"', message))
    for folder in dataset.folders:
        findings += check_task(path / folder, dataset_root=path)
    for entry in sorted(path.iterdir()):
        if entry.is_dir() and entry.name not in dataset.folders and (entry / ROWS_FILE).is_file():
            message = (
                f"holds {ROWS_FILE}, a dataset of its own, which this dataset does not read: check, validate and "
                "publish it on its own"
            )
            findings.append(Finding(WARNING, str(entry), "", message))
    if dataset.rows and (path / "verifier.py").is_file():
        findings += verifier_findings(path / "verifier.py", alone=True)
    findings += _row_oracle_findings(dataset)
    if not any(finding.severity == ERROR for finding in findings):
        findings += _publish_findings(path, publish_problems)
    return findings


def _publish_findings(path: Path, problems_of: Any) -> List[Finding]:
    try:
        problems = problems_of(path)
    except TaskError as error:
        return [_error(error, path)]
    return [Finding(WARNING, str(path), PUBLISH_KEY, f"cannot publish for Harbor: {problem}") for problem in problems]


def exit_status(findings: Sequence[Finding]) -> int:
    """1 when anything is an error, 3 when there are warnings only, else 0."""
    if any(finding.severity == ERROR for finding in findings):
        return 1
    return 3 if findings else 0


__all__ = [
    "DATASET_KEYS",
    "ERROR",
    "TASK_KEYS",
    "WARNING",
    "Finding",
    "check",
    "check_task",
    "exit_status",
    "missing_task_data",
    "unusable_verify",
]
