"""The checkpoint journal (backend_subprocess/checkpoint_journal.h, #22): once
the checkpoint delay has passed, what binding cells changed goes to the
store as a small frame appended to the stored checkpoint (a store with
``append``), not as a whole new checkpoint, so durability costs what the
cells changed, not what the session holds.

What is asserted: frames and not whole checkpoints follow binding cells
(a counting store), the stored bytes grow by a frame and keep the base, a
restore from base and frames is exact (values, in-place changes, cell
numbering), a host killed after a frame landed loses nothing, a torn or
foreign frame is reported and the next cell writes a whole checkpoint over
it, a store that cannot append (or whose append fails) gets whole
checkpoints and loses nothing, and the delay's edges: 0, and the next cell
after it."""

from __future__ import annotations

import os
import textwrap
import time

import dolsot
import pytest
from counting_store import CountingStore, JournalingStore
from dolsot.store import FileStore, MemoryStore
from process_tree import sigkill_once_it_says

FRAME_MAGIC = b"DJNL"
DELTA_MAGIC = b"DJND"


def ok(repl, code, sid="s", **kwargs):
    result = repl.run(sid, code, **kwargs)
    assert result.ok, (code, result.error)
    return result


def settle(repl):
    repl.sessions()  # every checkpoint on its way has landed


def reopened(store):
    return dolsot.Repl(store=store, typecheck=False)


def restored(store, code):
    """`code`'s Result in the session as a new host restores it from `store`."""
    fresh = reopened(store)
    try:
        return ok(fresh, code)
    finally:
        fresh.close()


@pytest.fixture
def journaled():
    """A session holding 2 MB, its checkpoint in a store that appends; the
    binding cells' delay is short."""
    store = JournalingStore()
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint_delay=0.2)
    ok(repl, "blob = b'x' * 2_000_000\nx = 0\nname = 'dolsot'\nbox = [1, 2]\ncounts = {}")
    settle(repl)
    store.saved.clear()
    yield repl, store
    repl.close()


def test_binding_cells_after_the_delay_append_a_frame_not_a_checkpoint(journaled):
    repl, store = journaled
    base = store.inner.load("s")
    saves = store.saves
    for _ in range(3):
        ok(repl, "x += 1")
    assert store.appended.wait(30), "no frame while the session was idle"
    assert (store.saves, store.appends) == (saves, 1)  # the three cells share it
    stored = store.inner.load("s")
    assert stored.startswith(base)
    assert 0 < len(stored) - len(base) < 200  # the frame: x, not 2 MB
    assert stored[len(base):len(base) + 4] == FRAME_MAGIC
    assert restored(store.inner, "x, len(blob), name").value == "(3, 2000000, 'dolsot')"


def test_a_restore_from_base_and_frames_is_exact(journaled):
    repl, store = journaled
    cells = ["x += 1", "box.append(x)", "counts['a'] = 1", "counts['a'] += 2",
             "s = 'héllo ✓'", "t = (1, 2.5, None, b'\\x00\\xff', {3, 4}, 1j)",
             "box[0] = 'first'", "big = 10 ** 40", "x += 1", "box.sort(key=str)"]
    for code in cells:
        ok(repl, code)
        if code == "counts['a'] += 2":
            assert store.appended.wait(30)  # a frame in the middle, then more cells
    expected = ok(repl, "x, box, counts, s, t, big").value
    saves = store.saves
    repl.close()
    assert store.saves == saves and store.appends >= 2  # close appended the rest
    fresh = reopened(store.inner)
    try:
        assert ok(fresh, "x, box, counts, s, t, big").value == expected
        # The list restored is a plain list of the session's: it changes in place.
        ok(fresh, "box.append('more')")
        assert ok(fresh, "box[-1]").value == "'more'"
        # Numbering goes on after the journal's cells: a function defined now
        # names its own cell in a traceback.
        ok(fresh, "def f():\n    raise ValueError('here')")
        failed = fresh.run("s", "f()")
        numbers = [int(part.split(">")[0]) for part in failed.error.split("<cell ")[1:]]
        assert numbers and min(numbers) > len(cells) + 1, failed.error
    finally:
        fresh.close()


def test_a_general_cell_after_frames_writes_a_delta_frame_of_the_whole_state(journaled):
    # It may change anything, so its checkpoint holds the whole state, but
    # against the 2 MB base: what is not the base's (test_delta_checkpoints).
    repl, store = journaled
    ok(repl, "x += 1")
    assert store.appended.wait(30)
    saves, appends = store.saves, store.appends
    ok(repl, "import math")
    settle(repl)
    assert (store.saves, store.appends) == (saves, appends + 1)
    stored = store.inner.load("s")
    assert stored.rindex(DELTA_MAGIC) > stored.rindex(FRAME_MAGIC)
    ok(repl, "x += 1")
    store.appended.clear()
    assert store.appended.wait(30)  # binding frames go on after it
    assert restored(store.inner, "x, math.pi > 3, len(blob)").value == "(2, True, 2000000)"


def test_a_host_killed_after_a_frame_landed_loses_nothing(tmp_path):
    # The host runs binding cells over 2 MB of state, waits until their
    # frame is in the FileStore, says so, and is killed with SIGKILL.
    host = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
        import dolsot
        from counting_store import JournalingStore
        from dolsot.store import FileStore

        store = JournalingStore(FileStore({str(tmp_path)!r}))
        repl = dolsot.Repl(store=store, typecheck=False, checkpoint_delay=0.2)
        assert repl.run("s", "blob = b'x' * 2_000_000; x = 0; box = []").ok
        repl.sessions()
        for i in range(4):
            assert repl.run("s", "x += 1").ok
            assert repl.run("s", "box.append(x)").ok
        assert store.appended.wait(30)
        assert store.saves == 1, store.saves
        print("durable", flush=True)
        sys.stdin.read()
    """)
    sigkill_once_it_says(host)
    assert restored(FileStore(str(tmp_path)), "x, box, len(blob)").value == \
        "(4, [1, 2, 3, 4], 2000000)"


def frames_of(store, sid="s"):
    return store.load(sid).count(FRAME_MAGIC)


def test_a_torn_last_frame_is_reported_and_a_whole_checkpoint_replaces_it(journaled):
    repl, store = journaled
    ok(repl, "x += 1")
    assert store.appended.wait(30)
    store.appended.clear()
    ok(repl, "x += 1\ny = 'second'")
    assert store.appended.wait(30)
    repl.close()
    stored = store.inner.load("s")
    store.inner.save("s", stored[:-3])  # the second frame cut short, as by a crash
    fresh = dolsot.Repl(store=store, typecheck=False, checkpoint_delay=0.2)
    try:
        first = ok(fresh, "x, 'y' in globals()")
        assert first.value == "(1, False)"  # the first frame's state, not the second's
        assert "journal frame 2" in first.error and "cut short" in first.error
        assert "lost" in first.error
        settle(fresh)
        # That cell wrote a whole checkpoint: no torn bytes left to append after.
        assert frames_of(store.inner) == 0
        assert store.inner.load("s").startswith(b"DOLSOTNS")
        ok(fresh, "x += 1")
        store.appended.clear()
        assert store.appended.wait(30)
    finally:
        fresh.close()
    result = restored(store.inner, "x")
    assert result.value == "2" and not result.error


def test_a_frame_of_another_checkpoint_is_never_applied(journaled):
    repl, store = journaled
    ok(repl, "x += 1")
    assert store.appended.wait(30)
    repl.close()
    stored = store.inner.load("s")
    frame = stored[stored.index(FRAME_MAGIC):]
    # Another host saved the session meanwhile (another base), and the
    # frame lands after it.
    other = dolsot.Repl(store=store.inner, typecheck=False, checkpoint="sync")
    try:
        ok(other, "x = 'theirs'", sid="t")
    finally:
        other.close()
    store.inner.save("s", store.inner.load("t") + frame)
    result = restored(store.inner, "x")
    assert result.value == "'theirs'"
    assert "journal frame 1" in result.error and "another checkpoint" in result.error


def test_a_store_that_cannot_append_gets_whole_checkpoints():
    store = CountingStore()  # load, save, delete, list: no append
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint_delay=0.2)
    try:
        ok(repl, "x = 0")
        settle(repl)
        store.saved.clear()
        saves = store.saves
        ok(repl, "x += 1")
        assert store.saved.wait(30)
        assert store.saves == saves + 1
        assert frames_of(store.inner) == 0
    finally:
        repl.close()
    assert restored(store.inner, "x").value == "1"


def test_a_failed_append_falls_back_to_a_whole_checkpoint_and_loses_nothing(journaled):
    repl, store = journaled
    store.fail_next_append = 1  # writes half a frame, then raises
    saves = store.saves
    ok(repl, "x += 1")
    assert store.saved.wait(30)  # the whole checkpoint that replaced it
    assert store.saves == saves + 1 and store.appends == 0
    assert frames_of(store.inner) == 0  # the half frame went with the old blob
    result = ok(repl, "x")
    assert result.value == "1" and not result.error  # saved: nothing to report
    store.appended.clear()
    ok(repl, "x += 1")
    assert store.appended.wait(30)  # and frames again after the new base
    assert restored(store.inner, "x").value == "2"


def test_with_no_delay_each_idle_moment_gets_its_frame():
    store = JournalingStore()
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint_delay=0)
    try:
        ok(repl, "x = 0")
        settle(repl)
        for expected in (1, 2):
            store.appended.clear()
            ok(repl, "x += 1")
            assert store.appended.wait(30)
            assert store.appends >= expected
        assert store.saves == 1
    finally:
        repl.close()
    assert restored(store.inner, "x").value == "2"


def test_the_next_cell_after_the_delay_does_not_wait_for_a_whole_checkpoint(journaled):
    # The delay passes while cells keep coming: the journal takes their
    # values (the timer, between two cells), never a whole checkpoint.
    repl, store = journaled
    saves = store.saves
    give_up = time.monotonic() + 60
    while not store.appended.is_set() and time.monotonic() < give_up:
        ok(repl, "x += 1")
    assert store.appended.is_set()
    count = int(ok(repl, "x").value)
    assert store.saves == saves
    repl.close()
    assert restored(store.inner, "x").value == str(count)


def test_the_file_store_keeps_frames_in_the_session_file(tmp_path):
    repl = dolsot.Repl(store=FileStore(str(tmp_path)), typecheck=False, checkpoint_delay=3600)
    try:
        ok(repl, "x = 0")
        settle(repl)
        size = os.path.getsize(tmp_path / "s.session")
        ok(repl, "x += 1")
    finally:
        repl.close()  # appends the owed frame
    assert 0 < os.path.getsize(tmp_path / "s.session") - size < 200
    assert frames_of(FileStore(str(tmp_path))) == 1


def test_the_bound_stores_append_and_refuse_what_they_cannot(tmp_path):
    for store in (MemoryStore(), FileStore(str(tmp_path))):
        with pytest.raises(dolsot.DolsotError):
            store.append("s", b"x")  # no session to append to
        store.save("s", b"base")
        store.append("s", b"+1")
        assert store.load("s") == b"base+1"
        with pytest.raises(dolsot.DolsotError):
            store.append("../s", b"x")


def test_binding_cells_after_a_damaged_base_write_a_whole_checkpoint():
    # The session starts empty from a damaged checkpoint: a frame over that
    # base would be lost with it at the next restore.
    store = JournalingStore()
    repl = reopened(store)
    try:
        ok(repl, "x = 1\nkeep = 'k'")
    finally:
        repl.close()
    blob = bytearray(store.inner.load("s"))
    blob[len(blob) // 2] ^= 0xFF
    store.inner.save("s", bytes(blob))
    damaged = dolsot.Repl(store=store, typecheck=False, checkpoint_delay=3600)
    try:
        first = damaged.run("s", "x = 5")
        assert first.ok and "could not be restored" in first.error
    finally:
        damaged.close()
    result = restored(store.inner, "x")
    assert result.value == "5" and not result.error


def test_an_evicted_session_goes_with_a_frame_not_a_whole_checkpoint():
    store = JournalingStore()
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint_delay=3600, max_live_sessions=1)
    try:
        ok(repl, "blob = b'x' * 2_000_000; x = 0", sid="a")
        settle(repl)
        saves = store.saves
        ok(repl, "x += 1", sid="a")
        ok(repl, "y = 1", sid="b")  # a is evicted: only its frame is written
        settle(repl)
        assert store.appends == 1
        assert store.saves == saves + 1  # b's own checkpoint
        assert ok(repl, "x, len(blob)", sid="a").value == "(1, 2000000)"  # restored
    finally:
        repl.close()


@pytest.mark.parametrize("checkpoint", ["async", "sync"])
def test_an_evicted_session_whose_state_is_stored_writes_nothing(checkpoint):
    store = JournalingStore()
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint=checkpoint,
                       checkpoint_delay=3600, max_live_sessions=1)
    try:
        ok(repl, "import os; blob = b'x' * 2_000_000; x = 0", sid="a")
        ok(repl, "len(blob) + x", sid="a")  # read-only: the stored state stands
        settle(repl)
        saves, appends = store.saves, store.appends
        ok(repl, "import os; y = 1", sid="b")  # a is evicted: nothing to write
        settle(repl)
        assert store.appends == appends
        assert store.saves == saves + 1  # b's own checkpoint
        assert ok(repl, "x, len(blob)", sid="a").value == "(0, 2000000)"  # restored
        # Changed since its checkpoint, b is written when it is evicted.
        ok(repl, "y += 1", sid="b")
        ok(repl, "x", sid="a")
        assert ok(repl, "y", sid="b").value == "2"
    finally:
        repl.close()


@pytest.mark.parametrize("snapshots", [True, False], ids=["rollback", "no-rollback"])
def test_sync_checkpoints_append_the_frame_before_the_result_returns(snapshots):
    store = JournalingStore()
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint="sync", snapshots=snapshots)
    try:
        ok(repl, "blob = b'x' * 2_000_000; x = 0; box = []")
        saves = store.saves
        for i in range(1, 4):
            ok(repl, "x += 1\nbox.append(x)")
            assert (store.saves, store.appends) == (saves, i)  # durable as it returns
        # A crash now loses nothing the Results returned: the next host (or
        # rollback off, this one) restores base and frames.
        crashed = repl.run("s", "import os; os._exit(3)")
        assert not crashed.ok
        assert ok(repl, "x, box, len(blob)").value == "(3, [1, 2, 3], 2000000)"
    finally:
        repl.close()
    assert restored(store.inner, "x, box").value == "(3, [1, 2, 3])"


def test_sync_checkpoints_fall_back_to_a_whole_checkpoint_when_the_append_fails():
    store = JournalingStore()
    repl = dolsot.Repl(store=store, typecheck=False, checkpoint="sync")
    try:
        ok(repl, "x = 0")
        saves = store.saves
        store.fail_next_append = 1
        result = ok(repl, "x += 1")
        assert result.save_error is None and not result.error
        assert (store.saves, store.appends) == (saves + 1, 0)
        ok(repl, "x += 1")
        assert (store.saves, store.appends) == (saves + 1, 1)
    finally:
        repl.close()
    assert restored(store.inner, "x").value == "2"
