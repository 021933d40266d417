"""A Repl's live-session limit changed while it runs, and its eviction count
(what dolsot.ray.SessionPool sizes its actors with, issue #39)."""

from __future__ import annotations

import dolsot
import pytest
from dolsot.errors import ConfigError
from dolsot.store import MemoryStore


@pytest.fixture
def repl():
    r = dolsot.Repl(store=MemoryStore(), typecheck=False, checkpoint="sync", max_live_sessions=2)
    yield r
    r.close()


def _ok(repl, sid, code):
    result = repl.run(sid, code)
    assert result.ok, result.error
    return result


def test_evictions_count_the_live_sessions_the_limit_ended(repl):
    assert (repl.max_live_sessions, repl.evictions) == (2, 0)
    for i in range(5):
        _ok(repl, f"s{i}", f"x = {i}")
    assert repl.evictions == 3  # s0, s1, s2 made room for s2, s3, s4
    assert _ok(repl, "s0", "x").value == "0"  # restored from the store, evicting s3
    assert repl.evictions == 4


def test_a_raised_limit_keeps_more_sessions_live_while_the_repl_runs(repl):
    _ok(repl, "a", "x = 1")
    _ok(repl, "b", "x = 2")
    repl.max_live_sessions = 4
    assert repl.max_live_sessions == 4
    _ok(repl, "c", "x = 3")
    _ok(repl, "d", "x = 4")
    assert repl.evictions == 0
    assert [_ok(repl, sid, "x").value for sid in "abcd"] == ["1", "2", "3", "4"]
    assert repl.evictions == 0


def test_a_lowered_limit_evicts_when_a_session_next_becomes_live(repl):
    repl.max_live_sessions = 3
    for sid in "abc":
        _ok(repl, sid, "x = 1")
    repl.max_live_sessions = 1
    assert repl.evictions == 0  # not at once
    _ok(repl, "d", "x = 1")
    assert repl.evictions == 3  # a, b and c, least recently used first
    assert [_ok(repl, sid, "x").value for sid in "abc"] == ["1", "1", "1"]


@pytest.mark.parametrize("bad, error, words", [
    (0, ConfigError, "max_live_sessions must be from 1"),
    (-5, ConfigError, "got -5"),
    (2**40, ConfigError, "got 1099511627776"),
    (True, TypeError, "max_live_sessions must be an int, got bool"),
    (1.5, TypeError, "got float"),
    ("8", TypeError, "got str"),
    (None, TypeError, "got NoneType"),
])
def test_a_bad_limit_is_refused_and_the_old_one_kept(repl, bad, error, words):
    with pytest.raises(error, match=words):
        repl.max_live_sessions = bad
    assert repl.max_live_sessions == 2
