"""The new session a Repl opens ahead (backend_subprocess/spare_session.h):
the next new session takes it and is exactly as fresh as one opened on
demand; a restored or branched session never takes it; one whose runner died
is never handed out; close leaves none of its processes behind."""

from __future__ import annotations

import os
import signal

import pytest

import dolsot
from dolsot.store import MemoryStore
from process_tree import alive, children, descendants, wait_until_gone

# What a cell can see of its session's freshness: the names it holds, its
# cell counter (the filename its code runs under), its builtins, the
# toolbox, its threads, and whether it runs in its own process group.
FRESHNESS = (
    "(sorted(k for k in globals() if not k.startswith('__')),"
    " __import__('sys')._getframe().f_code.co_filename,"
    " sorted(k for k in vars(__builtins__) if not k.startswith('_'))[:5], tb.dumps([1]),"
    " __import__('threading').active_count(), __import__('os').getpgid(0) == __import__('os').getpid())"
)


@pytest.fixture
def repl():
    r = dolsot.Repl({"tb": "json"}, store=MemoryStore(), typecheck=False)
    yield r
    r.close()


def ok(repl, sid, code):
    r = repl.run(sid, code)
    assert r.ok, r.error
    return r


def pid_of(repl, sid) -> int:
    return int(ok(repl, sid, "import os\nos.getpid()").value)


def spare_runner(repl, taken: set[int]) -> int:
    """The pid of the spare's runner: below a keeper, with a snapshot below
    it (the worker's own session forked ahead has none yet), not one of the
    `taken` sessions' runners."""
    runners = [p for keeper in children(repl.worker_pid) for p in children(keeper)
               if p not in taken and children(p)]
    assert len(runners) == 1, runners
    return runners[0]


def test_the_next_new_session_takes_the_session_opened_ahead(repl):
    first = pid_of(repl, "a")
    assert repl._await_spare_for_testing(60)
    ahead = spare_runner(repl, {first})
    assert pid_of(repl, "b") == ahead
    # And one is opened ahead again for the session after it.
    assert repl._await_spare_for_testing(60)
    again = spare_runner(repl, {first, ahead})
    assert pid_of(repl, "c") == again


def test_a_session_taken_from_ahead_is_as_fresh_as_one_opened_on_demand(repl):
    on_demand = ok(repl, "a", FRESHNESS).value
    assert repl._await_spare_for_testing(60)
    ahead = spare_runner(repl, {pid_of(repl, "a")})
    r = ok(repl, "b", FRESHNESS)
    assert r.value == on_demand
    assert "<cell 1>" in r.value and r.held == []
    assert pid_of(repl, "b") == ahead
    # Its state is its own from then on.
    ok(repl, "b", "x = 'b'")
    assert ok(repl, "a", "'x' in globals()").value == "False"


def test_a_restored_session_never_takes_the_spare():
    store = MemoryStore()
    with dolsot.Repl(store=store, typecheck=False) as before:
        ok(before, "kept", "x = 41")
    with dolsot.Repl(store=store, typecheck=False) as r:
        first = pid_of(r, "new")
        assert r._await_spare_for_testing(60)
        ahead = spare_runner(r, {first})
        assert ok(r, "kept", "x + 1").value == "42"
        assert pid_of(r, "kept") != ahead and alive(ahead)
        assert pid_of(r, "other") == ahead  # still there for a new one


def test_a_branch_never_takes_the_spare(repl):
    ok(repl, "a", "x = 7")
    first = pid_of(repl, "a")
    assert repl._await_spare_for_testing(60)
    ahead = spare_runner(repl, {first})
    repl.branch("a", "b")
    assert ok(repl, "b", "x").value == "7"
    assert pid_of(repl, "b") != ahead and alive(ahead)


def test_a_spare_whose_runner_died_is_not_handed_out(repl):
    first = pid_of(repl, "a")
    assert repl._await_spare_for_testing(60)
    ahead = spare_runner(repl, {first})
    os.kill(ahead, signal.SIGKILL)
    wait_until_gone(ahead)
    r = ok(repl, "b", "import os\n(os.getpid(), 1 + 1)")
    assert r.value != f"({ahead}, 2)" and r.value.endswith(", 2)")


def test_close_leaves_nothing_of_the_spare():
    r = dolsot.Repl(store=MemoryStore(), typecheck=False)
    first = pid_of(r, "a")
    assert r._await_spare_for_testing(60)
    ahead = spare_runner(r, {first})
    worker = r.worker_pid
    everything = [worker, *descendants(worker)]
    assert ahead in everything
    r.close()
    for pid in everything:
        wait_until_gone(pid)
    assert not any(alive(p) for p in everything)


def test_close_while_the_spare_is_being_opened_leaves_nothing():
    # No wait for the spare: close meets it being opened (or just opened).
    r = dolsot.Repl(store=MemoryStore(), typecheck=False)
    ok(r, "a", "1")
    worker = r.worker_pid
    everything = [worker, *descendants(worker)]
    r.close()
    for pid in everything:
        wait_until_gone(pid)
    assert not any(alive(p) for p in everything)
