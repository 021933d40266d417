"""An idle session refreshes its snapshot (issue #39, memory per session):
once cells ran and the host sent nothing for a second, the runner forks a
new snapshot of its state, hands its socket to the host (SNAPSHOT_REFRESHED)
and retires the old one, so an idle session holds one copy of its pages,
shared by its runner and snapshot, not two.

What is asserted, waiting on the processes themselves (a pidfd), never on a
clock: the old snapshot goes and exactly one new one takes its place; a
rollback after the refresh goes back exactly to the state before the killed
cell, binding cells from before the refresh included (the host let their
values go); and a runner that dies while idle, right after it handed over
the new snapshot, is replaced by that snapshot, not by the retired one."""

from __future__ import annotations

import os
import signal

import dolsot
import pytest
from dolsot.store import MemoryStore
from process_tree import alive, children, wait_until_gone


def ok(repl, code, **kwargs):
    result = repl.run("s", code, **kwargs)
    assert result.ok, (code, result.error)
    return result


def started(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])  # starttime, in clock ticks


def current_snapshot(runner: int) -> int:
    """The runner's snapshot: its newest child, once those it retired are gone."""
    kids = [pid for pid in children(runner) if alive(pid)]
    newest = max(kids, key=lambda pid: (started(pid), pid))  # a tick is 10 ms: pids break ties
    for pid in kids:
        if pid != newest:
            wait_until_gone(pid, seconds=60)  # killed by the runner when it forked the newest
    return newest


@pytest.fixture
def repl():
    # Checkpoints off: the runner forks no writer, so its only child is its
    # snapshot, and nothing but the snapshot holds the session's state.
    with dolsot.Repl(store=MemoryStore(), typecheck=False, checkpoint="off") as r:
        yield r


def refreshed(repl) -> tuple[int, int]:
    """Runs cells, waits until the idle runner retired its snapshot, and
    returns (runner, the new snapshot)."""
    ok(repl, "import os\nbox = [1]\nrunner = os.getpid()")  # the general path: a new snapshot
    ok(repl, "box.append(2)")  # a binding cell: the host keeps its value for that snapshot
    runner = int(ok(repl, "runner").value)
    old = current_snapshot(runner)
    wait_until_gone(old, seconds=60)
    new = current_snapshot(runner)
    assert new != old
    return runner, new


def test_an_idle_session_swaps_its_snapshot_and_rolls_back_exactly(repl):
    refreshed(repl)
    killed = repl.run("s", "box.append(3)\nwhile True:\n    pass", timeout=0.5)
    assert killed.exit_code == 124 and "rolled back" in killed.error
    assert ok(repl, "box").value == "[1, 2]"
    crashed = repl.run("s", "box.append(4)\nos._exit(3)")
    assert not crashed.ok and "rolled back" in crashed.error
    assert ok(repl, "box").value == "[1, 2]"


def test_a_runner_that_dies_idle_after_a_refresh_is_replaced_by_the_new_snapshot(repl):
    runner, new = refreshed(repl)
    os.kill(runner, signal.SIGKILL)
    wait_until_gone(runner)
    lost = repl.run("s", "box.append(3)")
    assert lost.outcome == dolsot.Outcome.CRASHED and "rolled back" in lost.error, lost.error
    assert ok(repl, "box, runner != os.getpid()").value == "([1, 2], True)"


def test_the_refreshed_snapshot_is_the_one_a_later_general_cell_replaces(repl):
    runner, new = refreshed(repl)
    ok(repl, "import json\nbox.append(json.dumps(3))")  # forks the next snapshot, retires this one
    wait_until_gone(new, seconds=60)
    crashed = repl.run("s", "os._exit(3)")
    assert not crashed.ok and "rolled back" in crashed.error
    assert ok(repl, "box").value == "[1, 2, '3']"


def test_a_thread_the_session_started_keeps_running_across_a_refresh(repl):
    # The refresh forks the snapshot from the runner: the runner, and the
    # threads its cells started, go on as they were.
    ok(repl, "import threading\nticks = []\nstop = threading.Event()\n"
             "def tick():\n    while not stop.wait(0.01):\n        ticks.append(1)\n"
             "t = threading.Thread(target=tick, name='ticker', daemon=True)\nt.start()")
    runner, new = refreshed(repl)
    before = int(ok(repl, "len(ticks)").value)
    ok(repl, "import time\nstart = len(ticks)\nwhile len(ticks) == start:\n    time.sleep(0.01)", timeout=30)
    assert ok(repl, "t.is_alive(), len(ticks) > %d" % before).value == "(True, True)"
    ok(repl, "stop.set(); t.join()")
