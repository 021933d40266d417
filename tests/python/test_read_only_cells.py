"""Read-only cells (embedded/read_only_cell.h, issue #22): a cell proven to
change nothing is neither checkpointed nor followed by a new rollback point,
and everything a user relies on stays exact: a crash after read-only cells
rolls back to the state before it, a restart sees the last state, a failed
save is made good by the next cell, and any cell that could change the state
(or ran while a thread could) is checkpointed as before.

The store counts saves: with checkpoint="sync" a save happens before the
Result returns, so the count after each cell is exact."""

from __future__ import annotations

import dolsot
import pytest
from counting_store import CountingStore
from dolsot.store import MemoryStore


def ok(repl, code, **kwargs):
    result = repl.run("s", code, **kwargs)
    assert result.ok, (code, result.error)
    return result


@pytest.fixture
def counted():
    store = CountingStore()
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint="sync")
    yield repl, store
    repl.close()


READ_ONLY = ["1 + 1", "x + 1", "print(x, len(name))", "[i * x for i in range(3)]", "name[1:]",
             "sorted((3, 1, 2))", "f'{x:03d}'", "len(box)", "box[-1]"]

NOT_READ_ONLY = [
    "y = 1",                        # binds
    "box.append(3)",                # an attribute: mutates in place
    "len(objs)",                    # reads a value that is not a builtin one
    "import math",                  # imports
    "def g():\n    return objs",    # defines (a binding cell: sync saves its frame)
    "g()",                          # calls code that reads what is not a builtin value
    "for _ in range(2): pass",      # a statement
]


def test_read_only_cells_write_no_checkpoint_and_the_others_do(counted):
    repl, store = counted
    ok(repl, "1 + 1")  # a new session's first cell: nothing durable yet, so saved
    assert store.saves == 1
    ok(repl, "x = 41; name = 'dolsot'; box = [1, 2]; objs = [object()]")
    assert store.saves == 2
    for code in READ_ONLY:
        ok(repl, code)
        assert store.saves == 2, f"{code!r} wrote a checkpoint"
    for code in NOT_READ_ONLY:
        before = store.saves
        ok(repl, code)
        assert store.saves == before + 1, f"{code!r} wrote no checkpoint"
    # A function whose body was proven when its def ran, called on plain
    # values: read-only.
    ok(repl, "def f(k):\n    return [x * k for _ in range(k)]")
    before = store.saves
    assert ok(repl, "f(2)").value == "[82, 82]"
    assert store.saves == before
    # A read-only cell that raised changed nothing either; one that is not
    # read-only is checkpointed.
    before = store.saves
    assert not repl.run("s", "x / 0").ok
    assert store.saves == before
    assert not repl.run("s", "len(objs) / 0").ok
    assert store.saves == before + 1
    # Variables bind names: not read-only.
    before = store.saves
    ok(repl, "x + 1", variables={"v": 1})
    assert store.saves == before + 1
    # A builtin the session rebound is not the interpreter's own.
    ok(repl, "import builtins; builtins.len = lambda value: 0")
    before = store.saves
    ok(repl, "len(name)")
    assert store.saves == before + 1


def test_a_running_thread_makes_every_cell_checkpointed(counted):
    repl, store = counted
    ok(repl, "x = 1")
    ok(repl, "import threading\nstop = threading.Event()\n"
             "t = threading.Thread(target=stop.wait, daemon=True)\nt.start()")
    before = store.saves
    ok(repl, "x + 1")  # the thread may have changed the state meanwhile
    assert store.saves == before + 1
    ok(repl, "stop.set(); t.join()")
    before = store.saves
    ok(repl, "x + 1")
    assert store.saves == before


def test_a_thread_threading_does_not_know_of_makes_every_cell_checkpointed(counted):
    # _thread.start_new_thread: a thread threading._active never lists, which
    # can change the state while a cell runs all the same.
    repl, store = counted
    ok(repl, "x = 1")
    ok(repl, "import _thread, threading\nstarted = threading.Event(); stop = threading.Event()\n"
             "def spin():\n    started.set()\n    stop.wait()\n    done.set()\n"
             "done = threading.Event()\n_thread.start_new_thread(spin, ())\nstarted.wait()")
    before = store.saves
    ok(repl, "x + 1")
    assert store.saves == before + 1
    # Once it is gone (its thread state goes a moment after its function
    # returns), cells are read-only again.
    ok(repl, "stop.set(); done.wait()")
    for _ in range(1000):
        before = store.saves
        ok(repl, "x + 1")
        if store.saves == before:
            break
    assert store.saves == before


def test_a_failed_save_is_made_good_by_the_next_cell_even_a_read_only_one(counted):
    repl, store = counted
    ok(repl, "x = 1")
    store.fail_next = 1
    result = ok(repl, "x = 2")
    assert result.save_error and "the disk is gone" in result.save_error, result.save_error
    before = store.saves
    ok(repl, "x + 1")  # read-only, but the store holds x == 1
    assert store.saves == before + 1
    restarted = dolsot.Repl(store=store, typecheck=False, checkpoint="sync")
    try:
        assert restarted.run("s", "x").value == "2"
    finally:
        restarted.close()


@pytest.mark.parametrize("checkpoint", ["async", "sync", "off"])
def test_a_crash_after_read_only_cells_rolls_back_exactly(checkpoint):
    repl = dolsot.Repl(store=MemoryStore(), typecheck=False, checkpoint=checkpoint)
    try:
        ok(repl, "x = 1; box = [1]; name = 'n'")
        for code in READ_ONLY[:3] + ["x", "x * 2"]:
            ok(repl, code)
        crashed = repl.run("s", "x = 99; box.append(99); import os; os._exit(3)")
        assert not crashed.ok and "rolled back" in crashed.error, crashed.error
        assert ok(repl, "(x, box)").value == "(1, [1])"
        ok(repl, "box.append(2)")
        ok(repl, "x + 1")
        ok(repl, "len(name) if x else x")
        ok(repl, "box[-1] + len(box)")
        crashed = repl.run("s", "box.clear(); import os; os._exit(3)")
        assert not crashed.ok and "rolled back" in crashed.error, crashed.error
        assert ok(repl, "(x, box)").value == "(1, [1, 2])"
        # Cells keep counting: a function defined now names its own cell.
        ok(repl, "def g():\n    return 1 / 0")
        failed = repl.run("s", "g()")
        assert not failed.ok and "<cell" in failed.error
    finally:
        repl.close()


@pytest.mark.parametrize("snapshots,checkpoint", [(True, "async"), (True, "sync"), (False, "sync")])
def test_a_read_only_cells_result_lists_the_sessions_names(snapshots, checkpoint):
    # A read-only cell's session process leaves its names out of the Result
    # once the host holds them (protocol::kNamesUnchanged); every Result
    # still lists them all, in the order they were bound, after whatever the
    # host's list came from: a cell, a binding cell, a killed cell, a restart.
    store = MemoryStore()

    def repl():
        return dolsot.Repl(store=store, typecheck=False, snapshots=snapshots, checkpoint=checkpoint)

    first = repl()
    try:
        names = [f"v{i}" for i in range(50)]
        assert ok(first, "; ".join(f"{n} = {i}" for i, n in enumerate(names))).held == names
        for code in ("1 + 1", "v3 * 2", "len((v1, v2))"):
            assert ok(first, code).held == names, code
        assert ok(first, "late = 7").held == names + ["late"]  # a binding cell
        names.append("late")
        assert ok(first, "late + v0").held == names
        failed = first.run("s", "v0 + 'text'")  # proven read-only, but raised
        assert not failed.ok and failed.held == names, failed.error
        assert ok(first, "v1 - 1").held == names
        killed = first.run("s", "gone = 1\nwhile True: pass", timeout=0.5)
        assert killed.exit_code == 124, killed.error
        if snapshots:  # rolled back (without: the next cell restores the checkpoint)
            assert killed.held == names
        assert ok(first, "v2 + late").held == names  # the runner is the snapshot now
        if not snapshots:  # a new process restored the last checkpoint
            assert ok(first, "gone = 2").held == names + ["gone"]
            assert ok(first, "del gone").held == names
        assert ok(first, "v4").held == names
    finally:
        first.close()
    again = repl()  # a restart: the host's list came from restoring
    try:
        assert ok(again, "v5 + 1").held == names
        assert ok(again, "v6").held == names
        assert ok(again, "fresh = 1").held == names + ["fresh"]
        assert ok(again, "fresh").held == names + ["fresh"]
    finally:
        again.close()


def test_a_restart_after_read_only_cells_sees_the_last_state():
    store = CountingStore()
    repl = dolsot.Repl(store=store, typecheck=False)  # async checkpoints
    ok(repl, "x = 5; box = [5]; name = 'n'")
    repl.sessions()  # lets the async checkpoint land
    saved = store.saves
    for code in READ_ONLY[:4]:
        ok(repl, code)
    repl.sessions()
    assert store.saves == saved  # no writer was forked for them
    repl.close()
    again = dolsot.Repl(store=store, typecheck=False)
    try:
        assert ok(again, "(x, box)").value == "(5, [5])"
    finally:
        again.close()


def test_the_fast_path_can_be_turned_off(monkeypatch):
    monkeypatch.setenv("DOLSOT_READ_ONLY_CELLS", "0")
    store = CountingStore()
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint="sync")
    try:
        ok(repl, "x = 1")
        before = store.saves
        ok(repl, "x + 1")
        assert store.saves == before + 1
    finally:
        repl.close()


def test_a_cell_calling_a_host_tool_is_read_only_only_when_plain_data_crosses():
    # The tool runs in the host, whatever the cell; what the session sees of
    # it is its reply. A plain one (its pickle names nothing) changes
    # nothing in the session; one that names a class may import or run code
    # there when it is read, so the cell is checkpointed.
    import datetime

    store = CountingStore()
    calls = []
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint="sync",
                       tools={"lookup": lambda value: calls.append(value) or 0,
                              "today": lambda: datetime.date(2026, 12, 7)})
    try:
        ok(repl, "name = 'ab'")
        before = store.saves
        assert ok(repl, "lookup(name)").value == "0"  # the host's tool ran
        assert calls == ["ab"]
        assert store.saves == before
        assert ok(repl, "today()").value == "datetime.date(2026, 12, 7)"
        assert store.saves == before + 1
        ok(repl, "abs(-1)")
        assert store.saves == before + 1
    finally:
        repl.close()


# Cells the token scan (embedded/plain_expressions.h) must not take for
# plain expressions: each changes the state in a way its bytes hide from a
# naive reading, and each must be checkpointed and rolled back as any cell.
HIDDEN_CHANGES = [
    "1 # a comment ended by a carriage return\rx = 7",  # CPython ends the comment at \r
    "x\\\n= 7",                                         # a continued line: an assignment
    "(box := [7]) and 1",                               # := inside brackets
    "1..__class__ and box.append(7)",                   # a float literal, then attributes
    "box[0:1] == [1] and box.append(7)",                # a slice, then an attribute
]


@pytest.mark.parametrize("code", HIDDEN_CHANGES)
def test_cells_that_hide_a_change_from_the_scan_are_checkpointed_and_kept(counted, code):
    repl, store = counted
    ok(repl, "x = 1; box = [1]")
    before = store.saves
    ok(repl, code)
    assert store.saves == before + 1, f"{code!r} wrote no checkpoint"
    state = ok(repl, "(x, box)").value
    assert state != "(1, [1])", f"{code!r} changed nothing?"
    crashed = repl.run("s", "import os; os._exit(3)")
    assert not crashed.ok and "rolled back" in crashed.error, crashed.error
    assert ok(repl, "(x, box)").value == state, f"{code!r}: the change was lost"


def test_plain_expression_cells_with_names_comments_and_several_lines_are_read_only(counted):
    repl, store = counted
    ok(repl, "x = 3; t = (1, 2)")
    before = store.saves
    for code in ["x * 2  # double it", "len(t), max(t)\nx ** 2; -x", "[x, *t][1:]", "abs(-x) in t"]:
        ok(repl, code)
    assert store.saves == before
