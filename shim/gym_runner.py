# The entry point test.sh runs. Any Python must be able to parse this file (2.7 and 3.6 included),
# so that an old interpreter is refused with a clear message and test.sh can try the next one;
# the runner proper (_gym_runner.py) needs Python 3.8 or newer.
import os
import sys

TOO_OLD = 86  # test.sh reads this status as "try the next interpreter" (keep in sync)

if sys.version_info < (3, 8):
    sys.stdout.write(
        "%s is Python %s; the verifier needs Python 3.8 or newer\n"
        % (sys.executable or "this interpreter", sys.version.split()[0])
    )
    sys.exit(TOO_OLD)

_here = os.path.dirname(os.path.abspath(__file__))
_cwd = os.environ.pop("NEMO_GYM_CWD_FD", "")
if _cwd:  # test.sh started this interpreter in / and holds the working directory open here (see there)
    try:
        os.fchdir(int(_cwd))
        os.close(int(_cwd))
    except (OSError, ValueError) as error:
        sys.stdout.write("verifier error: cannot enter the working directory again (%s); no reward written\n" % error)
        sys.exit(1)
    os.environ["PWD"] = os.getcwd()
if sys.path[:1] != [_here]:  # PYTHONSAFEPATH (3.11+) keeps the script's folder off sys.path
    sys.path.insert(0, _here)

from _gym_runner import end, main

sys.exit(end(main(_here)))
