"""How the runner ends a successful run: without the interpreter's teardown (``_gym_runner.end``),
but only where nothing the run left behind needs it. The first test checks the teardown really is
skipped; each other names something that needs it and checks the run keeps it.

Some interpreters register an ``atexit`` callback as they start (this machine's 3.11 does, through
a ``.pth`` file), and the runner then always exits normally: ``CLEAN_START`` drops those callbacks,
so that the fast end is tried on every Python.
"""

from __future__ import annotations

import gzip
import json
import textwrap

import pytest

pytestmark = pytest.mark.every_python  # the in-sandbox part: proven on every Python (noxfile)

CLEAN_START = "import atexit\natexit._clear()\n"
# Prints TEARDOWN to the test's output as the interpreter tears down: an object only a module older
# than the verifier (sys) holds, which teardown finalizes and the fast end does not.
TEARDOWN_WITNESS = """
import sys
_namespace = {}
exec("import os\\nclass Witness:\\n    def __del__(self, write=os.write):\\n        write(1, b'TEARDOWN\\\\n')\\n", _namespace)
sys.teardown_witness = _namespace.pop("Witness")()
del _namespace
"""


def _verifier(source: str) -> str:
    return CLEAN_START + TEARDOWN_WITNESS + textwrap.dedent(source)


def test_a_successful_run_ends_without_teardown_and_a_failed_one_with_it(run_shim):
    run = run_shim(_verifier("def verify():\n    return 1.0\n"))
    assert run.reward == {"reward": 1.0} and run.returncode == 0, run.output
    assert "TEARDOWN" not in run.output
    run = run_shim(_verifier("def verify():\n    raise ValueError('no')\n"))
    assert run.reward is None and run.returncode == 1
    assert "TEARDOWN" in run.output


def test_files_left_open_for_writing_get_the_teardown_and_lose_nothing(run_shim):
    """Found in review: closing them from outside lost their buffers once a collection had run
    (which an answer of the right size triggers), where teardown closes a wrapper first."""
    verifier = """
    import gc, gzip, json, os
    from helper import NOTES
    LOGS = os.environ["VERIFIER_LOGS_DIR"]
    OPEN = open(os.path.join(LOGS, "module.txt"), "w")
    ZIPPED = gzip.open(os.path.join(LOGS, "notes.gz"), "wt")  # its trailer is written by close()
    def verify(workspace):
        answer = json.loads((workspace / "answer.json").read_text())
        gc.collect()
        for handle in (OPEN, NOTES, ZIPPED):
            handle.write("checked %d items" % len(answer))  # less than a buffer: in memory at the end
        return 1
    """
    helper = 'import os\nos.makedirs(os.environ["VERIFIER_LOGS_DIR"])\nNOTES = open(os.path.join(os.environ["VERIFIER_LOGS_DIR"], "helper.txt"), "w")\n'
    answer = json.dumps([[item] for item in range(3000)])
    run = run_shim(_verifier(verifier), extra_files={"helper.py": helper}, workspace_files={"answer.json": answer})
    assert run.reward == {"reward": 1}, run.output
    assert "TEARDOWN" in run.output
    for name in ("module.txt", "helper.txt"):
        assert (run.logs / name).read_text() == "checked 3000 items", name
    assert gzip.decompress((run.logs / "notes.gz").read_bytes()) == b"checked 3000 items"


def test_files_left_open_for_reading_alone_need_no_teardown(run_shim):
    verifier = """
    import os
    SOURCE = open(os.__file__, "rb")
    def verify():
        return float(len(SOURCE.read(10)) == 10)
    """
    run = run_shim(_verifier(verifier))
    assert run.reward == {"reward": 1.0}, run.output
    assert "TEARDOWN" not in run.output


def test_output_of_c_code_the_run_loaded_is_not_lost(run_shim):
    """Found in review: the C library's own stdout buffer is flushed by a normal exit alone."""
    verifier = """
    import ctypes
    LIBC = ctypes.CDLL(None)
    def verify():
        LIBC.printf(b"written by C stdio\\n")
        return 1.0
    """
    run = run_shim(_verifier(verifier))
    assert run.reward == {"reward": 1.0}, run.output
    assert "written by C stdio" in run.output and "TEARDOWN" in run.output


def test_atexit_callbacks_run(run_shim):
    run = run_shim(_verifier("def verify():\n    atexit.register(print, 'callback ran')\n    return 1\n"))
    assert run.reward == {"reward": 1}
    assert "callback ran" in run.output and "TEARDOWN" in run.output


def test_a_thread_still_running_is_waited_for(run_shim, tmp_path):
    marker = tmp_path / "thread-finished"
    verifier = f"""
    import threading, time
    def late():
        time.sleep(0.3)
        open({str(marker)!r}, "w").close()
    def verify():
        threading.Thread(target=late).start()
        return 1
    """
    run = run_shim(_verifier(verifier))
    assert run.reward == {"reward": 1}
    assert marker.exists() and "verifier note" not in run.output, run.output


def test_a_thread_stuck_after_verify_returned_does_not_hold_up_the_end(run_shim, tmp_path):
    """Red team 70: a watchdog timer or a pool's worker still waiting on the agent's hung program held
    test.sh until the verifier's timeout: NeMo Gym's server scored the reward already reported, stock
    Harbor, which then parses nothing, timed out. The run waits a moment, then ends without them,
    keeping what verify wrote to a file it left open."""
    import time

    kept = tmp_path / "kept.txt"
    verifier = f"""
    import threading, time
    def verify():
        threading.Timer(600, print, ("never",)).start()  # a watchdog nobody cancelled
        handle = open({str(kept)!r}, "w")
        handle.write("written before the end")  # buffered, never closed
        return 1
    """
    started = time.monotonic()
    run = run_shim(_verifier(verifier))
    assert time.monotonic() - started < 30, run.output  # not the 600 s the timer waits
    assert run.returncode == 0 and run.reward == {"reward": 1}, run.output
    assert "verifier note: verify left 1 thread(s) running (Thread-1" in run.output, run.output
    assert kept.read_text() == "written before the end"


def test_output_without_a_newline_is_not_lost(run_shim):
    verifier = """
    import sys
    def verify():
        print("to stdout", end="")
        sys.stderr.write("to stderr")
        return 1
    """
    run = run_shim(_verifier(verifier))
    assert run.reward == {"reward": 1} and "TEARDOWN" not in run.output
    assert "to stdout" in run.output and "to stderr" in run.output
