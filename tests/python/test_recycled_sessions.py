"""A reset session whose processes hold nothing but a new session's state is
the next new session (LiveSession::Recycle, SpareSession::Give), as a pooled
worker is handed back: its runner, every cell of which was proven, puts its
namespace back to what its snapshot (forked before its first cell) holds and
serves the next new session in place; where it cannot (or was given the
host's tools), that snapshot is promoted instead. Only then: a session whose
snapshot any cell replaced (the general path, a rollback) ends whole on
reset, and under a Sandbox no session's processes serve another's. The
recycled session is as fresh as one opened ahead, and close leaves none of
it.

Also here: a read-only or binding cell that owes the store a checkpoint (a
new session's first) writes it without forking a new snapshot, and binding
cells that piled up more than the host keeps for a snapshot make the next
cell fork one."""

from __future__ import annotations

import os
import signal
import time

import pytest

import dolsot
from dolsot.store import MemoryStore
from process_tree import alive, children, descendants, started, wait_until_gone

# What a cell can see of its session's freshness (as in test_spare_session).
FRESHNESS = (
    "(sorted(k for k in globals() if not k.startswith('__')),"
    " __import__('sys')._getframe().f_code.co_filename,"
    " sorted(k for k in vars(__builtins__) if not k.startswith('_'))[:5],"
    " __import__('threading').active_count(), __import__('os').getpgid(0) == __import__('os').getpid())"
)


def ok(repl, sid, code):
    r = repl.run(sid, code)
    assert r.ok, r.error
    return r


def runners(repl, sandboxed: bool = False) -> dict[int, list[int]]:
    """Every runner below the worker (a keeper's child with a live child)
    and its live children: its snapshot, and a checkpoint writer while one
    writes. A sandboxed worker's keepers are below its namespaces' first
    process."""
    worker = children(repl.worker_pid)[0] if sandboxed else repl.worker_pid
    out = {}
    for keeper in children(worker):
        for runner in children(keeper):
            below = [p for p in children(runner) if alive(p)]
            if alive(runner) and below:
                out[runner] = below
    return out


def _runner_of(repl, sid: str) -> int:
    return int(ok(repl, sid, "import os\nos.getpid()").value)


@pytest.fixture
def repl():
    # No checkpoints, so a runner's only child is its snapshot (no writer).
    r = dolsot.Repl(store=MemoryStore(), typecheck=False, checkpoint="off")
    yield r
    r.close()


def _a_on_the_spare(repl, *cells: str) -> tuple[int, int]:
    """Runs `cells` in a new session "a", which takes the worker's spare;
    returns its runner and snapshot, once the spare "a" asked for is ready."""
    warm = _runner_of(repl, "warm")  # the worker's first session; a spare follows
    assert repl._await_spare_for_testing(60)
    (spare,) = [r for r in runners(repl) if r != warm]
    for code in cells:
        ok(repl, "a", code)
    (a_snapshot,) = runners(repl)[spare]  # proven cells: the first snapshot stayed
    assert repl._await_spare_for_testing(60)
    return spare, a_snapshot


def test_a_reset_session_whose_cells_were_all_proven_serves_the_next_new_session_in_place(repl):
    spare, a_snapshot = _a_on_the_spare(repl, "x = 41", "x + 1")  # binding, read-only
    keeper = parent_of(spare)
    repl.reset("a")
    ok(repl, "c", "1")  # takes the ready spare; none is made while one waits recycled
    # "a"'s runner, made new again with its namespace put back: its
    # snapshot, its keeper and itself, no process made or ended.
    assert _runner_of(repl, "b") == spare
    assert alive(a_snapshot) and parent_of(a_snapshot) == spare
    assert alive(keeper) and parent_of(spare) == keeper
    # Nothing of "a": its name, its cells.
    fresh = ok(repl, "b", "('x' in globals(), __import__('sys')._getframe().f_code.co_filename)")
    assert fresh.value == "(False, '<cell 2>')"


def test_a_session_of_proven_cells_that_idled_is_still_made_new_in_place(repl):
    # A runner refreshes its snapshot once idle a second (session_process.cc's
    # RefreshWhenIdle), but not while that snapshot holds a new session: an
    # agent's session that idled between its cells is handed back all the same.
    spare, a_snapshot = _a_on_the_spare(repl, "x = [1, 2]")
    time.sleep(1.5)  # the idle time under test, past the refresh's second
    assert runners(repl)[spare] == [a_snapshot]
    repl.reset("a")
    ok(repl, "c", "1")
    assert _runner_of(repl, "b") == spare
    assert ok(repl, "b", "'x' in globals()").value == "False"


def test_a_runner_gone_before_it_renewed_in_place_gives_way_to_its_snapshot(repl):
    # RENEW_IN_PLACE's runner ends instead of answering (it could not put
    # its namespace back; here it is killed first): the snapshot, which
    # holds a new session, is renewed instead, still with no process made.
    spare, a_snapshot = _a_on_the_spare(repl, "x = 1")
    os.kill(spare, signal.SIGSTOP)  # it reads nothing more
    repl.reset("a")
    os.kill(spare, signal.SIGKILL)
    ok(repl, "c", "1")  # the ready spare
    assert _runner_of(repl, "b") == a_snapshot
    wait_until_gone(spare)
    assert ok(repl, "b", "'x' in globals()").value == "False"


def test_a_session_given_the_host_s_tools_is_renewed_from_its_snapshot():
    # The tools' transport stays with the runner that made it: such a
    # session's runner ends on reset, and its snapshot serves the next one.
    with dolsot.Repl(store=MemoryStore(), typecheck=False, checkpoint="off",
                     tools={"double": lambda v: v * 2}) as r:
        spare, a_snapshot = _a_on_the_spare(r, "1 + 1")  # read-only, the tools bound
        r.reset("a")
        ok(r, "c", "1")
        assert _runner_of(r, "b") == a_snapshot
        wait_until_gone(spare)
        assert ok(r, "b", "double(21)").value == "42"  # bound again for its cells


# What a general cell can see of what a session's processes kept: its
# names, the builtins, the modules loaded, the cell sources tracebacks read,
# the one container a new session holds, its cell's number.
INTERPRETER = (
    "(sorted(globals()), len(vars(__builtins__)), len(__import__('sys').modules),"
    " sorted(k for k in __import__('linecache').cache if k.startswith('<')),"
    " __annotations__, __import__('sys')._getframe().f_code.co_filename)"
)


@pytest.mark.parametrize("cells", [
    ["x = 41", "x + 1"],
    ["1/0"],                                     # a traceback formatted
    ["undefined_name"],
    ["y = [1, 2]", "y.append(3)", "print(y)"],   # a list changed in place
    ["def f(a):\n    return a * 2", "f(3)"],    # a proven function registered
    ["s = 'ab' * 3", "t = s.upper()", "sorted(set(t))"],
])
def test_a_session_made_new_after_proven_cells_shows_the_interpreter_of_one_opened_ahead(cells):
    with dolsot.Repl(store=MemoryStore(), typecheck=False) as r:
        ok(r, "warm", "1")
        assert r._await_spare_for_testing(60)
        ahead = ok(r, "ahead", INTERPRETER).value  # the spare, opened ahead
        for i in range(3):
            for code in cells:
                r.run(f"s{i}", code)
            r.reset(f"s{i}")
            assert ok(r, f"probe{i}", INTERPRETER).value == ahead


def test_a_session_renewed_in_place_keeps_nothing_of_the_last_one_s_variables():
    with dolsot.Repl(store=MemoryStore(), typecheck=False) as r:
        ok(r, "warm", "1")
        for i in range(3):
            first = r.run(f"s{i}", "n = len(ctx)", variables={"ctx": "secret" * (i + 1)})
            assert first.ok, first.error
            r.reset(f"s{i}")
        got = ok(r, "next", "sorted(k for k in globals() if not k.startswith('__'))")
        assert got.value == "[]"
        again = r.run("next2", "len(ctx)", variables={"ctx": "abc"})
        assert again.ok and again.value == "3", again.error


def test_a_recycled_session_is_as_fresh_as_one_opened_on_demand():
    with dolsot.Repl(store=MemoryStore(), typecheck=False) as r:
        on_demand = ok(r, "first", FRESHNESS).value
        for i in range(6):
            # Each ran only a binding and a read-only cell, then was reset:
            # the next ones are recycled ones.
            ok(r, f"s{i}", "y = [1, 2, 3]")
            ok(r, f"s{i}", "len(y)")
            r.reset(f"s{i}")
        # A recycled session rolls back like any other: its own binding
        # replayed, none of the sessions it was made from.
        ok(r, "replay", "z = 5")
        crashed = r.run("replay", "import os\nos._exit(3)")
        assert crashed.outcome == dolsot.Outcome.CRASHED
        assert ok(r, "replay", "sorted(k for k in globals() if not k.startswith('__'))").value == "['z']"
        got = ok(r, "probe", FRESHNESS)
        assert got.value == on_demand
        assert got.held == []


def host_pid(repl, namespace_pid: int) -> int:
    """The pid outside its pid namespace of the worker's descendant that is
    `namespace_pid` inside it (the last of /proc's NSpid)."""
    for pid in descendants(repl.worker_pid):
        try:
            with open(f"/proc/{pid}/status") as f:
                ns = next(line.split()[1:] for line in f if line.startswith("NSpid:"))
        except (OSError, StopIteration):
            continue
        if int(ns[-1]) == namespace_pid and len(ns) > 1:
            return pid
    raise AssertionError(f"no process is {namespace_pid} in the sandbox's pid namespace")


def parent_of(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


@pytest.mark.parametrize("cells", [
    ["import json\nx = 1", "x"],    # the general path: a new snapshot replaced its first
    ["while True: pass", "x = 1"],  # a rollback: its first snapshot promoted
])
def test_a_session_whose_snapshot_a_cell_replaced_ends_whole_on_reset(cells):
    with dolsot.Repl(store=MemoryStore(), typecheck=False, checkpoint="off") as r:
        warm = _runner_of(r, "warm")
        assert r._await_spare_for_testing(60)
        (spare,) = [p for p in runners(r) if p != warm]
        keeper = parent_of(spare)  # "a" takes the spare: this is its keeper
        for code in cells:
            result = r.run("a", code, timeout=1)
            assert result.ok or result.outcome == dolsot.Outcome.TIMEOUT, result.error
        r.reset("a")
        wait_until_gone(keeper)  # every process of "a" with it
        assert ok(r, "b", "'x' in globals()").value == "False"


def test_no_session_serves_another_under_a_sandbox():
    # Each session's keeper holds walls and a scratch /tmp of its own there:
    # a session that held only a new session's state still ends whole.
    with dolsot.Repl(store=MemoryStore(), typecheck=False, checkpoint="off",
                     sandbox=dolsot.Sandbox()) as r:
        warm = host_pid(r, _runner_of(r, "warm"))  # the cell sees its namespace's pid
        assert r._await_spare_for_testing(60)
        (spare,) = [p for p in runners(r, sandboxed=True) if p != warm]
        keeper = parent_of(spare)
        ok(r, "a", "x = 1")
        ok(r, "a", "x")
        r.reset("a")
        wait_until_gone(keeper)
        assert ok(r, "b", "'x' in globals()").value == "False"


def test_close_leaves_nothing_of_recycled_sessions():
    r = dolsot.Repl(store=MemoryStore(), typecheck=False)
    for i in range(4):
        ok(r, f"s{i}", "1 + 1")
        r.reset(f"s{i}")
    worker = r.worker_pid
    everything = [worker, *descendants(worker)]
    assert len(everything) > 4
    r.close()
    for pid in everything:
        wait_until_gone(pid)
    assert not any(alive(p) for p in everything)


@pytest.mark.parametrize("checkpoint", ["sync", "async"])
def test_a_new_session_s_first_read_only_cell_is_checkpointed_and_keeps_its_snapshot(checkpoint):
    store = MemoryStore()
    with dolsot.Repl(store=store, typecheck=False, checkpoint=checkpoint) as r:
        warm = _runner_of(r, "warm")
        assert r._await_spare_for_testing(60)
        (spare,) = [p for p in runners(r) if p != warm]
        (snapshot,) = runners(r)[spare]  # a spare ran no cell: no writer
        # "b" takes the spare. Nothing of it is stored: its first cell owes
        # a checkpoint, which it writes without forking a new snapshot, nor
        # (async) a writer: a new session's state is serialized in place,
        # once its runner has idled a moment (nothing else is asked here).
        assert ok(r, "b", "2 + 2").value == "4"
        r.sessions()  # the saver's checkpoints on their way land
        assert store.load("b") is not None
        ok(r, "b", "3")
        assert [p for p in children(spare) if alive(p)] == [snapshot]
        # A first binding cell's, written before the cell right after it
        # runs: the state the store gets is the one after the first.
        ok(r, "c", "x = 5")
        ok(r, "c", "x = x + 1")
        r.sessions()
    with dolsot.Repl(store=store, typecheck=False) as again:
        assert ok(again, "c", "x").value == "6"
        assert ok(again, "b", "'x' in globals()").value == "False"


def test_binding_cells_past_what_the_host_keeps_fork_a_new_snapshot():
    with dolsot.Repl(store=MemoryStore(), typecheck=False, checkpoint="off") as r:
        runner = _runner_of(r, "a")
        ok(r, "a", "1")  # served once the general cell's snapshot is forked
        # That snapshot, and the one from before the general cell, killed by
        # the runner once the new one existed, until it is gone.
        *retired, snapshot = sorted((p for p in children(runner) if alive(p)), key=started)
        for p in retired:
            wait_until_gone(p)
        # Each binds ~200 KB of plain text: binding cells, the snapshot stays,
        # the host keeps their values for it, until past 1 MB.
        for i in range(5):
            ok(r, "a", f"s{i} = '{i}' * 200_000")
        assert [p for p in children(runner) if alive(p)] == [snapshot]
        ok(r, "a", "s5 = '5' * 200_000")  # past it: the next cell forks one
        ok(r, "a", "t = 1")
        wait_until_gone(snapshot)
        after = [p for p in children(runner) if alive(p)]
        assert len(after) == 1 and after[0] != snapshot
        # Rollback from the new snapshot is exact.
        crashed = r.run("a", "import os\nos._exit(3)")
        assert crashed.outcome == dolsot.Outcome.CRASHED
        assert ok(r, "a", "(len(s0), len(s5), s5[0], t)").value == "(200000, 200000, '5', 1)"
