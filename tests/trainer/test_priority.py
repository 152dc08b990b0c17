"""The sidecar lowers every thread of its process, and the threads it starts later
inherit the lower priority (run in a child process: a nice value cannot be raised back
without privilege)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

CHILD = """
import json, os, threading
from trainer.sidecar.priority import lower_priority

def nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

seen = {}
started = threading.Event()
release = threading.Event()

def earlier() -> None:
    started.set()
    release.wait()
    seen["earlier"] = nice()

thread = threading.Thread(target=earlier)
thread.start()
started.wait()
seen["before"] = nice()
lower_priority(LEVELS)
release.set()
thread.join()
seen["main"] = nice()
later = threading.Thread(target=lambda: seen.__setitem__("later", nice()))
later.start()
later.join()
print(json.dumps(seen))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice: Linux")
@pytest.mark.parametrize("levels", [0, 3])
def test_every_thread_runs_lower_and_new_threads_inherit_it(levels: int) -> None:
    out = subprocess.run([sys.executable, "-c", CHILD.replace("LEVELS", str(levels))],
                         capture_output=True, text=True, check=True).stdout
    seen = json.loads(out)
    expected = min(seen["before"] + levels, 19)
    assert seen["main"] == seen["earlier"] == seen["later"] == expected
