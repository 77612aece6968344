# The entry point test.sh runs. Any Python must be able to parse this file (2.7 and 3.6 included),
# so that an old interpreter is refused with a clear message and test.sh can try the next one;
# the runner proper (_gym_runner.py) needs Python 3.8 or newer.
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn  # noqa: F401 (a type comment names it: this file parses on 2.7)

TOO_OLD = 86  # test.sh reads this status as "try the next interpreter" (keep in sync)

if sys.version_info < (3, 8):
    sys.stdout.write(
        "%s is Python %s; the verifier needs Python 3.8 or newer\n"
        % (sys.executable or "this interpreter", sys.version.split()[0])
    )
    sys.exit(TOO_OLD)


_here = os.path.dirname(os.path.abspath(__file__))
if sys.path[:1] != [_here]:  # PYTHONSAFEPATH (3.11+) keeps the script's folder off sys.path
    sys.path.insert(0, _here)


def _refuse(problem):  # type: (str) -> NoReturn
    """Ends a run that cannot enter the working directory: no reward, and none the agent planted."""
    sys.stdout.write("verifier error: %s; no reward written\n" % problem)
    from _gym_runner_rare import remove_stray_rewards

    remove_stray_rewards(os.environ.get("VERIFIER_LOGS_DIR") or "/logs/verifier", origin="was there before the run")
    sys.exit(1)


# test.sh started this interpreter in / and holds the working directory open on a descriptor, or,
# for a folder its user may enter but not read, gives its path and its device and inode (see there).
_cwd = os.environ.pop("NEMO_GYM_CWD_FD", "")
_cwd_path = os.environ.pop("NEMO_GYM_CWD", "")
_cwd_id = os.environ.pop("NEMO_GYM_CWD_ID", "")
if _cwd:
    try:
        os.fchdir(int(_cwd))
        os.close(int(_cwd))
    except (OSError, ValueError) as error:
        _refuse("cannot enter the working directory again (%s)" % error)
elif _cwd_path:
    try:
        os.chdir(_cwd_path)
        _entered = os.stat(".")
    except OSError as error:
        _refuse("cannot enter the working directory again (%s)" % error)
    if "%d:%d" % (_entered.st_dev, _entered.st_ino) != _cwd_id:
        _refuse("the working directory %s was replaced while the verifier started" % _cwd_path)
if _cwd or _cwd_path:
    os.environ["PWD"] = os.getcwd()

from _gym_runner import end, main

sys.exit(end(main(_here)))
