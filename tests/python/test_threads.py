"""Threads a cell starts live on in the next cells (#23 section 1), with
rollback on (the runner keeps the live state and runs every cell; the
snapshot is the forked copy) and off. A killed cell rolls the session back
to a copy made by fork, which holds no threads: its Result names the threads
that are gone. No sleeps: every wait here is on a queue, an event or a
future, with a timeout that only bounds a failure."""

from __future__ import annotations

import os

import pytest

from dolsot.repl import Repl
from dolsot.store import MemoryStore
from process_tree import alive, descendants

ROLLBACK = [pytest.param(True, id="rollback"), pytest.param(False, id="no-rollback")]


def make(snapshots, checkpoint="async"):
    return Repl(store=MemoryStore(), typecheck=False, snapshots=snapshots, checkpoint=checkpoint)


def ok(repl, sid, code, timeout=None):
    r = repl.run(sid, code) if timeout is None else repl.run(sid, code, timeout=timeout)
    assert r.ok, r.error
    return r


POOL = "import concurrent.futures as cf\nex = cf.ThreadPoolExecutor(2, thread_name_prefix='pool')\n"
WORKER = (
    "import threading, queue\n"
    "items, requests, replies = [], queue.Queue(), queue.Queue()\n"
    "def work():\n"
    "    while True:\n"
    "        items.append(requests.get())\n"
    "        replies.put(len(items))\n"
    "ticker = threading.Thread(target=work, daemon=True, name='ticker')\n"
    "ticker.start()\n"
)
LOOP = (
    "import asyncio, threading\n"
    "loop = asyncio.new_event_loop()\n"
    "looper = threading.Thread(target=loop.run_forever, daemon=True, name='looper')\n"
    "looper.start()\n"
    "async def seven():\n"
    "    await asyncio.sleep(0)\n"
    "    return 7\n"
)


@pytest.mark.parametrize("snapshots", ROLLBACK)
def test_a_thread_pool_serves_later_cells(snapshots):
    with make(snapshots) as repl:
        ok(repl, "s", POOL)
        for i in range(20):  # back to back: each cell forks a new snapshot
            assert ok(repl, "s", f"ex.submit(lambda: {i} * 2).result(timeout=30)").value == str(i * 2)
        assert ok(repl, "s", "sorted({t.name.split('_')[0] for t in ex._threads if t.is_alive()})"
                  ).value == "['pool']"


@pytest.mark.parametrize("snapshots", ROLLBACK)
def test_a_daemon_thread_keeps_writing_into_the_session(snapshots):
    with make(snapshots) as repl:
        ok(repl, "s", WORKER)
        assert ok(repl, "s", "requests.put('a')\nreplies.get(timeout=30)").value == "1"
        assert ok(repl, "s", "requests.put('b')\nreplies.get(timeout=30)").value == "2"
        assert ok(repl, "s", "ticker.is_alive(), items").value == "(True, ['a', 'b'])"


@pytest.mark.parametrize("snapshots", ROLLBACK)
def test_an_asyncio_loop_on_a_thread_runs_later_cells_coroutines(snapshots):
    with make(snapshots) as repl:
        ok(repl, "s", LOOP)
        for _ in range(3):
            assert ok(repl, "s",
                      "asyncio.run_coroutine_threadsafe(seven(), loop).result(timeout=30)").value == "7"


@pytest.mark.parametrize("snapshots", ROLLBACK)
def test_numpy_and_pandas_with_their_native_threads_across_cells(snapshots):
    pytest.importorskip("numpy")
    pytest.importorskip("pandas")
    with make(snapshots) as repl:
        ok(repl, "s", "import numpy as np, pandas as pd\n"
                      "a = np.arange(250000, dtype=float).reshape(500, 500) / 250000\n"
                      "df = pd.DataFrame({'x': range(10), 'y': list('abcdefghij')})")
        for _ in range(3):
            assert ok(repl, "s", "round(float((a @ a.T).trace()), 3)").value == str(
                round(float(sum((i / 250000) ** 2 for i in range(250000))), 3))
            assert ok(repl, "s", "int(df.groupby(df.x % 2).x.sum().loc[1])").value == "25"
        ok(repl, "s", POOL)
        assert ok(repl, "s", "ex.submit(lambda: int(np.ones(1000).sum())).result(timeout=30)"
                  ).value == "1000"


def test_a_killed_cell_rolls_back_and_names_the_threads_it_lost():
    with make(True) as repl:
        ok(repl, "s", POOL + WORKER + "ex.submit(int).result(timeout=30)\nkept = [1, 2]")
        r = repl.run("s", "kept.append(3)\nwhile True: pass", timeout=1)
        assert r.exit_code == 124 and not r.ok
        assert "rolled back" in r.error
        assert "ticker" in r.error and "pool" in r.error, r.error
        assert "threads" in r.error.split("rolled back", 1)[1]
        # The state is as before the cell; the threads are gone (a fork keeps none).
        assert ok(repl, "s", "kept, ticker.is_alive()").value == "([1, 2], False)"
        # Recreated, they serve the cells after.
        ok(repl, "s", POOL + WORKER)
        assert ok(repl, "s", "requests.put('x')\nreplies.get(timeout=30)").value == "1"
        assert ok(repl, "s", "ex.submit(lambda: 5).result(timeout=30)").value == "5"
        # A second kill names only what the session had then.
        r = repl.run("s", "while True: pass", timeout=1)
        assert "ticker" in r.error and "rolled back" in r.error
        assert ok(repl, "s", "kept").value == "[1, 2]"


def test_a_killed_cell_names_a_thread_threading_does_not_list():
    # _thread.start_new_thread: no threading.Thread, no name, and gone with
    # the rollback all the same.
    with make(True) as repl:
        ok(repl, "s", "import _thread, threading\nstarted = threading.Event()\n"
                      "stop = threading.Event()\n"
                      "def wait():\n    started.set()\n    stop.wait()\n"
                      "_thread.start_new_thread(wait, ())\nstarted.wait()")
        r = repl.run("s", "while True: pass", timeout=1)
        assert r.exit_code == 124 and "rolled back" in r.error
        assert "a thread not started by threading" in r.error, r.error


def test_a_killed_cell_without_rollback_goes_back_to_the_checkpoint_and_names_its_threads():
    with make(False, checkpoint="sync") as repl:
        ok(repl, "s", WORKER + "kept = [1, 2]")
        r = repl.run("s", "kept.append(3)\nwhile True: pass", timeout=1)
        assert r.exit_code == 124
        assert "last checkpoint" in r.error and "ticker" in r.error, r.error
        assert ok(repl, "s", "kept").value == "[1, 2]"
        ok(repl, "s", WORKER)
        assert ok(repl, "s", "requests.put(1)\nreplies.get(timeout=30)").value == "1"


def test_a_session_without_threads_says_nothing_of_threads_when_killed():
    with make(True) as repl:
        ok(repl, "s", "x = 1")
        r = repl.run("s", "while True: pass", timeout=1)
        assert r.exit_code == 124 and "thread" not in r.error


@pytest.mark.parametrize("how", ["os._exit(3)", "import signal\nos.kill(os.getpid(), signal.SIGSEGV)"])
def test_a_crashed_runner_is_replaced_by_its_snapshot(how):
    with make(True) as repl:
        ok(repl, "s", "import os\nkept = 1")
        r = repl.run("s", "kept = 2\n" + how)
        assert not r.ok and r.exit_code == 1 and "rolled back" in r.error
        assert ("exited with status 3" if "_exit" in how else "SIGSEGV") in r.error, r.error
        assert ok(repl, "s", "kept").value == "1"
        # The promoted snapshot is the runner now: a thread started there lives on.
        ok(repl, "s", WORKER)
        assert ok(repl, "s", "requests.put(0)\nreplies.get(timeout=30)").value == "1"


@pytest.mark.parametrize("snapshots", ROLLBACK)
def test_every_session_process_ends_with_the_repl(snapshots):
    repl = make(snapshots)
    ok(repl, "s", POOL + WORKER)
    for _ in range(5):
        ok(repl, "s", "ex.submit(int).result(timeout=30)")
    repl.run("s", "while True: pass", timeout=1)
    ok(repl, "t", "y = 2")
    procs = descendants(os.getpid())
    assert procs, "the Repl runs its sessions in processes of its own"
    repl.close()
    left = [p for p in procs if alive(p)]
    assert left == [], f"still running after close: {left}"
