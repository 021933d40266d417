"""Delta checkpoints (#22): a cell on the general path (an import, a
definition, a call of the session's own code, a change in place) gets a
checkpoint of the whole state, but against the base blob the store holds:
the names whose pickles are the base's (by digest) are named, not written,
and the rest goes to the store as a delta frame appended to that base
(docs/checkpoint-format.md "Delta frames"). So a session holding a large
value that cells leave alone writes kilobytes per cell, not the value.

What is asserted, in the three configurations a Repl runs in (the default,
the CLI's sync checkpoints without rollback, async without rollback):
general-path cells over a 2 MB value append delta frames and save no new
base, the stored bytes grow by what changed, and a new host restores the
exact state (names deleted, rebound, changed in place through a function,
modules, functions, the cell numbering); a change to the large value, or a
session too small for deltas to pay, gets a whole checkpoint; a host killed
once a delta landed loses nothing; an append that fails is replaced by a
whole checkpoint (before the Result returns, with sync checkpoints); a
damaged delta frame is reported and the state is the base's; the gate's
memory of the classes a cell sealed travels in the delta."""

from __future__ import annotations

import copy
import os
import textwrap

import dolsot
import pytest
from counting_store import JournalingStore
from dolsot import Repl
from dolsot.sandbox import AstGate
from dolsot.store import FileStore, MemoryStore
from process_tree import sigkill_once_it_says
from test_checkpoint_journal import ok, settle
from test_gate_memory import DEFINE, POLICY, USE, USED, refused, undo_deepcopy

DELTA_MAGIC = b"DJND"
BIG = 2_000_000

CONFIGS = {
    "default": {},
    "cli": {"checkpoint": "sync", "snapshots": False},
    "async-no-rollback": {"snapshots": False},
}


def restored(store, code):
    """`code`'s Result in the session as a new host restores it from `store`."""
    fresh = dolsot.Repl(store=store, typecheck=False)
    try:
        return fresh.run("s", code)
    finally:
        fresh.close()


def deltas_in(store, sid="s"):
    return store.load(sid).count(DELTA_MAGIC)


@pytest.fixture(params=list(CONFIGS), ids=list(CONFIGS))
def large_session(request):
    """A Repl (one of CONFIGS) whose session holds a 2 MB value and a few
    small ones, its base saved in a store that appends."""
    store = JournalingStore()
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint_delay=3600,
                       **CONFIGS[request.param])
    # `import os`: the general path, so the base is saved at once.
    ok(repl, f"import os\nblob = b'x' * {BIG}\nrows = [1, 2]\ngone = 'soon'\nn = 0")
    settle(repl)
    yield repl, store
    repl.close()


def test_general_path_cells_append_deltas_that_restore_exactly(large_session):
    repl, store = large_session
    saves = store.saves
    base = store.inner.load("s")
    cells = [
        "import math",
        # A module as a default: neither the def nor a call of it is a
        # binding cell (embedded/read_only_cell.h).
        "def grow(k, _m=math):\n    rows.append(k)\n    return len(rows)",
        "grow(3)",                      # a call of the session's own code, in place
        "del gone",
        "class Point:\n    def __init__(self, x):\n        self.x = x",
        "p = Point(math.floor(2.5))",
        "n = grow(n + 10)",
    ]
    for code in cells:
        ok(repl, code)
        settle(repl)
    assert store.saves == saves, "a general-path cell wrote a whole checkpoint"
    stored = store.inner.load("s")
    assert stored.startswith(base)
    assert stored.count(DELTA_MAGIC) == len(cells)
    # Each delta holds what is not the base's: kilobytes, never the 2 MB.
    assert len(stored) - len(base) < 64 * 1024, len(stored) - len(base)
    expected = "(2000000, [1, 2, 3, 10], 4, 2, False, 3.14)"
    check = "(len(blob), rows, n, p.x, 'gone' in globals(), round(math.pi, 2))"
    assert ok(repl, check).value == expected
    result = restored(store.inner, check)
    assert result.ok and not result.error, result.error
    assert result.value == expected
    # The numbering goes on after the restored cells: no name is reused.
    failed = restored(store.inner, "def f():\n    raise ValueError('here')\nf()")
    numbers = [int(part.split(">")[0]) for part in failed.error.split("<cell ")[1:]]
    assert numbers and min(numbers) > len(cells) + 1, failed.error


def test_deltas_go_on_after_a_rollback_and_a_branch(large_session):
    # A killed cell promotes the snapshot, a process that forked with older
    # digests (or none): the host tells it the base again, and its deltas
    # restore exactly. A branch's first checkpoint is whole (its store holds
    # nothing yet); its own deltas follow.
    repl, store = large_session
    # The first cell to hear of the base is killed: the snapshot promoted
    # forked before it, without the digests.
    saves = store.saves
    killed = repl.run("s", "rows.append(0)\nwhile True:\n    pass", timeout=1)
    assert not killed.ok
    # A builtin function as a default: no binding cell (read_only_cell.h).
    ok(repl, "def bump(_len=len):\n    rows.append(_len(rows))\nbump()")
    settle(repl)
    assert store.saves == saves  # told the base again: a delta
    ok(repl, "bump()")
    settle(repl)
    ok(repl, "bump()")
    settle(repl)
    assert store.saves == saves  # a delta, not a whole checkpoint
    assert ok(repl, "rows").value == "[1, 2, 2, 3, 4]"
    repl.branch("s", "t")
    settle(repl)
    assert store.saves == saves + 1  # the branch's whole checkpoint
    ok(repl, "bump()", sid="t")
    settle(repl)
    assert store.saves == saves + 1
    assert deltas_in(store.inner, "t") == 1
    assert restored(store.inner, "rows, len(blob)").value == "([1, 2, 2, 3, 4], 2000000)"
    fresh = dolsot.Repl(store=store.inner, typecheck=False)
    try:
        assert fresh.run("t", "rows").value == "[1, 2, 2, 3, 4, 5]"
    finally:
        fresh.close()


def test_a_change_to_the_large_value_writes_a_whole_checkpoint(large_session):
    repl, store = large_session
    ok(repl, "import math")
    settle(repl)
    saves, appends = store.saves, store.appends
    # Most of the state changed: a delta would not pay.
    ok(repl, f"import math\nblob = b'y' * {BIG}")
    settle(repl)
    assert store.saves == saves + 1 and store.appends == appends
    assert deltas_in(store.inner) == 0  # a new base, no journal yet
    ok(repl, "import json")
    settle(repl)
    assert deltas_in(store.inner) == 1  # deltas against the new base
    assert restored(store.inner, "blob[:1], len(blob), json.dumps(1)").value == \
        "(b'y', 2000000, '1')"


def test_a_small_session_writes_whole_checkpoints():
    store = JournalingStore()
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint_delay=3600)
    try:
        ok(repl, "x = 'small'")
        settle(repl)
        saves = store.saves
        ok(repl, "import math")
        settle(repl)
        assert store.saves == saves + 1 and store.appends == 0
    finally:
        repl.close()
    assert restored(store.inner, "x, math.pi > 3").value == "('small', True)"


def test_a_host_killed_after_a_delta_landed_loses_nothing(tmp_path):
    # The host runs general-path cells over 2 MB of state, waits until their
    # deltas are in the FileStore, says so, and is killed with SIGKILL.
    host = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        import dolsot
        from counting_store import JournalingStore
        from dolsot.store import FileStore

        store = JournalingStore(FileStore({str(tmp_path)!r}))
        repl = dolsot.Repl(store=store, typecheck=False)
        assert repl.run("s", "import os; blob = b'x' * {BIG}; box = []").ok
        repl.sessions()
        for i in range(3):
            assert repl.run("s", "def add(v, _os=os):\\n    box.append(v)\\nadd(len(box))").ok
            repl.sessions()
        assert store.saves == 1 and store.appends == 3, (store.saves, store.appends)
        print("durable", flush=True)
        sys.stdin.read()
    """)
    sigkill_once_it_says(host)
    assert deltas_in(FileStore(str(tmp_path))) == 3
    result = restored(FileStore(str(tmp_path)), "box, len(blob), add.__name__")
    assert result.value == "([0, 1, 2], 2000000, 'add')" and not result.error


@pytest.mark.parametrize("config", ["default", "cli"])
def test_a_delta_whose_append_fails_is_replaced_by_a_whole_checkpoint(config):
    # Sync: before the Result returns. Async, the session idle: by the timer,
    # once the checkpoint delay has passed.
    store = JournalingStore()
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint_delay=0.2, **CONFIGS[config])
    try:
        ok(repl, f"import os\nblob = b'x' * {BIG}\nrows = []")
        settle(repl)
        saves = store.saves
        store.saved.clear()
        store.fail_next_append = 1  # half the frame lands, then it raises
        result = ok(repl, "import math\nrows.append(math.floor(1.5))")
        if config == "cli":
            # Durable before the Result returns, and nothing to report.
            assert store.saves == saves + 1
            assert result.save_error is None and not result.error
        else:
            assert store.saved.wait(30), "no whole checkpoint followed the failed append"
            assert store.saves == saves + 1
        assert store.appends == 0
        assert deltas_in(store.inner) == 0  # the torn frame went with the old base
        ok(repl, "import json")
        settle(repl)
        assert store.appends == 1  # deltas again, against the new base
    finally:
        repl.close()
    result = restored(store.inner, "rows, math.pi > 3, json.dumps(rows), len(blob)")
    assert result.value == "([1], True, '[1]', 2000000)" and not result.error


def test_the_next_cell_covers_a_delta_the_store_could_not_take():
    store = JournalingStore()
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint_delay=3600)
    try:
        ok(repl, f"import os\nblob = b'x' * {BIG}\nrows = []")
        settle(repl)
        saves = store.saves
        store.fail_next_append = 1
        ok(repl, "import json\nrows.append(len(rows))")  # the general path: a delta
        settle(repl)
        assert (store.saves, store.appends) == (saves, 0)  # owed, not written yet
        # A read-only cell writes what is owed: whole, since the store's
        # journal after the torn append takes no more frames.
        assert ok(repl, "len(rows)").value == "1"
        settle(repl)
        assert (store.saves, store.appends) == (saves + 1, 0)
        ok(repl, "import sys\nrows.append(len(rows))")
        settle(repl)
        assert (store.saves, store.appends) == (saves + 1, 1)
    finally:
        repl.close()
    assert restored(store.inner, "rows, len(blob)").value == "([0, 1], 2000000)"


def test_a_damaged_delta_frame_is_reported_and_the_base_stands():
    store = JournalingStore()
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint="sync")
    try:
        ok(repl, f"import os\nblob = b'x' * {BIG}\nx = 1")
        ok(repl, "import math\nx = 2")
    finally:
        repl.close()
    stored = bytearray(store.inner.load("s"))
    at = stored.rindex(DELTA_MAGIC)
    stored[at + 40] ^= 0x01
    store.inner.save("s", bytes(stored))
    fresh = dolsot.Repl(store=store, typecheck=False, checkpoint="sync")
    try:
        first = fresh.run("s", "x, 'math' in globals(), len(blob)")
        assert first.ok and first.value == "(1, False, 2000000)"
        assert "journal frame 1" in first.error and "damaged" in first.error, first.error
        assert "lost" in first.error
        # That cell wrote a whole checkpoint over it.
        assert deltas_in(store.inner) == 0
        assert ok(fresh, "x").value == "1"
    finally:
        fresh.close()


def test_the_gate_memory_of_a_class_sealed_after_the_base_travels_in_the_delta():
    # A class whose plain methods read self._x is sealed (docs/gate.md): a
    # later cell may not call them with a host object. Defined after the
    # base, a new host knows it only from the delta frame's gate memory.
    store = MemoryStore()
    with Repl(store=store, gate=AstGate(POLICY), typecheck=False, checkpoint="sync") as repl:
        ok(repl, f"import math\nblob = b'x' * {BIG}")
        ok(repl, DEFINE)
        assert deltas_in(store) == 1
    try:
        with Repl(store=store, gate=AstGate(POLICY), typecheck=False, checkpoint="sync") as fresh:
            assert refused(fresh.run("s", "import copy\nA.pwn(copy)\n"))
            used = fresh.run("s", USE)
            assert used.ok and used.stdout == USED, used.error
    finally:
        undo_deepcopy()
    assert copy.deepcopy(1) == 1


def test_a_file_store_session_survives_many_deltas_and_reopens(tmp_path):
    repl = dolsot.Repl(store=FileStore(str(tmp_path)), typecheck=False, checkpoint="sync",
                       snapshots=False)
    try:
        ok(repl, f"import os\nblob = b'x' * {BIG}\ntotal = 0")
        size = os.path.getsize(tmp_path / "s.session")
        for i in range(20):
            ok(repl, f"def step():\n    return {i}\ntotal += step()")
        grown = os.path.getsize(tmp_path / "s.session") - size
        assert 0 < grown < 200 * 1024, grown
    finally:
        repl.close()
    assert restored(FileStore(str(tmp_path)), "total, step(), len(blob)").value == \
        "(190, 19, 2000000)"
