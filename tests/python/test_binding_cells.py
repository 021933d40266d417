"""Binding cells (embedded/read_only_cell.h, issue #22): a cell proven to
change only the names it binds, to plain values (`x += 1`, `y = [x, name]`),
forks no rollback point and writes no checkpoint at once. The host keeps
those values for the snapshot from before it (replayed if a later cell is
killed), and their checkpoint waits up to `checkpoint_delay` so the cells in
between share it: the next cell after the delay takes it, or a timer does
while the session is idle, and close() does before the session goes.

What is asserted: which cells save (a counting store), that a rollback after
binding cells is exact, that the timer writes the deferred checkpoint while
the session is idle (a host killed after that loses nothing), that a close
and a restart see the last state, and that what the proof cannot vouch for
(aliasing, a running thread, sync checkpoints) takes the general path."""

from __future__ import annotations

import os
import textwrap

import dolsot
import pytest
from counting_store import CountingStore
from dolsot.store import FileStore
from process_tree import sigkill_once_it_says


def ok(repl, code, **kwargs):
    result = repl.run("s", code, **kwargs)
    assert result.ok, (code, result.error)
    return result


def settled_saves(repl, store):
    """The saves once every checkpoint on its way has landed."""
    repl.sessions()  # flushes the saver
    return store.saves


@pytest.fixture
def lazy():
    """A Repl whose binding cells' checkpoints wait an hour: until close."""
    store = CountingStore()
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint_delay=3600)
    ok(repl, "x = 0; name = 'dolsot'; box = [1, 2]")
    settled_saves(repl, store)
    yield repl, store
    repl.close()


BINDING = ["x += 1", "y = x * 2", "y = [x, name]", "z = {'k': x, 'v': (1, 2.5)}",
           "a = b = (x, 'b')", "s = {1, 2}\nt = len(name)", "w = sorted(box)", "u = None",
           # In place, on a list the namespace alone holds.
           "box.append(x)", "box[0] = 'first'", "box.sort(reverse=True)", "box[1] += 5"]

GENERAL = [
    "box += [3]",            # a list changed in place
    "alias = box",           # a second name for one list: a copy would not be the same list
    "t = (box,)",            # a list held by a new tuple too
    "x = 1; x += 1",         # assigned and augmented in one cell
    "y, z = 1, 2",           # not a name target
    "r = range(3)",          # a value marshal does not write
    "y = box\nbox.append(3)",  # changed in place while a second name holds it
    "box.append(box)",       # holds itself
    "box.count(1)",          # not a method that changes a container: the fast path stays shut
    "import math",
]


@pytest.mark.parametrize("code", BINDING)
def test_a_binding_cell_writes_no_checkpoint_until_the_delay(lazy, code):
    repl, store = lazy
    before = store.saves
    ok(repl, code)
    ok(repl, "x + 1")
    assert settled_saves(repl, store) == before, code


@pytest.mark.parametrize("code", GENERAL)
def test_other_cells_are_checkpointed_at_once(lazy, code):
    repl, store = lazy
    before = store.saves
    ok(repl, code)
    assert settled_saves(repl, store) == before + 1, code


def test_a_kill_after_binding_cells_rolls_back_to_exactly_the_state_before_it(lazy):
    repl, _ = lazy
    ok(repl, "x += 1")
    ok(repl, "y = [x, name]")
    ok(repl, "x += 10")
    ok(repl, "box.append(x)")
    killed = repl.run("s", "x = 99\nbox.clear()\nwhile True: pass", timeout=0.5)
    assert killed.exit_code == 124 and "rolled back" in killed.error
    assert ok(repl, "x, y, name, box").value == "(11, [1, 'dolsot'], 'dolsot', [1, 2, 11])"
    # The restored list is the session's own: it changes in place as before.
    ok(repl, "y.append(3)")
    assert ok(repl, "y").value == "[1, 'dolsot', 3]"
    # Numbering goes on past the binding cells: a function defined now
    # names its own cell in a traceback, not an earlier one's.
    ok(repl, "def f():\n    raise ValueError('here')")
    failed = repl.run("s", "f()")
    assert "ValueError: here" in failed.error
    cells = [int(part.split(">")[0]) for part in failed.error.split("<cell ")[1:]]
    assert cells and min(cells) >= 8, failed.error


def test_a_crash_in_the_cell_after_binding_cells_loses_none_of_them(lazy):
    repl, _ = lazy
    for _ in range(3):
        ok(repl, "x += 1")
    crashed = repl.run("s", "import os; os._exit(3)")
    assert not crashed.ok and "rolled back" in crashed.error
    assert ok(repl, "x").value == "3"


def test_close_writes_what_binding_cells_changed_and_a_restart_sees_it(tmp_path):
    repl = dolsot.Repl(store=FileStore(str(tmp_path)), typecheck=False, checkpoint_delay=3600)
    ok(repl, "x = 0")
    for _ in range(5):
        ok(repl, "x += 1")
    ok(repl, "y = (x, 'last')")
    repl.close()
    again = dolsot.Repl(store=FileStore(str(tmp_path)), typecheck=False)
    try:
        assert ok(again, "x, y").value == "(5, (5, 'last'))"
    finally:
        again.close()


def test_the_timer_writes_the_checkpoint_of_an_idle_session():
    store = CountingStore()
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint_delay=0.2)
    try:
        ok(repl, "x = 0")
        settled_saves(repl, store)
        store.saved.clear()
        before = store.saves
        ok(repl, "x += 1")
        ok(repl, "x += 1")
        assert store.saved.wait(30), "no checkpoint while the session was idle"
        assert store.saves == before + 1  # the two cells shared it
        fresh = dolsot.Repl(store=store.inner, typecheck=False)
        try:
            assert ok(fresh, "x").value == "2"
        finally:
            fresh.close()
    finally:
        repl.close()


def test_a_host_killed_once_the_delay_has_passed_loses_nothing(tmp_path):
    # The host runs binding cells, waits until the timer's checkpoint is in
    # the store, says so, and is killed with SIGKILL: no close, no flush.
    host = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        import dolsot
        from counting_store import CountingStore
        from dolsot.store import FileStore

        store = CountingStore(FileStore({str(tmp_path)!r}))
        repl = dolsot.Repl(store=store, typecheck=False, checkpoint_delay=0.2)
        assert repl.run("s", "x = 0").ok
        repl.sessions()  # its checkpoint has landed
        store.saved.clear()
        for _ in range(4):
            assert repl.run("s", "x += 1").ok
        assert store.saved.wait(30)
        print("durable", flush=True)
        sys.stdin.read()
    """)
    sigkill_once_it_says(host)
    again = dolsot.Repl(store=FileStore(str(tmp_path)), typecheck=False)
    try:
        assert ok(again, "x").value == "4"
    finally:
        again.close()


def test_a_running_thread_takes_the_general_path(lazy):
    repl, store = lazy
    ok(repl, "import threading\nstop = threading.Event()\n"
             "t = threading.Thread(target=stop.wait, daemon=True)\nt.start()")
    before = settled_saves(repl, store)
    ok(repl, "x += 1")  # a thread of the session's is alive: it could change anything
    assert settled_saves(repl, store) == before + 1
    ok(repl, "stop.set(); t.join()")


def test_sync_checkpoints_save_every_binding_cell_before_it_returns():
    store = CountingStore()
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint="sync")
    try:
        ok(repl, "x = 0")
        before = store.saves
        ok(repl, "x += 1")
        assert store.saves == before + 1
    finally:
        repl.close()


def test_with_the_fast_paths_off_every_cell_is_checkpointed(monkeypatch):
    monkeypatch.setenv("DOLSOT_READ_ONLY_CELLS", "0")
    store = CountingStore()
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint_delay=3600)
    try:
        ok(repl, "x = 0")
        before = settled_saves(repl, store)
        ok(repl, "x += 1")
        assert settled_saves(repl, store) == before + 1
    finally:
        repl.close()


@pytest.mark.parametrize("value", [-1, 3601, float("nan")])
def test_a_bad_delay_is_refused_naming_it(value):
    with pytest.raises(dolsot.ConfigError, match="checkpoint_delay"):
        dolsot.Repl(checkpoint_delay=value)


def test_a_bad_delay_variable_is_refused_naming_it(monkeypatch):
    monkeypatch.setenv("DOLSOT_CHECKPOINT_DELAY", "soon")
    with pytest.raises(dolsot.ConfigError, match="DOLSOT_CHECKPOINT_DELAY"):
        dolsot.Repl()


def test_a_name_rebound_to_a_plain_value_is_no_longer_dropped_after_a_rollback(lazy):
    repl, _ = lazy
    held = ok(repl, "import threading\nlock = threading.Lock()")
    assert "lock" in held.dropped
    ok(repl, "lock = 1")  # a binding cell: plain now
    assert "lock" not in ok(repl, "x + 1").dropped
    killed = repl.run("s", "while True: pass", timeout=0.5)
    assert killed.exit_code == 124
    # The promoted snapshot replayed `lock = 1`; a read-only cell reports the
    # verdict on what the session holds now, not on the lock.
    after = ok(repl, "lock + 1")
    assert after.value == "2" and "lock" not in after.dropped
