"""InProcessSession specifics: live objects by reference, parallel sessions
on host threads, the cooperative timeout and leaked threads, the gate."""

from __future__ import annotations

import importlib
import math
import threading
import gc
import weakref

import pytest

import dolsot
from dolsot.inprocess import InProcessSession

pytestmark = pytest.mark.timeout(60)


class Counter:
    def __init__(self):
        self.count = 0

    def bump(self):
        self.count += 1
        return self.count


def test_injected_objects_are_the_very_objects():
    counter, conn = Counter(), object()
    with InProcessSession({"counter": counter, "conn": conn, "m": math}) as s:
        assert s.run("a", "id(counter)").value == str(id(counter))
        assert s.run("a", "id(conn)").value == str(id(conn))
        assert s.run("a", "m is __import__('math')").value == "True"
        s.run("a", "counter.bump(); counter.bump()")
        assert counter.count == 2
        assert s.namespace("a")["counter"] is counter


def test_a_str_is_imported_as_a_module_name():
    with InProcessSession({"m": "math"}) as s:
        assert s.run("a", "m.sqrt(81)").value == "9.0"


def test_namespace_is_the_live_dict():
    with InProcessSession() as s:
        ns = s.namespace("n")
        ns["rows"] = [1, 2]
        s.run("n", "rows.append(3)\nmade = {'k': 'v'}")
        assert ns["rows"] == [1, 2, 3]
        assert s.namespace("n") is ns
        assert ns["made"] == {"k": "v"}


def test_a_host_sqlite3_connection_needs_check_same_thread_false():
    """Cells run on a pooled thread, not the caller's: an object with thread
    affinity made by the host must allow other threads (docs/inprocess.md)."""
    import sqlite3

    strict = sqlite3.connect(":memory:")
    shared = sqlite3.connect(":memory:", check_same_thread=False)
    try:
        with InProcessSession({"strict": strict, "db": shared}, timeout=20, typecheck=False) as s:
            refused = s.run("s", "strict.execute('select 1')")
            assert refused.error_type == "ProgrammingError"
            assert "thread" in refused.error
            assert s.run("s", "db.execute('create table t (x)')\ndb.execute('insert into t values (41)')").ok
            assert s.run("s", "db.execute('select x + 1 from t').fetchone()[0]").value == "42"
            assert s.run("s", "db.commit()").ok
        assert shared.execute("select x from t").fetchone() == (41,), "the host's own connection"
    finally:
        strict.close()
        shared.close()


def test_sessions_sharing_the_interpreter_keep_their_own_cell_sources():
    """In-process every session's cells live in one linecache: a traceback
    names a cell "<cell N>" as a Repl does, and shows that session's line."""
    with InProcessSession(timeout=20, typecheck=False) as s:
        s.run("a", "def f():\n    return 'from a' + 1")
        s.run("b", "def f():\n    return 'from b' + 2")
        for sid, line in (("a", "return 'from a' + 1"), ("b", "return 'from b' + 2")):
            error = s.run(sid, "f()").error
            assert 'File "<cell 2>", line 1, in <module>' in error, error
            assert 'File "<cell 1>", line 2, in f' in error, error
            assert line in error, error
            assert " of " not in error, error


def test_a_generator_lives_across_cells():
    with InProcessSession() as s:
        s.run("g", "gen = (i * i for i in range(10))")
        assert s.run("g", "next(gen)").value == "0"
        r = s.run("g", "next(gen)")
        assert (r.value, r.dropped) == ("1", [])


def test_bad_inject_raises_invalid_toolbox():
    with pytest.raises(dolsot.InvalidToolbox):
        InProcessSession({"x y": 1})
    with pytest.raises(dolsot.InvalidToolbox):
        InProcessSession({"m": "dolsot_no_such_module_xyz"})
    with pytest.raises(dolsot.InvalidToolbox):
        InProcessSession(["not", "a", "mapping"])  # type: ignore[arg-type]


def test_eight_host_threads_on_eight_sessions_never_cross(capsys):
    results = {}

    def work(n):
        code = f"import time\nfor i in range(300):\n    print('S{n}', i)\n    time.sleep(0)"
        results[n] = s.run(f"s{n}", code)

    with InProcessSession() as s:
        threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
        for t in threads:
            t.start()
        for i in range(100):
            print("host", i)  # the host's own prints go to the host's stdout
        for t in threads:
            t.join()
    for n in range(8):
        assert results[n].stdout == "".join(f"S{n} {i}\n" for i in range(300))
    out = capsys.readouterr().out
    assert "host 99\n" in out
    assert "S0" not in out


def test_back_to_back_cells_from_many_threads_each_get_their_own_answer():
    # The hand-offs spin before they sleep: no cell lost, run twice or crossed.
    wrong = []

    def work(n):
        for sid in (f"b{n}x", f"b{n}y"):
            s.run(sid, "n = 0")
        for c in range(1, 201):
            for sid in (f"b{n}x", f"b{n}y"):
                value = s.run(sid, f"n += 1\n({sid!r}, n)").value
                if value != repr((sid, c)):
                    wrong.append((sid, c, value))

    with InProcessSession() as s:
        threads = [threading.Thread(target=work, args=(n,)) for n in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert wrong == []
        assert s.leaked_threads == 0


def test_python_loop_is_stopped_and_the_session_usable():
    with InProcessSession() as s:
        s.run("t", "kept = 41")
        r = s.run("t", "print('before', flush=True)\nwhile True:\n    pass", timeout=0.5)
        assert (r.ok, r.exit_code, r.stdout) == (False, 124, "before\n")
        assert r.held == ["kept"]
        assert s.run("t", "kept + 1").value == "42"
        assert s.leaked_threads == 0


def test_a_cell_stuck_in_c_is_leaked_and_its_session_busy_until_reset():
    # Stuck in C (a lock's acquire), where no asynchronous exception reaches
    # it; the test frees it at the end, so no thread outlives the test.
    import time

    held = threading.Lock()
    held.acquire()
    try:
        with InProcessSession({"held": held}) as s:
            r = s.run("z", "import time\nheld.acquire()", timeout=0.5)
            assert r.exit_code == 124
            assert s.leaked_threads == 1
            with pytest.raises(dolsot.SessionBusy):
                s.run("z", "1")
            assert s.run("other", "2").value == "2"
            assert s.reset("z") == 1
            assert s.run("z", "'time' in globals()").value == "False"
    finally:
        held.release()
    deadline = time.monotonic() + 20
    while s.leaked_threads and time.monotonic() < deadline:
        time.sleep(0.05)
    assert s.leaked_threads == 0  # it ended once the C call returned


def test_gate_findings_reject_the_cell_before_it_runs():
    def gate(code):
        return ["line 1: no os.system"] if "system" in code else []

    with InProcessSession(gate=gate) as s:
        r = s.run("g", "ran = True\nimport os\nos.system('true')")
        assert (r.ok, r.exit_code) == (False, 1)
        assert "no os.system" in r.error
        assert not s.run("g", "ran").ok
        assert s.run("g", "ok = 1").ok


def test_a_gate_that_raises_rejects():
    def gate(code):
        raise RuntimeError("policy unavailable")

    with InProcessSession(gate=gate) as s:
        r = s.run("g", "1")
        assert not r.ok
        assert "policy unavailable" in r.error


def test_a_non_callable_gate_is_refused():
    with pytest.raises(dolsot.DolsotError):
        InProcessSession(gate=42)  # type: ignore[arg-type]


def test_configuration_is_validated():
    with pytest.raises(dolsot.ConfigError):
        InProcessSession(timeout=-1)
    with pytest.raises(dolsot.ConfigError):
        InProcessSession(max_output=-5)
    with InProcessSession(max_output=50) as s:
        r = s.run("c", "print('x' * 1000)")
        assert "characters cut" in r.stdout and len(r.stdout) < 400
        with pytest.raises(dolsot.DolsotError):
            s.run("c", "1", timeout=0)


def test_lone_surrogate_is_a_failed_result_not_an_exception(session):
    r = session.run("u", "x = '\ud800'")
    assert (r.ok, r.exit_code) == (False, 1)
    assert "UTF-8" in r.error


def test_close_is_idempotent_and_refuses_later_cells():
    s = InProcessSession()
    s.run("a", "1")
    s.close()
    s.close()
    with pytest.raises(dolsot.DolsotError):
        s.run("a", "1")


def test_sessions_report_live_sessions(session):
    session.run("one", "1")
    (info,) = session.sessions()
    assert (info.id, info.size_bytes) == ("one", 0)
    assert info.last_used > 0


def test_the_sandbox_ast_gate_plugs_in():
    sandbox = importlib.import_module("dolsot.sandbox")
    with InProcessSession(gate=sandbox.check_ast) as s:
        r = s.run("g", "import os\nos.system('echo hi')")
        assert (r.ok, r.exit_code) == (False, 1)
        assert "[import-denied]" in r.error
        assert s.run("g", "1 + 1").value == "2"


def test_arun_and_concurrent_tasks_on_different_sessions():
    import asyncio

    async def main(s):
        return await asyncio.gather(*(s.arun(f"a{n}", f"{n} * 2") for n in range(4)))

    with InProcessSession() as s:
        results = asyncio.run(main(s))
    assert [r.value for r in results] == ["0", "2", "4", "6"]


@pytest.mark.parametrize("forget", ["reset", "reset_all", "close"])
def test_a_forgotten_session_frees_its_namespace(forget):
    # A session's last cell once held the session (and its namespace) in a
    # reference cycle in C++: reset and close freed nothing.
    s = dolsot.InProcessSession(typecheck=False)
    s.run("a", "class Big:\n    pass\nbig = Big()\nrows = [bytes(1000) for _ in range(100)]")
    ref = weakref.ref(s.namespace("a")["big"])
    if forget == "reset":
        assert s.reset("a") == 1
    elif forget == "reset_all":
        assert s.reset("all") == 1
    s.close()
    gc.collect()
    assert ref() is None, "the session's namespace is still alive"


def test_a_cell_that_swallows_the_timeout_is_reported_per_session_until_it_ends():
    # Issue #21 §1.6: a loop catching BaseException outlives its timeout, its
    # session's reset and close; it is listed by session until it ends.
    import threading
    import time

    stop = threading.Event()
    session = InProcessSession({"stop": stop}, typecheck=False)
    code = (
        "while not stop.is_set():\n"
        "    try:\n"
        "        stop.wait(0.01)\n"
        "    except BaseException:\n"
        "        pass\n"
    )
    try:
        r = session.run("stubborn", code, timeout=0.3)
        assert r.outcome == dolsot.Outcome.TIMEOUT
        assert session.leaked_cells == {"stubborn": 1}
        with pytest.raises(dolsot.SessionBusy):
            session.run("stubborn", "1")
        session.reset("stubborn")
        assert session.leaked_cells == {"stubborn": 1}
        assert session.run("other", "1 + 1").value == "2"
        session.close()
        assert session.leaked_cells == {"stubborn": 1}
    finally:
        stop.set()
    deadline = time.monotonic() + 20
    while session.leaked_cells and time.monotonic() < deadline:
        stop.wait(0.05)
    assert session.leaked_cells == {} and session.leaked_threads == 0
