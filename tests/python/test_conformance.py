"""One suite, every backend: what a cell returns must not depend on where it
ran (the shared cell-execution routine). `backend` (conftest.py) yields an
InProcessSession and, when available, a Repl, each with the toolbox `tb`."""

from __future__ import annotations

import asyncio
import os
import threading

import pytest

import dolsot

pytestmark = pytest.mark.timeout(60)


def test_trailing_expression_is_the_value(backend):
    r = backend.run("c", "x = 20\nx + 22")
    assert (r.ok, r.value, r.stdout, r.error, r.exit_code) == (True, "42", "", None, 0)


def test_none_and_statements_give_no_value(backend):
    assert backend.run("c", "None").value is None
    assert backend.run("c", "y = 1").value is None
    assert backend.run("c", "print('p')").value is None


def test_state_carries_between_cells(backend):
    backend.run("c", "def double(v):\n    return 2 * v")
    assert backend.run("c", "double(21)").value == "42"


def test_stdout_is_captured_and_stderr_joins_it(backend):
    r = backend.run("c", "import sys\nprint('out')\nsys.stderr.write('err\\n')\n7")
    assert r.stdout == "out\nerr\n"
    assert r.value == "7"


def test_held_lists_names_in_order_without_dunders_or_toolbox(backend):
    r = backend.run("c", "import os\ndef f(): pass\nx = 1\n__hidden__ = 2")
    assert r.held == ["os", "f", "x"]
    assert r.dropped == []
    assert "session now holds: os, f, x" in r.text


def test_syntax_error_is_a_failed_result(backend):
    r = backend.run("c", "x = = 1")
    assert (r.ok, r.exit_code) == (False, 1)
    assert "SyntaxError" in r.error and "^" in r.error and "line 1" in r.error
    assert "Traceback" not in r.error


def test_traceback_holds_only_the_users_frames(backend):
    r = backend.run("c", "def f():\n    return 1 / 0\nf()")
    assert (r.ok, r.exit_code) == (False, 1)
    assert r.error.startswith("Traceback (most recent call last):")
    assert "return 1 / 0" in r.error
    assert r.error.rstrip().endswith("ZeroDivisionError: division by zero")
    assert "dolsot" not in r.error and ".py\"" not in r.error


def test_toolbox_call_and_exit_code(backend):
    assert backend.run("c", "tb.add(2, 3)").value == "5"
    r = backend.run("c", "tb.find('x')")
    assert (r.ok, r.exit_code) == (False, 3)
    assert r.error.rstrip().endswith("ToolError: x not found")


def test_system_exit_is_caught_and_the_session_kept(backend):
    backend.run("c", "kept = 5")
    r = backend.run("c", "import sys\nsys.exit(4)")
    assert (r.ok, r.exit_code) == (False, 4)
    assert backend.run("c", "kept").value == "5"
    assert backend.run("c", "sys.exit(0)").ok


def test_input_raises_eof_at_once(backend):
    r = backend.run("c", "input('name? ')")
    assert not r.ok
    assert r.error.rstrip().endswith("EOFError: EOF when reading a line")


def test_huge_output_is_capped_head_and_tail(backend):
    r = backend.run("c", "for i in range(300000): print(i)")
    assert r.stdout.startswith("0\n1\n2\n")
    assert r.stdout.endswith("299998\n299999\n")
    assert "characters cut" in r.stdout
    assert len(r.stdout) < 110_000


def test_huge_value_repr_is_bounded(backend):
    r = backend.run("c", "list(range(10_000_000))")
    assert len(r.value) <= 100_000
    assert r.value.startswith("[0, 1, 2, 3")
    assert "list of 10000000 items" in r.value


def test_timeout_returns_124_with_partial_output(backend):
    r = backend.run("t", "print('started', flush=True)\nwhile True:\n    pass", timeout=0.5)
    assert (r.ok, r.exit_code) == (False, 124)
    assert "started" in r.stdout


def test_session_survives_a_python_loop_timeout(backend):
    backend.run("t", "kept = 1")
    assert backend.run("t", "while True:\n    pass", timeout=0.5).exit_code == 124
    assert backend.run("t", "kept + 1").value == "2"


def test_sessions_and_reset(backend):
    backend.run("one", "a = 1")
    backend.run("two", "b = 2")
    ids = {info.id for info in backend.sessions()}
    assert {"one", "two"} <= ids
    assert backend.reset("one") == 1
    assert not backend.run("one", "a").ok
    assert backend.reset("all") >= 1


def test_caller_mistakes_raise_before_running(backend):
    with pytest.raises(dolsot.InvalidSession):
        backend.run("bad id!", "1")
    with pytest.raises(dolsot.InvalidSession):
        backend.run("c", "   ")


def test_arun(backend):
    async def main():
        return await backend.arun("c", "6 * 7")

    assert asyncio.run(main()).value == "42"


def test_result_text_joins_everything(backend):
    r = backend.run("c", "print('hi')\n1 + 1")
    assert r.text == "hi\n2\nsession now holds: nothing"


def test_run_takes_its_arguments_like_a_python_function(backend):
    # run() is bound by hand (bindings/fast_method.h): the same call shape and
    # the same refusals as `def run(session_id, code, *, timeout=None)`.
    assert backend.run(session_id="c", code="x = 3", timeout=5).ok
    assert backend.run("c", code="x", timeout=2.5).value == "3"
    assert backend.run("c", "x", timeout=None).value == "3"
    with pytest.raises(TypeError, match="missing"):
        backend.run("c")
    with pytest.raises(TypeError, match="positional"):
        backend.run("c", "1", 3)
    with pytest.raises(TypeError, match="unexpected keyword argument 'time_out'"):
        backend.run("c", "1", time_out=3)
    with pytest.raises(TypeError, match="multiple values for argument 'code'"):
        backend.run("c", "1", code="2")
    with pytest.raises(TypeError, match="'session_id' must be str, not bytes"):
        backend.run(b"c", "1")
    with pytest.raises(TypeError, match="'code' must be str, not int"):
        backend.run("c", 1)
    with pytest.raises(TypeError, match="'timeout' must be a number or None, not str"):
        backend.run("c", "1", timeout="5")
    assert backend.run("c", "x").value == "3"  # nothing above touched the session


def test_a_lone_surrogate_is_a_failed_result_naming_the_byte(backend):
    r = backend.run("c", "x = '\ud800'")
    assert (r.ok, r.exit_code, r.value) == (False, 1, None)
    assert "not valid UTF-8 (bad byte at offset 5)" in r.error
    with pytest.raises(dolsot.InvalidSession):
        backend.run("c\ud800", "1")


@pytest.mark.parametrize("cls", [dolsot.Repl, dolsot.Repl.__mro__[1], dolsot.InProcessSession])
@pytest.mark.parametrize("call", [
    lambda b: b.run("c", "1"),
    lambda b: b.sessions(),
    lambda b: b.reset("c"),
    lambda b: b.close(),
    lambda b: b.interrupt("c"),
    lambda b: b.capabilities,
    lambda b: b.branch("a", "b"),
    lambda b: b.namespace("c"),
])
def test_a_method_on_an_instance_never_initialized_raises_instead_of_crashing(cls, call):
    # pybind11 would hand a method uninitialized memory for such an instance.
    unborn = cls.__new__(cls)
    with pytest.raises(TypeError, match="__init__ did not run"):
        call(unborn)


@pytest.mark.parametrize("cls, call", [
    (dolsot.Repl, lambda b: b.branch("a", "b")),
    (dolsot.Repl, lambda b: b.worker_pid),
    (dolsot.InProcessSession, lambda b: b.namespace("c")),
    (dolsot.InProcessSession, lambda b: b.leaked_threads),
])
def test_a_backend_specific_method_on_an_instance_never_initialized_raises(cls, call):
    unborn = cls.__new__(cls)
    with pytest.raises(TypeError, match="__init__ did not run"):
        call(unborn)


# --- the one seam: outcomes, interrupt, capabilities, optional operations ---

def test_both_backends_are_the_one_bound_backend(backend):
    assert isinstance(backend, dolsot._dolsot.Backend)
    assert isinstance(backend, dolsot.Backend)
    for method in ("run", "interrupt", "sessions", "reset", "branch", "namespace"):
        assert getattr(type(backend), method) is getattr(dolsot._dolsot.Backend, method)


def test_outcome_says_what_happened(backend):
    assert backend.run("o", "x = 1").outcome == dolsot.Outcome.OK
    assert backend.run("o", "1 / 0").outcome == dolsot.Outcome.ERROR
    assert backend.run("o", "tb.find('x')").outcome == dolsot.Outcome.ERROR
    timed_out = backend.run("o", "while True: pass", timeout=0.5)
    assert (timed_out.outcome, timed_out.exit_code) == (dolsot.Outcome.TIMEOUT, 124)
    assert timed_out.outcome.name == "TIMEOUT"
    assert "outcome=timeout" in repr(timed_out)


def test_a_gate_rejection_has_its_own_outcome(conformance_toolbox):
    def gate(code):
        return ["no"] if "forbidden" in code else []

    for make in (
        lambda: dolsot.InProcessSession(gate=gate, typecheck=False),
        lambda: dolsot.Repl(store=dolsot.store.MemoryStore(), gate=gate, typecheck=False),
    ):
        with make() as backend:
            r = backend.run("g", "forbidden = 1")
            assert (r.ok, r.outcome, r.exit_code) == (False, dolsot.Outcome.REJECTED, 1)
            assert backend.run("g", "'forbid' + 'den' in globals()").value == "False"


def test_interrupt_stops_the_running_cell_and_keeps_the_session(backend, tmp_path):
    if backend.capabilities.sandbox:
        pytest.skip("the FIFO this test waits on is outside the sandbox; "
                    "test_sandbox_escape.py interrupts a sandboxed cell through a mount")
    fifo = tmp_path / "started"
    os.mkfifo(fifo)
    backend.run("i", "kept = 1")
    results = []
    cell = (f"kept = 2\nprint('before', flush=True)\n"
            f"import os\nos.close(os.open({str(fifo)!r}, os.O_WRONLY))\nwhile True: pass")
    runner = threading.Thread(target=lambda: results.append(backend.run("i", cell)))
    runner.start()
    os.close(os.open(fifo, os.O_RDONLY))  # returns once the cell has opened it
    backend.interrupt("i")
    runner.join(timeout=30)
    assert not runner.is_alive()
    r = results[0]
    assert (r.ok, r.outcome, r.exit_code) == (False, dolsot.Outcome.INTERRUPTED, 130)
    assert "before" in r.stdout
    expected = "1" if backend.capabilities.crash_survival else "2"
    assert backend.run("i", "kept").value == expected


def test_interrupt_of_an_idle_or_unknown_session_does_nothing(backend):
    backend.interrupt("never-used")
    backend.run("idle", "x = 1")
    backend.interrupt("idle")
    assert backend.run("idle", "x").value == "1"
    with pytest.raises(dolsot.InvalidSession):
        backend.interrupt("bad id!")


def _sandboxed(backend):
    try:
        backend.sandbox_report()
        return True
    except Exception:  # noqa: BLE001 - a Repl without a sandbox raises
        return False


def test_optional_operations_follow_the_capabilities(backend):
    caps = backend.capabilities
    assert isinstance(caps, dolsot.Capabilities)
    assert caps.sandbox is (getattr(backend, "sandbox_report", None) is not None and
                            _sandboxed(backend))
    assert caps.tools is True
    backend.run("src", "x = 41")
    if caps.branch:
        backend.branch("src", "copy")
        assert backend.run("copy", "x + 1").value == "42"
    else:
        with pytest.raises(dolsot.Unsupported, match="branch"):
            backend.branch("src", "copy")
    if caps.live_objects:
        assert backend.namespace("src")["x"] == 41
    else:
        with pytest.raises(dolsot.Unsupported, match="namespace"):
            backend.namespace("src")
        with pytest.raises(NotImplementedError):
            backend.namespace("src")


def test_capabilities_of_each_backend(backend):
    caps = backend.capabilities
    if isinstance(backend, dolsot.Repl):
        assert (caps.hard_timeout, caps.crash_survival, caps.live_objects, caps.branch,
                caps.durable) == (True, True, False, True, True)
    else:
        assert (caps.hard_timeout, caps.crash_survival, caps.live_objects, caps.branch,
                caps.durable) == (False, False, True, False, False)
    assert "hard_timeout=" in repr(caps)


def test_a_crashing_cell_where_the_backend_survives_it(backend):
    if not backend.capabilities.crash_survival:
        pytest.skip("a crash takes an in-process host down, by design")
    backend.run("c", "kept = 1")
    r = backend.run("c", "import os\nos._exit(7)")
    assert (r.ok, r.outcome, r.exit_code) == (False, dolsot.Outcome.CRASHED, 1)
    assert backend.run("c", "kept").value == "1"


@pytest.mark.parametrize("method, args, names", [
    ("reset", (5,), "session_id"),
    ("branch", (None, "b"), "source_id"),
    ("branch", ("a", 3.0), "new_id"),
    ("namespace", (b"s",), "session_id"),
    ("interrupt", ([],), "session_id"),
])
def test_a_wrong_argument_type_is_a_type_error_naming_the_argument(backend, method, args, names):
    # Issue #21 §3: not pybind11's list of overloads naming internal parameters.
    with pytest.raises(TypeError, match=rf"{method}\(\) argument '{names}' must be a session id") as caught:
        getattr(backend, method)(*args)
    assert "incompatible function arguments" not in str(caught.value)
