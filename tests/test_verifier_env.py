"""verifier_env: a table of task folders, each with its modes, environments, build context and
environment, compose readers and the loader's refusal (seed 004, HARBOR-NOTES C and E)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional

import pytest

from nemo_gym.data.tasks.harbor import verifier_env as ve
from nemo_gym.data.tasks.harbor.task import TaskError, load_task

DOCKERFILE = {"tests/Dockerfile": "FROM debian:bookworm-slim\nRUN true\n"}
TESTS = {"tests/test.sh": "echo 1 > /logs/verifier/reward.txt\n"}
SEP_IMAGE = (
    'schema_version = "1.3"\n[verifier]\nenvironment_mode = "separate"\n[environment]\ndocker_image = "agent:1"\n'
)
SEP_BUILD = '[verifier]\nenvironment_mode = "separate"\n[environment]\ncpus = 2\n'


def compose(text: str) -> Dict[str, str]:
    return {"tests/docker-compose.yaml": text}


def steps(*names: str) -> Dict[str, str]:
    return {f"steps/{name}/instruction.md": "" for name in names}


# Each case: id, files, expectations. Unlisted expectations take DEFAULT. "steps" maps a step name to
# (mode, environment, build context relative to the task folder).
DEFAULT: Dict[str, Any] = {
    "mode": "shared",
    "env": None,
    "context": None,
    "build_env": None,
    "services": {},
    "sidecars": [],
    "overrides": [],
    "refusal": None,
    "steps": {},
}

CASES = [
    ("no-task-toml", {**TESTS}, {}),
    ("image-only-is-shared", {"task.toml": '[environment]\ndocker_image = "a:1"\n', **TESTS}, {}),
    ("explicit-shared-with-dockerfile", {"task.toml": '[verifier]\nenvironment_mode = "shared"\n', **DOCKERFILE}, {}),
    ("separate-inherits-environment-image", {"task.toml": SEP_IMAGE + 'workdir = "/app"\n'},
     {"mode": "separate", "env": {"docker_image": "agent:1", "workdir": "/app"}}),
    ("prebuilt-image-ignores-dockerfile", {"task.toml": SEP_IMAGE, **DOCKERFILE},
     {"mode": "separate", "env": {"docker_image": "agent:1"}}),
    ("separate-builds-tests-dockerfile", {"task.toml": SEP_BUILD, **DOCKERFILE},
     {"mode": "separate", "env": {"cpus": 2}, "context": "tests", "build_env": {"cpus": 2}}),
    ("separate-nothing-to-run", {"task.toml": SEP_BUILD},
     {"mode": "separate", "env": {"cpus": 2}, "refusal": "the separate verifier has nothing to run"}),
    ("separate-compose-alone-is-not-a-definition", {"task.toml": SEP_BUILD, **compose("services:\n  main:\n    build: .\n")},
     {"mode": "separate", "env": {"cpus": 2}, "services": {"main": {"build": "."}}, "refusal": "nothing to run"}),
    ("verifier-environment-implies-separate", {"task.toml": '[verifier.environment]\ndocker_image = "grader:1"\n'},
     {"mode": "separate", "env": {"docker_image": "grader:1"}}),
    ("empty-verifier-environment-inherits-nothing",
     {"task.toml": '[environment]\ndocker_image = "agent:1"\ncpus = 4\n[verifier.environment]\n', **DOCKERFILE},
     {"mode": "separate", "env": {}, "context": "tests", "build_env": {}}),
    ("empty-verifier-environment-no-dockerfile",
     {"task.toml": '[environment]\ndocker_image = "agent:1"\n[verifier.environment]\n'},
     {"mode": "separate", "env": {}, "refusal": "nothing to run"}),
    ("verifier-environment-without-image-builds",
     {"task.toml": '[verifier.environment]\nworkdir = "/w"\nenv = { A = "1" }\n', **DOCKERFILE},
     {"mode": "separate", "env": {"workdir": "/w", "env": {"A": "1"}}, "context": "tests",
      "build_env": {"workdir": "/w", "env": {"A": "1"}}}),
    ("explicit-separate-with-verifier-environment",
     {"task.toml": '[verifier]\nenvironment_mode = "separate"\n[verifier.environment]\ndocker_image = "g:2"\n'},
     {"mode": "separate", "env": {"docker_image": "g:2"}}),
    ("shared-ignores-compose-sidecars",
     {"task.toml": "", **TESTS, **compose("services:\n  main: {}\n  db:\n    image: postgres\n")},
     {"services": {"main": {}, "db": {"image": "postgres"}}, "sidecars": ["db"]}),
    ("prebuilt-pull-policy-is-fine", {"task.toml": SEP_IMAGE, **compose("services:\n  main:\n    pull_policy: always\n")},
     {"mode": "separate", "env": {"docker_image": "agent:1"}, "services": {"main": {"pull_policy": "always"}}}),
    ("prebuilt-pull-policy-build-counts", {"task.toml": SEP_IMAGE, **compose("services:\n  main:\n    pull_policy: build\n")},
     {"mode": "separate", "env": {"docker_image": "agent:1"}, "services": {"main": {"pull_policy": "build"}},
      "overrides": ["pull_policy"], "refusal": "services.main sets pull_policy"}),
    ("prebuilt-image-on-main-is-an-override", {"task.toml": SEP_IMAGE, **compose("services:\n  main:\n    image: other:1\n")},
     {"mode": "separate", "env": {"docker_image": "agent:1"}, "services": {"main": {"image": "other:1"}},
      "overrides": ["image"], "refusal": "services.main sets image"}),
    ("build-main-keys-are-read",
     {"task.toml": SEP_BUILD, **DOCKERFILE, **compose("services:\n  main:\n    build:\n      context: .\n    image: hb__x\n    pull_policy: build\n")},
     {"mode": "separate", "env": {"cpus": 2}, "context": "tests", "build_env": {"cpus": 2},
      "services": {"main": {"build": {"context": "."}, "image": "hb__x", "pull_policy": "build"}}}),
    ("build-main-environment-is-an-override",
     {"task.toml": SEP_BUILD, **DOCKERFILE, **compose("services:\n  main:\n    environment:\n      CHECK_MODE: strict\n    build: .\n")},
     {"mode": "separate", "env": {"cpus": 2}, "context": "tests", "build_env": {"cpus": 2},
      "services": {"main": {"environment": {"CHECK_MODE": "strict"}, "build": "."}},
      "overrides": ["environment"], "refusal": "services.main sets environment"}),
    ("arc-crm-6-runtime-settings",
     {"task.toml": SEP_BUILD, **DOCKERFILE,
      **compose("services:\n  main:\n    network_mode: none\n    pids_limit: 64\n    security_opt: [no-new-privileges]\n    cap_drop: [ALL]\n")},
     {"mode": "separate", "env": {"cpus": 2}, "context": "tests", "build_env": {"cpus": 2},
      "services": {"main": {"network_mode": "none", "pids_limit": 64, "security_opt": ["no-new-privileges"], "cap_drop": ["ALL"]}},
      "overrides": ["network_mode", "pids_limit", "security_opt", "cap_drop"],
      "refusal": "services.main sets network_mode, pids_limit, security_opt, cap_drop"}),
    ("sidecars-in-file-order",
     {"task.toml": SEP_IMAGE, **compose("services:\n  main: {}\n  db:\n    image: postgres\n  cache:\n    image: redis\n")},
     {"mode": "separate", "env": {"docker_image": "agent:1"},
      "services": {"main": {}, "db": {"image": "postgres"}, "cache": {"image": "redis"}},
      "sidecars": ["db", "cache"], "refusal": "declares services besides main (db, cache)"}),
    ("services-empty-mapping", {"task.toml": SEP_IMAGE, **compose("services: {}\n")},
     {"mode": "separate", "env": {"docker_image": "agent:1"}}),
    ("main-null", {"task.toml": SEP_IMAGE, **compose("services:\n  main:\n")},
     {"mode": "separate", "env": {"docker_image": "agent:1"}, "services": {"main": None}}),
    ("name-version-and-x-fields",
     {"task.toml": SEP_IMAGE, **compose("name: grader\nversion: '3.8'\nx-common: &c {}\nservices:\n  main: {}\n")},
     {"mode": "separate", "env": {"docker_image": "agent:1"}, "services": {"main": {}}}),
    ("include-refused", {"task.toml": SEP_IMAGE, **compose("include:\n  - other.yaml\nservices: {}\n")},
     {"mode": "separate", "env": {"docker_image": "agent:1"}, "refusal": "top-level include would shape"}),
    ("networks-refused", {"task.toml": SEP_IMAGE, **compose("networks:\n  default:\n    internal: true\n")},
     {"mode": "separate", "env": {"docker_image": "agent:1"}, "refusal": "top-level networks"}),
    ("volumes-refused", {"task.toml": SEP_IMAGE, **compose("volumes:\n  data: {}\n")},
     {"mode": "separate", "env": {"docker_image": "agent:1"}, "refusal": "top-level volumes"}),
    ("configs-refused", {"task.toml": SEP_IMAGE, **compose("configs: {}\n")},
     {"mode": "separate", "env": {"docker_image": "agent:1"}, "refusal": "top-level configs"}),
    ("secrets-refused", {"task.toml": SEP_IMAGE, **compose("secrets: {}\n")},
     {"mode": "separate", "env": {"docker_image": "agent:1"}, "refusal": "top-level secrets"}),
    ("unknown-top-level-refused", {"task.toml": SEP_IMAGE, **compose("services: {}\nfoo: 1\nbar: 2\n")},
     {"mode": "separate", "env": {"docker_image": "agent:1"}, "refusal": "top-level foo, bar would shape"}),
    ("invalid-yaml-refused", {"task.toml": SEP_IMAGE, **compose("services: [\n")},
     {"mode": "separate", "env": {"docker_image": "agent:1"}, "refusal": "not valid YAML"}),
    ("non-mapping-file-refused", {"task.toml": SEP_IMAGE, **compose("- main\n")},
     {"mode": "separate", "env": {"docker_image": "agent:1"}, "refusal": "must be a mapping, not a list"}),
    ("non-mapping-services-refused", {"task.toml": SEP_IMAGE, **compose("services:\n  - main\n")},
     {"mode": "separate", "env": {"docker_image": "agent:1"}, "refusal": "services must be a mapping, not list"}),
    ("empty-compose-is-an-empty-mapping", {"task.toml": SEP_IMAGE, **compose("")},
     {"mode": "separate", "env": {"docker_image": "agent:1"}}),
    ("comment-only-compose", {"task.toml": SEP_IMAGE, **compose("# nothing here\n")},
     {"mode": "separate", "env": {"docker_image": "agent:1"}}),
    # --- multi-step ---
    ("steps-shared-by-default", {"task.toml": '[[steps]]\nname = "a"\n[[steps]]\nname = "b"\n', **steps("a", "b"), **TESTS},
     {"steps": {"a": ("shared", None, "tests"), "b": ("shared", None, "tests")}}),
    ("steps-inherit-task-separate",
     {"task.toml": SEP_IMAGE + '[[steps]]\nname = "a"\n[[steps]]\nname = "b"\n', **steps("a", "b")},
     {"mode": "separate", "env": {"docker_image": "agent:1"},
      "steps": {"a": ("separate", {"docker_image": "agent:1"}, "tests"), "b": ("separate", {"docker_image": "agent:1"}, "tests")}}),
    ("step-explicit-shared-under-task-separate",
     {"task.toml": SEP_IMAGE + '[[steps]]\nname = "a"\n[[steps]]\nname = "b"\n[steps.verifier]\nenvironment_mode = "shared"\n',
      **steps("a", "b"), **TESTS},
     {"mode": "separate", "env": {"docker_image": "agent:1"},
      "steps": {"a": ("separate", {"docker_image": "agent:1"}, "tests"), "b": ("shared", None, "tests")}}),
    ("step-environment-implies-separate",
     {"task.toml": '[[steps]]\nname = "a"\n[[steps]]\nname = "b"\n[steps.verifier.environment]\ndocker_image = "s:1"\n',
      **steps("a", "b"), **TESTS},
     {"steps": {"a": ("shared", None, "tests"), "b": ("separate", {"docker_image": "s:1"}, "tests")}}),
    ("step-environment-does-not-inherit-task-verifier-environment",
     {"task.toml": '[verifier.environment]\ndocker_image = "t:1"\nworkdir = "/t"\n[[steps]]\nname = "a"\n[[steps]]\nname = "b"\n'
                   '[steps.verifier.environment]\nworkdir = "/s"\n', **steps("a", "b"), **DOCKERFILE},
     {"mode": "separate", "env": {"docker_image": "t:1", "workdir": "/t"}, "context": "tests", "build_env": {"workdir": "/s"},
      "steps": {"a": ("separate", {"docker_image": "t:1", "workdir": "/t"}, "tests"), "b": ("separate", {"workdir": "/s"}, "tests")}}),
    ("steps-build-with-the-tasks-own-environment",
     {"task.toml": SEP_BUILD + '[[steps]]\nname = "a"\n', **steps("a"), **DOCKERFILE},
     {"mode": "separate", "env": {"cpus": 2}, "context": "tests", "build_env": {"cpus": 2},
      "steps": {"a": ("separate", {"cpus": 2}, "tests")}}),
    ("step-own-tests-folder-without-image-refused",
     {"task.toml": '[[steps]]\nname = "b"\n[steps.verifier]\nenvironment_mode = "separate"\n', **steps("b"),
      "steps/b/tests/Dockerfile": "FROM x\n", **TESTS},
     {"steps": {"b": ("separate", {}, "steps/b/tests")}, "refusal": "step 'b' verifies separately from"}),
    ("step-own-tests-folder-with-image",
     {"task.toml": '[[steps]]\nname = "b"\n[steps.verifier.environment]\ndocker_image = "s:1"\n', **steps("b"),
      "steps/b/tests/test.sh": "", **DOCKERFILE},
     {"steps": {"b": ("separate", {"docker_image": "s:1"}, "steps/b/tests")}}),
    ("task-separate-but-steps-shared-builds-nothing",
     {"task.toml": SEP_BUILD + '[[steps]]\nname = "a"\n[steps.verifier]\nenvironment_mode = "shared"\n', **steps("a"), **DOCKERFILE, **TESTS},
     {"mode": "separate", "env": {"cpus": 2}, "steps": {"a": ("shared", None, "tests")}}),
    ("separate-step-with-nothing-to-run",
     {"task.toml": SEP_BUILD + '[[steps]]\nname = "a"\n', **steps("a")},
     {"mode": "separate", "env": {"cpus": 2}, "steps": {"a": ("separate", {"cpus": 2}, "tests")},
      "refusal": "step 'a' verifies separately with nothing to run"}),
    ("step-explicit-separate-copies-environment",
     {"task.toml": '[environment]\ndocker_image = "agent:1"\n[[steps]]\nname = "a"\n[steps.verifier]\nenvironment_mode = "separate"\n',
      **steps("a"), **TESTS},
     {"steps": {"a": ("separate", {"docker_image": "agent:1"}, "tests")}}),
]  # fmt: skip


def make(root: Path, files: Dict[str, str]) -> Path:
    root.mkdir(parents=True)
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def relative(task_dir: Path, path: Optional[Path]) -> Optional[str]:
    return None if path is None else path.relative_to(task_dir).as_posix()


def test_the_table_is_large_enough():
    assert len(CASES) >= 40
    assert len({case[0] for case in CASES}) == len(CASES)


@pytest.mark.parametrize("files, expected", [case[1:] for case in CASES], ids=[case[0] for case in CASES])
def test_verifier_environment(tmp_path, files, expected):
    want = {**DEFAULT, **expected}
    task_dir = make(tmp_path / "task", files)
    task = load_task(task_dir, check_runnable=False)
    got = {
        "mode": ve.verifier_mode(task),
        "env": ve.effective_verifier_environment(task),
        "context": relative(task_dir, ve.verifier_build_context(task)),
        "build_env": ve.verifier_build_environment(task),
        "services": ve.verifier_compose_services(task),
        "sidecars": ve.verifier_compose_sidecars(task),
        "overrides": ve.verifier_compose_main_overrides(task),
        "steps": {
            step.name: (
                ve.step_verifier_mode(task, step.name),
                ve.step_verifier_environment(task, step.name),
                relative(task_dir, ve.step_verifier_build_context(task, step.name)),
            )
            for step in task.steps
        },
    }
    assert got == {key: value for key, value in want.items() if key != "refusal"}
    if want["refusal"] is None:
        assert load_task(task_dir).path == task_dir
        assert ve.verifier_mode(task_dir) == want["mode"]  # a folder's path works as well as a task
    else:
        with pytest.raises(TaskError) as raised:
            load_task(task_dir)
        assert want["refusal"] in str(raised.value)


def test_refusal_messages_name_the_file(tmp_path):
    task_dir = make(tmp_path / "task", {"task.toml": SEP_IMAGE, **compose("include: [a.yaml]\n")})
    message = ve.verifier_compose_refusal(load_task(task_dir, check_runnable=False))
    assert message is not None and message.startswith(str(task_dir / "tests" / "docker-compose.yaml"))
    assert ve.verifier_compose_refusal(load_task(make(tmp_path / "ok", {"task.toml": SEP_IMAGE}))) is None


def test_results_are_copies_never_aliases(tmp_path):
    task = load_task(make(tmp_path / "task", {"task.toml": SEP_IMAGE + "[environment.env]\nA = '1'\n"}))
    environment = ve.effective_verifier_environment(task)
    assert environment is not None
    environment["docker_image"] = "changed"
    environment["env"]["A"] = "changed"
    assert task.environment.table == {"docker_image": "agent:1", "env": {"A": "1"}}
    assert ve.effective_verifier_environment(task) == {"docker_image": "agent:1", "env": {"A": "1"}}
    services_task = load_task(make(tmp_path / "svc", {"task.toml": SEP_IMAGE, **compose("services:\n  main: {}\n")}))
    ve.verifier_compose_services(services_task)["main"]["x"] = 1
    assert ve.verifier_compose_services(services_task) == {"main": {}}


def test_constants():
    assert ve.VERIFIER_MAIN_KEYS == ("image", "build", "pull_policy")
    assert ve.PREBUILT_VERIFIER_MAIN_KEYS == ("pull_policy",)
    assert ve.VERIFIER_COMPOSE_TOP_LEVEL_KEYS == ("services", "name", "version")
