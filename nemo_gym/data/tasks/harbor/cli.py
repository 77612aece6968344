"""``gym-harbor``: the command line for Harbor tasks (``gym-harbor verify``).

It is not called ``gym``: NeMo Gym's own package installs a ``gym`` command, and the two must
install side by side with neither overwriting the other. ``python -m nemo_gym.data.tasks.harbor``
runs the same thing.

Exit status: 0 when an outcome was produced (whatever the score), 2 for usage errors, 1 otherwise,
128 + the signal's number after SIGINT, SIGTERM or SIGHUP. Errors are one sentence on stderr, never
a bare traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import re
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Dict, List, NoReturn, Optional, Sequence, Tuple, TypeVar

if TYPE_CHECKING:
    from nemo_gym.data.tasks.harbor.task import Task
    from nemo_gym.data.tasks.harbor.verification import VerificationOutcome

T = TypeVar("T")
# The command's name, in usage lines and at the start of every error.
PROG = "gym-harbor"
SECRETS_HELP = "a .json or .toml table of secrets: they fill ${NAME} in [verifier].env and never appear in any output"
# `gym-harbor verify --check`: the outcome was produced, but the run failed or was masked.
CHECK_FAILED = 3
# The signals that stop gym-harbor cleanly: temporary folders removed and sandboxes closed, as on Ctrl-C.
STOP_SIGNALS = ("SIGINT", "SIGTERM", "SIGHUP")


class CommandError(Exception):
    """A failure to report in one sentence (exit status 1)."""


class Interrupted(BaseException):
    """A stop signal arrived where no event loop could cancel the work in order."""


class _SignalGuard:
    """Turns SIGINT, SIGTERM and SIGHUP into an orderly stop.

    While ``run`` drives a coroutine, the first signal cancels it, so its ``async with`` sandboxes
    and ``finally`` blocks clean up at its next ``await`` (synchronous cleanup is never cut short);
    outside ``run``, or at a second signal, the handler raises ``Interrupted`` at once.
    """

    def __init__(self) -> None:
        self.signum: Optional[int] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._task: Optional[asyncio.Task[Any]] = None
        self._previous: Dict[int, Any] = {}

    def install(self) -> None:
        for name in STOP_SIGNALS:
            number = getattr(signal, name, None)
            if number is None:
                continue
            try:
                self._previous[number] = signal.signal(number, self._handle)
            except (ValueError, OSError):  # not the main thread: leave signals as they are
                return

    def restore(self) -> None:
        for number, handler in self._previous.items():
            signal.signal(number, signal.SIG_DFL if handler is None else handler)  # None: set outside Python
        self._previous.clear()

    def _handle(self, signum: int, frame: Optional[FrameType]) -> None:
        first = self.signum is None
        if first:
            self.signum = signum
        loop, task = self._loop, self._task
        if first and loop is not None and task is not None and not task.done():
            loop.call_soon_threadsafe(task.cancel)
            return
        raise Interrupted(signum)

    async def _guarded(self, start: Callable[[], Awaitable[T]]) -> T:
        self._loop, self._task = asyncio.get_running_loop(), asyncio.current_task()
        try:
            if self.signum is not None:
                raise Interrupted(self.signum)
            return await start()
        finally:
            self._loop = self._task = None

    def run(self, start: Callable[[], Awaitable[T]]) -> T:
        """``asyncio.run(start())``, cancelled in order by a stop signal. ``start`` makes the coroutine
        inside the loop, so a signal that comes first leaves no coroutine never awaited."""
        return asyncio.run(self._guarded(start))


class _Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose usage errors (status 2) also print ``{"error": ...}`` on stdout
    when ``json_errors`` is set: ``verify --json`` promises a script one JSON object, whatever ends the run."""

    json_errors = False

    def error(self, message: str) -> NoReturn:
        if self.json_errors:
            self.print_usage(sys.stderr)
            print(json.dumps({"error": _one_line(f"{self.prog}: error: {message}")}))
            self.exit(2, f"{self.prog}: error: {message}\n")
        super().error(message)


def _parser(json_errors: bool = False) -> argparse.ArgumentParser:
    """The command line; ``json_errors`` makes ``verify``'s usage errors say themselves in JSON too."""
    parser = _Parser(prog=PROG, description="NeMo Gym's command line for Harbor tasks: verify, validate and publish.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    verify = commands.add_parser("verify", help="run one task's verifier and print the outcome")
    verify.json_errors = json_errors
    verify.add_argument("task_dir", metavar="TASK_DIR", type=Path, help="the task folder")
    verify.add_argument(
        "--workspace",
        type=Path,
        help="the agent's working directory to grade (default: TASK_DIR/workspace, else an empty folder)",
    )
    verify.add_argument(
        "--response",
        type=Path,
        help="the agent's final response: a .json Responses API object, or any other file as its text "
        "(default: TASK_DIR/response.json, when there is one)",
    )
    verify.add_argument("--task-data", type=Path, help="a JSON object that replaces the task's task_data")
    verify.add_argument("--sandbox", choices=("local", "docker"), default="local", help="where to run (default: local)")
    verify.add_argument(
        "--image", help="the Docker image (default: [environment].docker_image, else built from environment/)"
    )
    verify.add_argument(
        "--verifier-image",
        help="a separate verifier's Docker image (default: the one its task declares, else built from tests/)",
    )
    verify.add_argument("--timeout", type=float, help="the verifier's timeout in seconds (default: task.toml's)")
    verify.add_argument("--step", help="the step of a multi-step task to verify")
    verify.add_argument("--row", help="the row of a parameterized dataset (rows.jsonl) to verify")
    verify.add_argument("--secrets", type=Path, help=SECRETS_HELP)
    verify.add_argument("--json", action="store_true", help="print one JSON object on the last line")
    verify.add_argument(
        "--mount",
        action="append",
        metavar="HOST:PATH",
        help="put a host folder at a sandbox path (the agent's state beyond the workspace); repeatable",
    )
    verify.add_argument(
        "--artifacts", type=Path, metavar="DIR", help="the agent's /logs/artifacts (--mount DIR:/logs/artifacts)"
    )
    verify.add_argument(
        "--logs-out", type=Path, metavar="DIR", help="write what the verifier left in /logs/verifier into DIR"
    )
    verify.add_argument(
        "--in-place",
        action="store_true",
        help="grade the workspace folder itself (local sandbox); by default a copy is graded",
    )
    verify.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="print the verifier's output (test-stdout.txt), whatever the outcome",
    )
    verify.add_argument(
        "--check",
        action="store_true",
        help=f"exit {CHECK_FAILED} when the verifier failed (no or an invalid reward, a timeout) or was masked",
    )

    init = commands.add_parser("init", help="write a new task folder to start from (it passes check and validate)")
    init.add_argument("folder", metavar="DIR", type=Path, help="a new (or empty) folder")
    init.add_argument(
        "--kind",
        choices=("file", "answer", "test-sh"),
        default="file",
        help="file: verify reads a file the agent writes (default); answer: its final answer in answer.md; "
        "test-sh: a plain tests/test.sh",
    )
    check = commands.add_parser(
        "check", help="find what can be known without a sandbox (exit 1 for errors, 3 for warnings only)"
    )
    check.add_argument("path", metavar="TASK_OR_DATASET", type=Path, help="a task folder or a dataset folder")
    check.add_argument("--json", action="store_true", help="print the findings as one JSON object")

    dataset = commands.add_parser("dataset", help="work on a whole dataset").add_subparsers(
        dest="dataset_command", required=True, metavar="DATASET_COMMAND"
    )
    publish = dataset.add_parser("publish", help="write a copy of the dataset for another grader")
    publish.add_argument("--harbor", action="store_true", required=True, help="a copy that stock Harbor grades")
    publish.add_argument("dataset", metavar="DATASET", type=Path, help="the dataset folder")
    publish.add_argument("out", metavar="OUT", type=Path, help="a new folder to write the copy into")
    publish.add_argument(
        "--base-image",
        metavar="IMAGE",
        help="the image a task without docker_image or environment/Dockerfile starts FROM (default python:3.12-slim)",
    )
    publish.add_argument(
        "--skip-refused",
        action="store_true",
        help="publish the tasks Harbor can grade and leave out the others, each reason a warning (default: none)",
    )
    validate = dataset.add_parser("validate", help="run each task's oracle and check it scores full marks")
    validate.add_argument(
        "dataset",
        metavar="DATASET",
        type=Path,
        help="the dataset folder, or one task folder (with its dataset's settings)",
    )
    validate.add_argument(
        "--sandbox", choices=("local", "docker"), default="local", help="where to run (default: local)"
    )
    validate.add_argument("--image", help="the Docker image for every task (default: each task's docker_image)")
    validate.add_argument(
        "--verifier-image", help="the image of every separate verifier (default: each task's, else built from tests/)"
    )
    validate.add_argument(
        "--jobs", "-j", type=int, metavar="N", help="validate N tasks at once (default: this machine's cores)"
    )
    validate.add_argument("--secrets", type=Path, help=SECRETS_HELP)
    validate.add_argument(
        "--json", action="store_true", help="print one JSON object on stdout (progress goes to stderr)"
    )
    # A usage error found after parsing prints the usage of the command at fault, not the top-level one.
    for command in (verify, validate):
        command.set_defaults(command_parser=command)
    return parser


def _read_response(path: Path, parser: argparse.ArgumentParser) -> Dict[str, Any]:
    """The response in ``path``: a file that cannot be opened is a usage error (status 2), one whose
    content is not a response a ``CommandError`` (status 1)."""
    from nemo_gym.data.tasks.harbor.task import loads_json

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        parser.error(f"--response {path}: cannot read it ({error})")
    except ValueError as error:  # UnicodeDecodeError
        raise CommandError(f"--response {path}: not UTF-8 text ({error})") from None
    if path.suffix != ".json":
        from nemo_gym.data.tasks.harbor.responses import response

        return response(text, status=None)  # one assistant message holding the file's text
    try:
        value = loads_json(text)
    except ValueError as error:
        raise CommandError(f"--response {path}: not valid JSON ({error})") from None
    if not isinstance(value, dict):
        raise CommandError(f"--response {path}: must hold a JSON object (a Responses API response)")
    if "output" not in value:  # such as the client's {"output_text": ...}: final_text would read ""
        raise CommandError(
            f"--response {path}: a JSON object without `output` is no Responses API response "
            "(a file with another suffix is read as the answer's text)"
        )
    if not isinstance(value["output"], list):  # final_text would read "" and verify score it 0
        raise CommandError(
            f"--response {path}: `output` must be a list of output items, not {type(value['output']).__name__} "
            '(e.g. [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "..."}]}])'
        )
    return value


def _mounts(args: argparse.Namespace, parser: argparse.ArgumentParser, workdir: str) -> Dict[str, Path]:
    """``--mount HOST:PATH`` and ``--artifacts DIR`` as ``{sandbox path: host folder}``; none may be
    put where grading or the workspace goes (``workdir.mount_refusal``)."""
    from nemo_gym.data.tasks.harbor.task import normal_path
    from nemo_gym.data.tasks.harbor.workdir import mount_refusal

    mounts: Dict[str, Path] = {}
    specs = [(f"--mount {spec}", spec) for spec in args.mount or []]
    if args.artifacts is not None:
        specs.append((f"--artifacts {args.artifacts}", f"{args.artifacts}:/logs/artifacts"))
    for given, spec in specs:
        host, separator, path = spec.rpartition(":")
        if not separator or not host or not path.startswith("/"):
            parser.error(f"{given}: give HOST_FOLDER:/ABSOLUTE/SANDBOX/PATH")
        if not Path(host).is_dir():
            parser.error(f"{given}: {host} is not a folder")
        refusal = mount_refusal(path, workdir)
        if refusal is not None:
            parser.error(f"{given}: {refusal}")
        if normal_path(path) in mounts:  # the last would silently win
            parser.error(f"{given}: {normal_path(path)} is given twice (also {mounts[normal_path(path)]})")
        mounts[normal_path(path)] = Path(host)
    return mounts


async def _verify(args: argparse.Namespace, parser: argparse.ArgumentParser) -> VerificationOutcome:
    from nemo_gym.data.tasks.harbor.sandboxes.for_task import (
        local_stand_ins,
        open_task_sandbox,
        prepare_images,
        verifier_sandbox_opener,
    )
    from nemo_gym.data.tasks.harbor.separate import run_separate_verification
    from nemo_gym.data.tasks.harbor.task import load_task, read_json_object, read_secrets
    from nemo_gym.data.tasks.harbor.verification import plan_verification, run_verification
    from nemo_gym.data.tasks.harbor.workdir import working_directory

    if args.timeout is not None and not (math.isfinite(args.timeout) and args.timeout > 0):
        parser.error("--timeout must be a finite positive number of seconds")
    task = load_task(args.task_dir, row=args.row)
    mounts = _mounts(args, parser, working_directory(task))
    response_file: Optional[Path] = args.response
    if response_file is None and (task.path / "response.json").is_file():
        response_file = task.path / "response.json"  # the task's sample response, as workspace/ is its sample state
    response = _read_response(response_file, parser) if response_file else None
    task_data = read_json_object(args.task_data, "--task-data", given=True) if args.task_data else None
    secrets = read_secrets(args.secrets) if args.secrets else None
    plan = plan_verification(
        task, step=args.step, response=response, task_data=task_data, timeout_sec=args.timeout, secrets=secrets
    )
    workspace: Optional[Path] = args.workspace
    if workspace is None and (task.path / "workspace").is_dir():
        workspace = task.path / "workspace"
    if workspace is not None and not workspace.is_dir():
        parser.error(f"--workspace {workspace}: not a folder")
    if args.sandbox == "docker":
        await prepare_images(task, image=args.image, verifier_image=args.verifier_image, progress=_build_progress)
    with tempfile.TemporaryDirectory(prefix="nemo-gym-workspace-") as scratch:
        # Graded on a copy: a verifier that writes (bytecode, test output) leaves the task folder
        # as it was. The Docker sandbox copies the workspace into its container anyway.
        folder = Path(scratch) / "workspace"
        if workspace is None:
            folder.mkdir()
        elif args.in_place or args.sandbox == "docker":
            folder = workspace
        else:
            try:
                shutil.copytree(workspace, folder, symlinks=True)
            except (OSError, shutil.Error) as error:
                raise CommandError(f"--workspace {workspace}: cannot copy it to grade ({error})") from None
        opened = open_task_sandbox(
            task, folder, kind=args.sandbox, image=args.image, mounts=mounts, progress=_build_progress
        )
        async with opened as sandbox:
            if plan.mode == "separate":
                opener = verifier_sandbox_opener(
                    task, kind=args.sandbox, image=args.verifier_image, task_image=args.image, progress=_build_progress
                )
                outcome = await run_separate_verification(task, plan, sandbox, opener)
            else:
                outcome = await run_verification(plan, sandbox)
    # Said once the run graded, so a refusal stays the one line it is.
    for finding in _misspelt_keys(task):
        print(f"{PROG}: {finding}", file=sys.stderr)
    if args.sandbox == "local" and local_stand_ins(task):
        print(f"{PROG}: note: {_local_note(local_stand_ins(task))}", file=sys.stderr)
    limits = [(key, getattr(task.environment, key)) for key in ("cpus", "memory_mb")]
    named = ", ".join(f"{key} = {value:g}" for key, value in limits if value is not None)
    if args.sandbox == "local" and named:  # a verify that needs more than the task allows passes here
        print(
            f"{PROG}: note: the local sandbox does not enforce [environment] {named}; --sandbox docker does",
            file=sys.stderr,
        )
    if args.workspace is not None and (args.workspace / "task.toml").is_file():
        print(
            f"{PROG}: note: --workspace {args.workspace} holds a task.toml: it was graded as the agent's "
            "working directory (a task's own sample is its workspace/ folder, the default)",
            file=sys.stderr,
        )
    if args.row is None and not (task.path / "task.toml").exists():
        print(
            f"{PROG}: note: {args.task_dir} has no task.toml: check, dataset validate, dataset publish and Harbor "
            "take a folder as a task by itself only with one (an empty one will do)",
            file=sys.stderr,
        )
    if args.response and _never_reads(task, args.step, "response"):
        print(f"{PROG}: note: verify declares no `response`, so {args.response} was not read", file=sys.stderr)
    unread = [str(path) for path in (args.response, args.task_data) if path]
    if unread and _python_verifier(task, args.step) is None:
        print(
            f"{PROG}: note: {_label(args)}'s verifier is a test.sh, which gets no response or task_data (Harbor "
            f"hands test.sh neither), so {' and '.join(unread)} {'was' if len(unread) == 1 else 'were'} not read",
            file=sys.stderr,
        )
    if outcome.failure_kind is not None and args.task_data is None:
        said = _missing_task_data(task, args.step)
        if said is not None:
            print(f"{PROG}: note: {said}", file=sys.stderr)
    return outcome


def _python_verifier(task: Task, step: Optional[str]) -> Optional[Path]:
    """The ``verifier.py`` a run of ``task`` (its ``step``) chooses, ``None`` for a ``test.sh``."""
    from nemo_gym.data.tasks.harbor.verification import PYTHON, task_verifier

    choice = task_verifier(task, step)
    return choice.verifier_path if choice.kind == PYTHON else None


def _misspelt_keys(task: Task) -> List[str]:
    """``check.misspelt_keys`` of the task's task.toml."""
    from nemo_gym.data.tasks.harbor.check import misspelt_keys

    return [str(finding) for finding in misspelt_keys(task.path / "task.toml")]


def _never_reads(task: Task, step: Optional[str], name: str) -> bool:
    """Whether the Python verifier a run of ``task`` chooses certainly never gets ``name``."""
    from nemo_gym.data.tasks.harbor.check import never_reads

    verifier = _python_verifier(task, step)
    return verifier is not None and never_reads(verifier, name)


def _missing_task_data(task: Task, step: Optional[str]) -> Optional[str]:
    """``check.missing_task_data`` for the Python verifier a run of ``task`` chooses."""
    from nemo_gym.data.tasks.harbor.check import missing_task_data

    verifier = _python_verifier(task, step)
    return None if verifier is None else missing_task_data(task, verifier)


def _local_note(missing: List[str], tasks: Sequence[str] = ()) -> str:
    """One sentence: what the local sandbox ran without (``for_task.local_stand_ins``)."""
    which = f" ({len(tasks)} task(s): {', '.join(tasks[:5])}{' and more' if len(tasks) > 5 else ''})" if tasks else ""
    return (
        f"the local sandbox runs this machine's tools and Python, not {' or '.join(missing)}{which}, and "
        "without the files the image would hold; --sandbox docker grades in the task's image"
    )


def _build_progress(plan: Any, line: str) -> None:
    """An image build's output, line by line, on stderr (stdout holds the outcome)."""
    print(f"build {plan.kind} {plan.tag}: {_one_line(line)}", file=sys.stderr, flush=True)


def _label(args: argparse.Namespace) -> str:
    """What was verified, as the outcome's lines name it: the task, and its step or row."""
    label = str(args.task_dir)
    if args.step:
        label += f" step {args.step}"
    if args.row:
        label += f" row {args.row}"
    return label


def _write_logs(outcome: VerificationOutcome, folder: Path) -> None:
    """``--logs-out``: what the verifier left in /logs/verifier (test-stdout.txt as its kept tail)."""
    files = {"test-stdout.txt": outcome.stdout.encode("utf-8", "replace"), **outcome.files}
    try:
        for name, data in files.items():
            target = folder.joinpath(*name.split("/"))
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
    except OSError as error:
        raise CommandError(f"--logs-out {folder}: cannot write the verifier's files ({_os_reason(error)})") from None


def _print_human(outcome: VerificationOutcome, label: str, verbose: bool = False) -> None:
    if outcome.masked:
        print(f"masked ({outcome.mask_reason}): {outcome.detail} [{label}]")
    else:
        print(f"reward {outcome.reward:g} [{label}]{' (timed out)' if outcome.timed_out else ''}")
    if outcome.reward_components:
        print("components: " + ", ".join(_name(name) for name in outcome.reward_components))
    if outcome.metrics:
        print("metrics: " + ", ".join(f"{_name(key)}={value:g}" for key, value in outcome.metrics.items()))
    if outcome.failure_kind:
        print(f"failure: {outcome.failure_kind}: {outcome.detail}")
    if outcome.failure_kind or outcome.masked or verbose:
        print("--- test-stdout.txt ---")
        print(outcome.stdout.rstrip("\n") or "(empty)")


# The longest metric or component name the human summary shows whole (--json keeps every name whole).
NAME_SHOWN = 100


def _name(name: str) -> str:
    """A name the verifier chose, as one line of at most about ``NAME_SHOWN`` characters."""
    if len(name) > NAME_SHOWN:
        name = f"{name[:NAME_SHOWN]}... ({len(name)} characters)"
    return _one_line(name)


def _os_reason(error: OSError) -> str:
    """An ``OSError`` as a clause: its message, and the path it names when that is not the one given."""
    reason = error.strerror or str(error)
    return f"{reason}: {error.filename}" if error.filename is not None else reason


def _init(args: argparse.Namespace) -> int:
    from nemo_gym.data.tasks.harbor.scaffold import init_task

    try:
        written = init_task(args.folder, args.kind)
    except FileExistsError as error:
        if error.filename is None:  # init_task's own refusal: a sentence already
            raise CommandError(str(error)) from None
        raise CommandError(f"{args.folder}: cannot write a task there ({_os_reason(error)})") from None
    except OSError as error:
        raise CommandError(f"{args.folder}: cannot write a task there ({_os_reason(error)})") from None
    print(f"wrote a task of kind {args.kind} into {args.folder}: {', '.join(sorted(written))}")
    print(
        f"next: {PROG} check {args.folder}; {PROG} verify {args.folder}; edit, then "
        f"{PROG} dataset validate {args.folder} (its oracle)"
    )
    return 0


def _check(args: argparse.Namespace) -> int:
    from nemo_gym.data.tasks.harbor.check import check, exit_status

    findings = check(args.path)
    if args.json:
        print(json.dumps({"path": str(args.path), "findings": [finding.as_dict() for finding in findings]}))
    else:
        for finding in findings:
            print(_one_line(str(finding)))
        errors = sum(1 for finding in findings if finding.severity == "error")
        print(f"{errors} error(s), {len(findings) - errors} warning(s)" if findings else f"{args.path}: nothing found")
    return exit_status(findings)


def _dataset(args: argparse.Namespace, parser: argparse.ArgumentParser, guard: _SignalGuard) -> int:
    if args.dataset_command == "publish":
        from nemo_gym.data.tasks.harbor.check import ERROR, PUBLISH_KEY, check
        from nemo_gym.data.tasks.harbor.publishing import PublishError, publish_for_harbor

        # `check` first: a task it finds broken would publish and then fail under Harbor. (What
        # only cannot publish is publishing's own refusal, below, a line per reason; with
        # --skip-refused, check's warnings name what is left out.)
        findings = [finding for finding in check(args.dataset) if finding.key != PUBLISH_KEY or args.skip_refused]
        for finding in findings:
            print(_one_line(str(finding)), file=sys.stderr)
        errors = [finding for finding in findings if finding.severity == ERROR]
        if errors:
            print(f"{PROG}: {len(errors)} error(s) found by check, nothing written", file=sys.stderr)
            return 1
        options = {} if args.base_image is None else {"base_image": args.base_image}
        try:
            published = publish_for_harbor(args.dataset, args.out, skip_refused=args.skip_refused, **options)
        except PublishError as error:
            header = str(error).splitlines()[0] if str(error) else "the dataset cannot be published"
            if error.problems and not args.skip_refused:
                header = header.rstrip(":") + " (--skip-refused publishes the others):"
            print(f"{PROG}: {_one_line(header)}", file=sys.stderr)
            for problem in error.problems:  # one line per reason, the tasks grouped
                print(f"  {_one_line(str(problem))}", file=sys.stderr)
            return 1
        left_out = sum(1 for finding in findings if finding.key == PUBLISH_KEY)
        note = f" (and left out the tasks refused for the {left_out} reason(s) above)" if left_out else ""
        print(f"published {len(published)} task(s) for Harbor into {args.out}: {', '.join(published)}{note}")
        return 0
    return guard.run(lambda: _validate(args, parser))


async def _validate(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from functools import partial

    from nemo_gym.data.tasks.harbor.batch import default_jobs, map_bounded
    from nemo_gym.data.tasks.harbor.check import check
    from nemo_gym.data.tasks.harbor.progress import ProgressReport
    from nemo_gym.data.tasks.harbor.sandboxes import SandboxError
    from nemo_gym.data.tasks.harbor.sandboxes.for_task import (
        local_stand_ins,
        open_task_sandbox,
        prepare_images,
        verifier_sandbox_opener,
    )
    from nemo_gym.data.tasks.harbor.staging import StagingError
    from nemo_gym.data.tasks.harbor.task import (
        Task,
        TaskError,
        is_single_task,
        load_dataset,
        load_task,
        no_task_reason,
        read_secrets,
    )
    from nemo_gym.data.tasks.harbor.validation import FULL_MARKS, TaskResult, validate_task

    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: give at least 1")
    jobs = args.jobs or default_jobs()
    secrets = read_secrets(args.secrets) if args.secrets else None
    load: Callable[[str], Task]
    if is_single_task(args.dataset):  # one task, with what its dataset adds, as verify loads it
        task_ids: List[str] = [Path(args.dataset).resolve().name]
        load = lambda _: load_task(args.dataset)  # noqa: E731
    else:
        dataset = load_dataset(args.dataset)
        if not dataset.task_ids:
            raise CommandError(no_task_reason(args.dataset))
        task_ids, load = list(dataset.task_ids), dataset.task
    open_sandbox = partial(open_task_sandbox, kind=args.sandbox, image=args.image, progress=_build_progress)

    def open_verifier(task: Any) -> Any:
        return verifier_sandbox_opener(
            task, kind=args.sandbox, image=args.verifier_image, task_image=args.image, progress=_build_progress
        )

    # `check` first: what is wrong, or will not publish, is known before any sandbox starts.
    findings = check(args.dataset)
    if not args.json:
        for finding in findings:
            print(_one_line(str(finding)), flush=True)

    # Loading and image builds go one task at a time (a build shows its own progress); the
    # validations then run ``jobs`` at a time.
    loaded: Dict[str, Any] = {}
    for task_id in task_ids:
        try:
            task = load(task_id)
            if args.sandbox == "docker":
                await prepare_images(
                    task, image=args.image, verifier_image=args.verifier_image, progress=_build_progress
                )
            loaded[task_id] = task
        except (TaskError, SandboxError, StagingError) as error:
            loaded[task_id] = TaskResult(task_id, error=str(error))

    stand_ins: Dict[str, List[str]] = {}
    if args.sandbox == "local":
        stand_ins = {task_id: local_stand_ins(item) for task_id, item in loaded.items() if isinstance(item, Task)}
    if any(stand_ins.values()):
        kinds = sorted({re.split(r" ['(]", what)[0] for missing in stand_ins.values() for what in missing})
        tasks = [task_id for task_id, missing in stand_ins.items() if missing]
        print(f"note: {_local_note(kinds, tasks)}", file=sys.stderr if args.json else sys.stdout, flush=True)

    async def validate(task_id: str) -> TaskResult:
        item = loaded[task_id]
        if isinstance(item, TaskResult):
            return item
        try:
            return await validate_task(item, open_sandbox, open_verifier, secrets=secrets)
        except (TaskError, SandboxError, StagingError) as error:  # one task's, never the whole run's
            return TaskResult(task_id, error=str(error))

    report = ProgressReport(
        len(task_ids),
        sys.stderr if args.json else sys.stdout,
        verdict=lambda result: (
            result.passed,
            f"{result.task_id}: {_verdict(result)}",
            [] if result.passed else _failure_details(result) + _local_hint(stand_ins.get(result.task_id)),
        ),
    )
    try:
        results = await map_bounded(task_ids, validate, jobs=jobs, progress=report.update)
    finally:
        report.close()
    failed = [result.task_id for result in results if not result.passed]
    total = len(results)
    if args.json:
        print(json.dumps(_validation_json(args.dataset, results, findings)))
    else:
        print()
        print("| task | oracle | reward | result |")
        print("|---|---|---:|---|")
        for result in results:
            oracle, reward = _oracles_and_rewards(result)
            print(f"| {result.task_id} | {oracle} | {reward} | {'ok' if result.passed else 'FAILED'} |")
        above = sum(1 for result in results if result.passed and (result.reward or 0) > FULL_MARKS)
        beyond = f" ({above} of them above full marks: see their notes)" if above else ""
        print(f"\n{total - len(failed)} of {total} task(s) scored full marks{beyond}")
    if failed:
        print(f"{PROG}: validation failed for {len(failed)} task(s): {_one_line(', '.join(failed))}", file=sys.stderr)
        return 1
    return 0


def _validation_json(dataset: Path, results: List[Any], findings: List[Any]) -> Dict[str, Any]:
    """``dataset validate --json``: one object, the tasks in the dataset's order."""
    tasks = []
    for result in results:
        steps = []
        for step in result.steps:
            outcome = step.outcome
            entry: Dict[str, Any] = {"step": step.step, "oracle": step.oracle, "oracle_status": step.oracle_status}
            if outcome is not None:
                fields = ("reward", "masked", "mask_reason", "failure_kind", "detail", "timed_out")
                entry.update({key: getattr(outcome, key) for key in fields})
            entry["passed"] = step.passed
            steps.append(entry)
        tasks.append(
            {
                "task_id": result.task_id,
                "passed": result.passed,
                "reward": result.reward,
                "error": result.error or None,
                "notes": result.notes,
                "steps": steps,
            }
        )
    passed = sum(1 for task in tasks if task["passed"])
    return {
        "dataset": str(dataset),
        "total": len(tasks),
        "passed": passed,
        "findings": [finding.as_dict() for finding in findings],
        "tasks": tasks,
    }


# How much of the oracle's and the verifier's output a failed validation shows, per task.
DETAIL_LINES = 20


def _tail(text: str) -> List[str]:
    lines = text.rstrip("\n").splitlines()[-DETAIL_LINES:]
    return [f"      | {line}" for line in lines] or ["      | (empty)"]


def _failure_details(result: Any) -> List[str]:
    """What a failed task's last step shows: the oracle's exit status and output, the verifier's output."""
    if not result.steps:
        return []
    last = result.steps[-1]
    if result.error and last.passed:  # a later step could not run: the error says which, and why
        return []
    lines = []
    if last.oracle_status is not None:
        lines.append(f"    oracle ({last.oracle}) exited with {last.oracle_status}; its output ends:")
        lines += _tail(last.oracle_output)
    if last.outcome is not None:
        lines.append("    the verifier's output (test-stdout.txt) ends:")
        lines += _tail(last.outcome.stdout)
    return lines


def _local_hint(missing: Optional[List[str]]) -> List[str]:
    """Below a task that failed in the local sandbox: what of its image it ran without
    (``for_task.local_stand_ins``), the likeliest cause for a task whose files the image holds."""
    if not missing:
        return []
    return [
        f"    the local sandbox ran without {' or '.join(missing)}: the oracle started in an empty working "
        "directory, without the files the image would hold; --sandbox docker grades in the task's image"
    ]


def _oracles_and_rewards(result: Any) -> Tuple[str, str]:
    """The oracle and the reward columns of a task's row. The reward column is the task's reward, the one
    Harbor's trial gets (a multi-step task's mean), so scripts can read it as a number; a multi-step task's
    oracle column names each step's oracle and reward (``create: solve.sh (1), extend: answer.md (0.5)``),
    a step that never ran ``(-)``."""
    steps = result.steps
    if not steps:
        return "-", "-"
    reward = "-" if result.reward is None else f"{result.reward:g}"
    if len(steps) == 1 and steps[0].step is None:
        return steps[0].oracle, reward
    oracles = ", ".join(
        f"{step.step}: {step.oracle} ({'-' if step.outcome is None else format(step.outcome.reward, 'g')})"
        for step in steps
    )
    return oracles, reward


def _verdict(result: Any) -> str:
    if result.error:
        return f"FAILED ({result.error})"
    last = result.steps[-1]
    outcome = last.outcome
    where = f" at step {last.step}" if last.step else ""
    if result.passed:
        notes = "".join(f"; but {note}" for note in result.notes)
        oracles = ", ".join(f"{step.step}: {step.oracle}" if step.step else step.oracle for step in result.steps)
        return f"ok (reward {result.reward:g}, oracle {oracles}{notes})"
    if outcome.masked:
        return f"FAILED{where} (masked: {outcome.mask_reason}: {outcome.detail})"
    kind = f", {outcome.failure_kind}" if outcome.failure_kind else ""
    return f"FAILED{where} (reward {outcome.reward:g}{kind})"


def _one_line(text: str) -> str:
    """``text`` with line breaks and other control characters escaped, so an error stays one line."""
    return re.sub(r"[\x00-\x1f\x7f\x85\u2028\u2029]", lambda match: repr(match.group())[1:-1], text)


def _print_error(error: BaseException) -> None:
    """One line on stderr; a failed image build adds the builder's last lines below it."""
    lines = list(getattr(error, "lines", []) or [])
    text = str(error).splitlines()[0] if lines and str(error) else str(error)
    print(f"{PROG}: {_one_line(text)}", file=sys.stderr)
    for line in lines:
        print(f"  | {_one_line(line)}", file=sys.stderr)


def main(argv: Optional[List[str]] = None) -> int:
    guard = _SignalGuard()
    guard.install()
    status: Optional[int] = None
    try:
        status = _main(argv, guard)
    except KeyboardInterrupt:  # SIGINT where the guard could not take it (not the main thread)
        guard.signum = guard.signum or signal.SIGINT
    except BaseException:
        if guard.signum is None:
            raise
    finally:
        guard.restore()
    if guard.signum is not None:  # also when the work swallowed the cancel and finished anyway
        try:
            print(f"{PROG}: interrupted ({signal.Signals(guard.signum).name})", file=sys.stderr, flush=True)
        except OSError:  # after SIGHUP the terminal may be gone
            pass
        return 128 + guard.signum
    assert status is not None
    return status


def _main(argv: Optional[List[str]], guard: _SignalGuard) -> int:
    # Read before parsing, so that an option's own usage error (--timeout abc) is said in JSON too.
    parser = _parser(json_errors="--json" in (sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    parser = getattr(args, "command_parser", parser)
    from nemo_gym.data.tasks.harbor.sandboxes import SandboxError
    from nemo_gym.data.tasks.harbor.staging import StagingError
    from nemo_gym.data.tasks.harbor.task import TaskError

    try:
        if args.command == "dataset":
            return _dataset(args, parser, guard)
        if args.command == "check":
            return _check(args)
        if args.command == "init":
            return _init(args)
        logs_out: Optional[Path] = args.logs_out
        if logs_out is not None and (logs_out.is_symlink() or logs_out.exists()) and not logs_out.is_dir():
            parser.error(f"--logs-out {logs_out}: not a folder")  # said before the run, not after it
        outcome = guard.run(lambda: _verify(args, parser))
    except (CommandError, TaskError, StagingError, SandboxError) as error:
        _print_error(error)
        if getattr(args, "json", False) and args.command == "verify":  # a script reads the last line
            print(json.dumps({"error": _one_line(str(error))}))
        return 1
    status = _report(outcome, args)
    if logs_out is not None:  # after the outcome is printed: a folder that cannot be written loses no grade
        try:
            _write_logs(outcome, logs_out)
        except CommandError as error:
            _print_error(error)
            return 1
    return status


def _report(outcome: VerificationOutcome, args: argparse.Namespace) -> int:
    """Prints ``verify``'s outcome (``--json``: one object on the last line) and returns its status."""
    if args.json:
        fields = ("reward", "metrics", "reward_components", "failure_kind", "masked", "mask_reason", "detail")
        report = {key: getattr(outcome, key) for key in fields}
        report.update(timed_out=outcome.timed_out, stdout=outcome.stdout)
        report["files"] = {name: len(data) for name, data in sorted(outcome.files.items())}
        print(json.dumps(report))
    else:
        _print_human(outcome, _label(args), args.verbose)
    if args.check and (outcome.masked or outcome.failure_kind is not None):
        return CHECK_FAILED
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
