"""dolsot.dspy.DolsotInterpreter: dspy's CodeInterpreter protocol on both
backends, and dspy.RLM end to end with dspy's scripted DummyLM (a user tool,
llm_query, an error the model recovers from, a timeout, SUBMIT), alone and
under dspy.Evaluate(num_threads=4). dspy is a pinned test dependency: these
tests never skip."""

from __future__ import annotations

import contextlib
import gc
import os
import threading

import dspy
import pytest

import dolsot
from dspy.primitives.code_interpreter import (
    CodeExecutionError,
    CodeInterpreter,
    CodeInterpreterError,
    FinalOutput,
)
from dspy.utils import DummyLM

from dolsot.dspy import DolsotInterpreter
from process_tree import alive, children

pytestmark = pytest.mark.timeout(120)

BACKENDS = ["repl", "inprocess"]


@pytest.fixture(autouse=True)
def no_process_outlives_its_test():
    """Every process a test starts (a Repl's worker, a ty server) is gone when
    it ends: owned, closed, reaped. A module-scoped fixture's are set up
    before this runs, so they count as there before."""
    me = os.getpid()
    before = {pid for pid in children(me, every_thread=True) if alive(pid)}
    yield
    left = {pid for pid in children(me, every_thread=True) if alive(pid)} - before
    assert not left, {pid: _command_line(pid) for pid in left}


def _command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"


@pytest.fixture(scope="module", params=BACKENDS)
def shared(request):
    """One interpreter per backend for the tests that leave it usable."""
    with DolsotInterpreter(backend=request.param, timeout=30) as interpreter:
        yield interpreter


# ---- the protocol, directly
def test_it_is_a_code_interpreter_with_a_mutable_tools_dict():
    interpreter = DolsotInterpreter(tools={"one": lambda: 1})
    assert isinstance(interpreter, CodeInterpreter)
    interpreter.tools["two"] = lambda: 2
    assert set(interpreter.tools) == {"one", "two"}
    assert interpreter.output_fields is None
    assert isinstance(DolsotInterpreter.execution_instructions, str)
    interpreter.shutdown()


@pytest.mark.parametrize("kind", BACKENDS)
def test_start_is_idempotent_and_a_shut_down_interpreter_refuses_work(kind):
    interpreter = DolsotInterpreter(backend=kind)
    interpreter.start()
    backend = interpreter.backend
    interpreter.start()
    assert interpreter.backend is backend
    assert interpreter.execute("1 + 1") == "2"
    interpreter.shutdown()
    interpreter.shutdown()
    with pytest.raises(CodeInterpreterError, match="shut down"):
        interpreter.execute("1")


def test_state_persists_and_output_is_prints_then_the_value(shared):
    assert shared.execute("x = 20\nprint('set')") == "set"
    assert shared.execute("print('x is', x)\nx + 1") == "x is 20\n21"
    assert shared.execute("y = 1") is None
    assert shared.execute("   \n") is None


def test_variables_are_bound_before_the_code(shared):
    assert shared.execute("len(context)", variables={"context": "abc"}) == "3"
    # A name the backend keeps for itself (a builtin's) still reaches the code.
    assert shared.execute("input * 2", variables={"input": "ab"}) == "'abab'"


def test_a_syntax_error_is_python_s_syntax_error(shared):
    with pytest.raises(SyntaxError) as caught:
        shared.execute("def f(:\n    pass")
    assert "invalid syntax" in str(caught.value)


def test_a_runtime_error_is_recoverable_and_keeps_the_session(shared):
    shared.execute("kept = 'yes'")
    with pytest.raises(CodeExecutionError) as caught:
        shared.execute("print('before')\n1 / 0")
    assert type(caught.value) is CodeExecutionError
    assert "before" in str(caught.value) and "ZeroDivisionError" in str(caught.value)
    assert shared.execute("kept") == "'yes'"


def test_bad_variable_names_are_the_host_s_mistake(shared):
    with pytest.raises(CodeInterpreterError):
        shared.execute("1", variables={"not a name": 1})
    with pytest.raises(CodeInterpreterError):
        shared.execute("1", variables={"SUBMIT": 1})


def test_submit_without_output_fields_is_the_output_field(shared):
    assert shared.execute("SUBMIT([1, 2])") == FinalOutput({"output": [1, 2]})


@pytest.mark.parametrize("kind", BACKENDS)
def test_submit_is_typed_by_output_fields(kind):
    with DolsotInterpreter(backend=kind) as interpreter:
        interpreter.output_fields = [{"name": "answer", "type": "str"}, {"name": "score", "type": "int"}]
        expected = FinalOutput({"answer": "a", "score": 2})
        assert interpreter.execute("SUBMIT('a', 2)") == expected
        assert interpreter.execute("SUBMIT(score=2, answer='a')") == expected
        with pytest.raises(CodeExecutionError, match=r"SUBMIT\(answer, score\)"):
            interpreter.execute("SUBMIT('a')")
        with pytest.raises(CodeExecutionError, match=r"SUBMIT\(answer, score\)"):
            interpreter.execute("SUBMIT(answer='a')")
        interpreter.output_fields = [{"name": "answer"}]
        assert interpreter.execute("SUBMIT({'k': 1})") == FinalOutput({"answer": {"k": 1}})


@pytest.mark.parametrize("kind", BACKENDS)
def test_tools_take_positional_or_keyword_arguments_and_may_be_async(kind):
    def lookup(key: str, default: str = "-") -> str:
        return {"a": "A"}.get(key, default)

    async def shout(text: str) -> str:
        return text.upper()

    def invoke(**kwargs):  # how RLM wraps a user tool: keywords only, the tool's signature
        return lookup(**kwargs)

    import inspect

    invoke.__signature__ = inspect.signature(lookup)
    with DolsotInterpreter(backend=kind, tools={"lookup": lookup, "shout": shout, "kw": invoke}) as interpreter:
        assert interpreter.execute("lookup('a'), lookup(key='b'), kw('a'), kw('z', 'none')") == (
            "('A', '-', 'A', 'none')"
        )
        assert interpreter.execute("shout('hi')") == "'HI'"
        interpreter.tools["late"] = lambda: "added after start"
        assert interpreter.execute("late()") == "'added after start'"


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_tool_s_exception_is_recoverable(kind):
    def broken():
        raise KeyError("nope")

    with DolsotInterpreter(backend=kind, tools={"broken": broken}) as interpreter:
        with pytest.raises(CodeExecutionError, match="KeyError"):
            interpreter.execute("broken()")
        assert interpreter.execute("'still here'") == "'still here'"


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_timeout_is_recoverable_and_keeps_the_state_from_before(kind):
    with DolsotInterpreter(backend=kind, timeout=0.5) as interpreter:
        interpreter.execute("n = 7")
        with pytest.raises(CodeExecutionError, match="TimeoutError"):
            interpreter.execute("n = 8\nwhile True:\n    pass")
        expected = "7" if kind == "repl" else "8"  # the Repl rolls back; in-process keeps what ran
        assert interpreter.execute("n") == expected


@pytest.mark.parametrize("kind", BACKENDS)
def test_each_thread_gets_its_own_session(kind):
    with DolsotInterpreter(backend=kind) as interpreter:
        seen: dict[int, str | None] = {}

        def work(i: int) -> None:
            interpreter.execute(f"mine = {i}")
            seen[i] = interpreter.execute("mine")

        threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert seen == {i: str(i) for i in range(4)}


def _gone_soon(pids, seconds: float = 10.0) -> bool:
    """Whether every pid is gone within ``seconds``. Repl.reset returns
    before the worker has reaped the session's processes (it kills them,
    then reaps them on its own thread), so their end is awaited, bounded."""
    import time

    deadline = time.monotonic() + seconds
    while any(alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_shutdown_leaves_no_process_behind():
    interpreter = DolsotInterpreter(backend="repl")
    session_pid = int(interpreter.execute("import os\nos.getpid()"))
    snapshots = [pid for pid in children(session_pid) if alive(pid)]
    worker_pid = interpreter.backend.worker_pid
    assert snapshots and all(alive(pid) for pid in (worker_pid, session_pid, *snapshots))
    interpreter.shutdown()
    assert not any(alive(pid) for pid in (worker_pid, session_pid, *snapshots))


def test_a_sandbox_walls_the_repl_in_and_is_refused_in_process():
    with pytest.raises(TypeError, match="Sandbox"):
        DolsotInterpreter(sandbox=object())
    with pytest.raises(ValueError, match="backend='repl'"):
        DolsotInterpreter(backend="inprocess", sandbox=dolsot.Sandbox())
    with pytest.raises(ValueError, match="backend"):
        DolsotInterpreter(backend="wasm")
    interpreter = DolsotInterpreter(sandbox=dolsot.Sandbox())
    try:
        out = interpreter.execute("import os\nprint(os.path.exists('/etc/shadow'), os.getpid())")
        assert str(out).split()[0] == "False", out
    finally:
        interpreter.shutdown()


# ---- dspy.RLM end to end
def lookup(key: str) -> str:
    """Looks a key up in the host's table."""
    return key.upper()


def _script(sleep_step: bool = False) -> dict[str, dict[str, str]]:
    """The model's turns keyed by the iteration RLM prints in its prompt, so
    concurrent forward passes each get the right one."""
    steps = [
        "found = lookup(context)\nprint(found)",
        "summary = llm_query('summarise: ' + context)\nprint(summary)",
        "print(undefined_name)",  # an error the model recovers from
    ]
    if sleep_step:
        steps.append("while True:\n    pass")  # stopped by the timeout
    steps.append("SUBMIT(answer=found + '|' + summary.split()[-1])")
    return {
        f"[[ ## iteration ## ]]\n{i}/8": {"reasoning": f"step {i}", "code": code}
        for i, code in enumerate(steps, start=1)
    }


@contextlib.contextmanager
def _rlm(kind: str, **options):
    """An RLM on a factory this test owns: closed (its worker stopped) on exit."""
    with DolsotInterpreter.factory(backend=kind, **options) as factory:
        yield dspy.RLM(
            "context -> answer",
            max_iters=8,
            tools=[lookup],
            sub_lm=DummyLM({"summarise": {"response": "brief"}}),
            interpreter_factory=factory,
        )


def _check_trajectory(prediction, context: str, timeout_step: bool = False) -> None:
    outputs = [step["output"] for step in prediction.trajectory]
    assert outputs[0] == context.upper()
    assert outputs[1].endswith("brief")
    assert "NameError" in outputs[2]
    if timeout_step:
        assert "TimeoutError" in outputs[3]
    assert prediction.answer == f"{context.upper()}|brief"


@pytest.mark.parametrize("kind", BACKENDS)
def test_rlm_calls_a_tool_and_llm_query_recovers_and_submits(kind):
    with _rlm(kind) as rlm, dspy.context(lm=DummyLM(_script())):
        prediction = rlm(context="alpha")
    _check_trajectory(prediction, "alpha")


@pytest.mark.parametrize("kind", BACKENDS)
def test_rlm_survives_a_timeout_in_the_middle(kind):
    with _rlm(kind, timeout=0.5) as rlm, dspy.context(lm=DummyLM(_script(sleep_step=True))):
        prediction = rlm(context="beta")
    _check_trajectory(prediction, "beta", timeout_step=True)


@pytest.mark.parametrize("kind", BACKENDS)
def test_rlm_under_evaluate_with_four_threads(kind):
    devset = [
        dspy.Example(context=f"item{i}", expected=f"ITEM{i}|brief").with_inputs("context") for i in range(8)
    ]
    threads_seen: set[int] = set()

    def metric(example, prediction, trace=None):
        threads_seen.add(threading.get_ident())
        return prediction.answer == example.expected

    evaluate = dspy.Evaluate(devset=devset, metric=metric, num_threads=4, max_errors=0, provide_traceback=True)
    with _rlm(kind) as rlm, dspy.context(lm=DummyLM(_script())):
        result = evaluate(rlm)
    assert result.score == 100.0
    assert len(threads_seen) > 1


def test_a_shared_interpreter_serves_evaluate_threads_each_their_own_session():
    """The Monty way: one interpreter object shared by every thread."""
    with DolsotInterpreter(backend="repl") as interpreter:
        devset = [dspy.Example(n=i).with_inputs("n") for i in range(8)]

        class Program(dspy.Module):
            def forward(self, n):
                interpreter.execute("total = n", variables={"n": n})
                interpreter.execute("total = total * 10")
                return dspy.Prediction(pid=interpreter.execute("import os\nos.getpid()"),
                                       total=interpreter.execute("total"))

        def metric(example, prediction, trace=None):
            return prediction.total == str(example.n * 10)

        result = dspy.Evaluate(devset=devset, metric=metric, num_threads=4, max_errors=0)(Program())
        assert result.score == 100.0
        assert os.getpid() not in {int(p.pid) for _, p, _ in result.results}


def test_import_dolsot_does_not_import_dspy():
    import subprocess
    import sys

    code = "import sys, dolsot; print('dspy' in sys.modules, 'dolsot.dspy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


@pytest.mark.parametrize("kind", BACKENDS)
def test_a_tool_runs_in_the_context_of_the_execute_that_called_it(kind):
    import contextvars

    setting = contextvars.ContextVar("setting", default="unset")
    with DolsotInterpreter(backend=kind, tools={"read": setting.get}) as interpreter:
        token = setting.set("the caller's")
        try:
            assert interpreter.execute("read()") == "\"the caller's\""
        finally:
            setting.reset(token)


@pytest.mark.parametrize("kind", BACKENDS)
def test_threads_sharing_an_interpreter_each_get_their_own_context_in_tools(kind):
    # Two threads with cells in flight at once: each tool call runs in the
    # context of the execute() whose session made it (a Repl names that
    # session with the call), never in the other thread's.
    import contextvars

    setting = contextvars.ContextVar("setting", default="unset")
    both_in = threading.Barrier(2, timeout=20)

    def read():
        both_in.wait()  # both cells are running now
        return setting.get()

    seen = {}
    with DolsotInterpreter(backend=kind, tools={"read": read}) as interpreter:
        def worker(label):
            setting.set(label)
            seen[label] = interpreter.execute("read()")

        threads = [threading.Thread(target=worker, args=(label,)) for label in ("one", "two")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert seen == {"one": "'one'", "two": "'two'"}


@pytest.mark.parametrize("kind", BACKENDS)
def test_rlm_sub_agents_built_in_the_session_run_on_the_host(kind):
    """RLM's sandbox dspy facade: `import dspy` in the session gives a shim
    whose predictors the host builds and runs (with the LM of dspy.context)."""
    script = [
        {"reasoning": "ask", "code": "import dspy\nqa = dspy.Predict('question -> answer')\nprint(qa(question=context).answer)"},
        {"answer": "from the host"},  # the sub-agent's own LM call
        {"reasoning": "done", "code": "SUBMIT(qa(question=context).answer)"},
        {"answer": "again"},
    ]
    with DolsotInterpreter.factory(backend=kind) as factory, dspy.context(lm=DummyLM(script)):
        rlm = dspy.RLM("context -> answer", max_iters=3, interpreter_factory=factory)
        prediction = rlm(context="q")
    assert prediction.trajectory[0]["output"] == "from the host"
    assert prediction.answer == "again"


def test_a_factory_s_interpreters_share_a_worker_but_not_tools_or_sessions():
    with DolsotInterpreter.factory(backend="repl") as factory:
        first, second = factory(), factory()
        first.tools["who"] = lambda: "first"
        second.tools["who"] = lambda: "second"
        assert first.execute("x = who()\nx") == "'first'"
        assert second.execute("who()") == "'second'"
        with pytest.raises(CodeExecutionError, match="NameError"):
            second.execute("x")
        # The other interpreter's tool is a builtin of the shared worker, but
        # a session of this one may not call it.
        others = first._tool_prefix + "who"
        with pytest.raises(CodeExecutionError, match="PermissionError"):
            second.execute(f"{others}()")
        assert first.backend is second.backend
        worker_pid = first.backend.worker_pid
        runner = int(first.execute("import os\nos.getpid()"))
        session_pids = [runner, *children(runner)]  # the runner and its snapshot
        first.shutdown()
        assert _gone_soon(session_pids)
        assert second.execute("who()") == "'second'"
        second.shutdown()
        assert alive(worker_pid)
    assert not alive(worker_pid)


def test_a_factory_nobody_closes_stops_its_worker_once_nothing_uses_it():
    """dspy.RLM never closes its interpreter_factory. Once the factory is
    gone, its shared worker stops at the last shutdown of an interpreter it
    made, or when the last such interpreter is garbage."""
    factory = DolsotInterpreter.factory(backend="repl")
    first, second = factory(), factory()
    assert first.execute("1") == "1"
    worker = first.backend.worker_pid
    del factory
    assert second.execute("2") == "2" and alive(worker)  # still in use
    first.shutdown()
    assert alive(worker) and second.execute("3") == "3"
    del second
    gc.collect()  # an interpreter with tools is in a reference cycle (its tools' proxies)
    assert not alive(worker)
    with pytest.raises(CodeInterpreterError, match="shut down"):
        first.execute("1")


def test_a_repl_s_worker_starts_off_the_first_cell_s_clock():
    """A timeout is the code's: the worker's start (a second or more on a
    loaded machine) is not on the first cell's clock."""
    with DolsotInterpreter(backend="repl", timeout=0.5) as interpreter:
        interpreter.start()
        assert interpreter.backend.worker_pid > 0  # started before any cell
        assert interpreter.backend.sessions() == []  # and the session it took is gone
        assert interpreter.execute("n = 7\nn") == "7"


@pytest.mark.parametrize("kind", BACKENDS)
def test_dspy_s_facade_source_takes_its_aliases_in_its_own_cell(kind, monkeypatch):
    """The tools' aliases and the renamed token lead dspy's facade source in
    one cell (RLM's first), not a cell of their own ahead of it; a facade
    cell rolled back leaves them to the next cell, which binds them again."""
    from dspy.primitives import facade

    token = {"__dspy_host_token": "t0k3n"}
    probe = ("(__import__('sys')._getframe().f_code.co_filename.split()[1].rstrip('>'), __dspy_host_token,"
             " '_dolsot_variable_dspy_host_token' in globals(), globals()['_dspy_ping']())")
    with DolsotInterpreter.factory(backend=kind) as factory:
        interpreter = factory()
        interpreter.tools["_dspy_ping"] = lambda: "pong"  # looked up in globals(), as the facade does
        assert interpreter.execute(facade.SHIM_SETUP, variables=token) is None
        # The facade was cell 1: the probe is cell 2.
        assert interpreter.execute(probe) == "('2', 't0k3n', False, 'pong')"
        assert interpreter.execute("import dspy\ndspy.__name__") == "'dspy'"
        interpreter.shutdown()

    # A facade cell rolled back (its time ran out) took its aliases with it.
    monkeypatch.setattr(facade, "SHIM_SETUP", "while True:\n    pass")
    with DolsotInterpreter.factory(backend=kind, timeout=1) as factory:
        failing = factory()
        failing.tools["_dspy_ping"] = lambda: "pong"
        with pytest.raises(CodeInterpreterError, match="(?i)timeout|timed out|time ran out"):
            failing.execute(facade.SHIM_SETUP, variables=token)
        assert failing.execute("globals()['_dspy_ping']()") == "'pong'"
        failing.shutdown()
