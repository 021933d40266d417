"""dolsot.smolagents.DolsotExecutor: smolagents' PythonExecutor on both
backends, directly and under smolagents' own CodeAgent driven by a scripted
model (a host tool, state across steps, an error the model recovers from, a
timeout, the final answer, send_variables), and docs/smolagents.md's python
blocks. smolagents is a pinned test dependency: these tests never skip."""

from __future__ import annotations

import contextvars
import gc
import os
import re
import threading
from pathlib import Path

import pytest
import smolagents
from smolagents import CodeAgent, FinalAnswerTool, Model, tool
from smolagents.local_python_executor import (
    CodeOutput,
    ExecutionTimeoutError,
    InterpreterError,
    PythonExecutor,
)
from smolagents.models import ChatMessage, MessageRole

import dolsot
from dolsot.smolagents import DolsotExecutor
from process_tree import alive, children

pytestmark = pytest.mark.timeout(120)

BACKENDS = ["repl", "inprocess"]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def no_process_outlives_its_test():
    """Every process a test starts (a Repl's worker, a ty server) is gone when
    it ends. A module-scoped fixture's are set up before this runs, so they
    count as there before."""
    me = os.getpid()
    before = {pid for pid in children(me, every_thread=True) if alive(pid)}
    yield
    gc.collect()
    left = {pid for pid in children(me, every_thread=True) if alive(pid)} - before
    assert not left, left


class ScriptedModel(Model):
    """A smolagents Model that answers each call with the next fixed code
    step, in CodeAgent's format, and keeps the messages it was shown."""

    def __init__(self, steps: list[str]) -> None:
        super().__init__(model_id="scripted")
        self.steps = list(steps)
        self.prompts: list[str] = []

    def generate(self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kwargs):
        self.prompts.append("\n".join(_text(message) for message in messages))
        if not self.steps:
            raise AssertionError("the agent asked for more steps than the script has")
        code = self.steps.pop(0)
        return ChatMessage(role=MessageRole.ASSISTANT, content=f"Thought: next step.\n<code>\n{code}\n</code>")


def _text(message) -> str:
    content = message.content if hasattr(message, "content") else message["content"]
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return str(content or "")


def _agent(model: ScriptedModel, executor: DolsotExecutor, tools=()) -> CodeAgent:
    return CodeAgent(tools=list(tools), model=model, executor=executor, verbosity_level=0, max_steps=8)


@pytest.fixture(scope="module", params=BACKENDS)
def shared(request):
    """One executor per backend for the tests that leave it usable."""
    with DolsotExecutor(backend=request.param, timeout=30) as executor:
        executor("None")  # its worker and ty server start here, not in a test
        yield executor


# ---- the executor, directly
def test_it_is_a_python_executor_with_smolagents_cleanup_hooks():
    executor = DolsotExecutor(backend="inprocess")
    assert isinstance(executor, PythonExecutor)
    assert isinstance(executor.backend, dolsot.InProcessSession)
    executor.cleanup()
    executor.cleanup()
    assert executor.backend is None
    with pytest.raises(RuntimeError, match="cleaned up"):
        executor("1")
    assert DolsotExecutor.delete is DolsotExecutor.cleanup


def test_state_persists_output_is_the_value_and_logs_what_was_printed(shared):
    first = shared("x = 20\nprint('set')")
    assert first == CodeOutput(output=None, logs="set\n", is_final_answer=False)
    second = shared("print('x is', x)\nx + 1")
    assert second == CodeOutput(output="21", logs="x is 20\n", is_final_answer=False)
    assert shared("   \n") == CodeOutput(output=None, logs="", is_final_answer=False)


def test_a_syntax_error_is_an_interpreter_error_naming_it(shared):
    with pytest.raises(InterpreterError, match="Code parsing failed") as caught:
        shared("def f(:\n    pass")
    assert "SyntaxError" in str(caught.value)


def test_a_runtime_error_keeps_the_session_and_what_it_printed(shared):
    shared("kept = 'yes'")
    with pytest.raises(InterpreterError, match="Code execution failed") as caught:
        shared("print('before')\n1 / 0")
    assert "ZeroDivisionError: division by zero" in str(caught.value)
    assert shared.state["_print_outputs"] == "before\n"  # what CodeAgent shows beside the error
    assert shared("kept").output == "'yes'"
    assert shared.state["_print_outputs"] == ""


def test_variables_are_bound_in_the_session(shared):
    shared.send_variables({"context": "abc", "input": "builtin's name", "__token": 7})
    assert shared("len(context), input, __token").output == "(3, \"builtin's name\", 7)"
    shared.send_variables({})
    with pytest.raises(ValueError, match="not a name"):
        shared.send_variables({"not a name": 1})
    with pytest.raises(TypeError, match="dict"):
        shared.send_variables([("x", 1)])
    if shared.backend_kind == "repl":  # a Repl pickles what it sends: the host is told, not the model
        with pytest.raises(InterpreterError, match="could not send the variables.*'lock'.*cannot be pickled"):
            shared.send_variables({"lock": threading.Lock()})


def test_a_final_answer_ends_the_step_with_the_value_as_data(shared):
    shared.send_tools({"final_answer": FinalAnswerTool()})
    out = shared("print('done')\nfinal_answer({'rows': [1, 2]})")
    assert out == CodeOutput(output={"rows": [1, 2]}, logs="done\n", is_final_answer=True)
    # final_answer(answer=x) and final_answer(x) give x, as smolagents' Tool does.
    assert shared("final_answer(answer=3)").output == 3
    with pytest.raises(InterpreterError, match="final_answer raised TypeError"):
        shared("final_answer()")
    if shared.backend_kind == "repl":  # what crosses into the host is plain data (unpickle="safe")
        with pytest.raises(InterpreterError, match="UnpicklingError.*not allowed to cross"):
            shared("class Mine: pass\nfinal_answer(Mine())")


@pytest.mark.parametrize("kind", BACKENDS)
def test_bad_options_are_refused_at_construction(kind):
    with pytest.raises(ValueError, match="backend must be"):
        DolsotExecutor(backend="docker")
    with pytest.raises(TypeError, match="final"):
        DolsotExecutor(backend=kind, final="SUBMIT")
    with pytest.raises(TypeError, match="tools"):
        DolsotExecutor(backend=kind, tools={"f": print})
    with pytest.raises(TypeError, match="max_output"):
        DolsotExecutor(backend=kind, max_output="big")
    if kind == "inprocess":
        with pytest.raises(dolsot.Unsupported, match="backend='repl'"):
            DolsotExecutor(backend=kind, sandbox=dolsot.Sandbox())
    else:
        with pytest.raises(TypeError, match="dolsot.Sandbox"):
            DolsotExecutor(backend=kind, sandbox=object())


@pytest.mark.parametrize("kind", BACKENDS)
def test_steps_from_several_threads_run_one_at_a_time_each_with_its_caller_s_context(kind):
    caller = contextvars.ContextVar("caller", default=None)
    seen: dict[int, list[str]] = {}

    def work(executor: DolsotExecutor, number: int) -> None:
        caller.set(f"thread-{number}")
        seen[number] = [executor("counter += 1\nprint(whose(), end='')").logs for _ in range(5)]

    with DolsotExecutor(backend=kind, timeout=30) as executor:
        executor.send_tools({"whose": caller.get})
        executor("counter = 0")
        threads = [threading.Thread(target=work, args=(executor, i)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert executor("counter").output == "20"
    assert seen == {i: [f"thread-{i}"] * 5 for i in range(4)}


def test_bad_tools_are_refused(shared):
    with pytest.raises(ValueError, match="not-a-name"):
        shared.send_tools({"not-a-name": print})
    with pytest.raises(TypeError, match="not callable"):
        shared.send_tools({"value": 3})


@pytest.mark.parametrize("kind", BACKENDS)
def test_tools_run_in_the_host_in_the_step_s_context_and_their_errors_are_recoverable(kind):
    request_id = contextvars.ContextVar("request_id", default=None)
    calls = []

    def lookup(key: str) -> str:
        calls.append((os.getpid(), request_id.get()))
        if key == "missing":
            raise KeyError(f"no row {key!r}")
        return key.upper()

    def open(name: str) -> str:  # a builtin's name: bound under another, aliased
        return f"opened {name}"

    with DolsotExecutor(backend=kind, timeout=30) as executor:
        executor.send_tools({"lookup": lookup, "open": open})
        request_id.set("req-1")
        assert executor("lookup('a'), open('f')").output == "('A', 'opened f')"
        with pytest.raises(InterpreterError, match="no row 'missing'"):
            executor("lookup('missing')")
        session_pid = int(executor("import os\nos.getpid()").output)
        assert (session_pid != os.getpid()) == (kind == "repl")  # the code ran there, the tool here
        executor.send_tools({"open": open})
        with pytest.raises(InterpreterError, match="lookup"):
            executor("lookup('b')")
    assert calls == [(os.getpid(), "req-1"), (os.getpid(), "req-1")]


def test_an_executor_nobody_cleans_up_stops_its_worker_once_garbage():
    executor = DolsotExecutor(backend="repl")
    worker = int(executor("import os\nos.getppid()").output)
    assert alive(worker)
    del executor
    gc.collect()
    assert not alive(worker)


def test_a_sandboxed_executor_walls_the_code_in_and_still_calls_host_tools(tmp_path):
    secret = tmp_path / "host-only.txt"
    secret.write_text("host")
    with DolsotExecutor(sandbox=dolsot.Sandbox(), timeout=30) as executor:
        executor.send_tools({"host_pid": os.getpid})
        out = executor(f"import os\nprint(os.path.exists({str(secret)!r}))\nhost_pid()")
    assert out.logs == "False\n"
    assert out.output == str(os.getpid())


@pytest.mark.parametrize("kind", BACKENDS)
def test_executors_sharing_a_backend_have_their_own_sessions_and_tools(kind):
    if kind == "repl":
        backend = dolsot.Repl(store=dolsot.store.MemoryStore(), final="final_answer", timeout=30)
    else:
        backend = dolsot.InProcessSession(final="final_answer", timeout=30)
    with backend:
        first, second = DolsotExecutor(backend=backend), DolsotExecutor(backend=backend, timeout=30)
        first.send_tools({"name": lambda: "first", "final_answer": FinalAnswerTool()})
        second.send_tools({"name": lambda: "second"})
        first("mine = name()")
        second("mine = name()")
        assert (first("mine").output, second("mine").output) == ("'first'", "'second'")
        assert first("final_answer(mine)").output == "first"
        if kind == "repl":
            # Every session sees each executor's tools by name; only the
            # executor's own session may call them.
            engine_names = sorted(n for n in backend.tools if n.endswith("_name"))
            assert len(engine_names) == 2
            out = first(
                f"seen = []\nfor f in ({', '.join(engine_names)}):\n    try:\n        seen.append(f())\n"
                "    except PermissionError as error:\n        seen.append(str(error))\nsorted(seen)")
            assert out.output == repr(sorted(["first", "the host tool 'name' belongs to another agent's session"]))
        sessions = {info.id for info in backend.sessions()}
        assert {first.session_id, second.session_id} <= sessions
        first.cleanup()
        assert first.backend is None
        assert len(backend.tools) == 1 and second("name()").output == "'second'"  # still open, still its own
        assert first.session_id not in {info.id for info in backend.sessions()}
        second.cleanup()
        assert backend.tools == {}
    with pytest.raises(ValueError, match="final='final_answer'"):
        DolsotExecutor(backend=dolsot.InProcessSession(final="SUBMIT"))
    with pytest.raises(TypeError, match="max_output"):
        DolsotExecutor(backend=dolsot.InProcessSession(final="final_answer"), max_output=10)


# ---- smolagents' CodeAgent, end to end
@tool
def where_am_i() -> dict:
    """Where this tool runs: the process id and whether it sees the host's objects."""
    HOST_SEEN.append(threading.current_thread().name)
    return {"pid": os.getpid(), "host_calls": len(HOST_SEEN)}


HOST_SEEN: list[str] = []


@pytest.mark.parametrize("kind", BACKENDS)
def test_agent_calls_a_host_tool_keeps_state_across_steps_and_answers(kind):
    HOST_SEEN.clear()
    model = ScriptedModel([
        "seen = where_am_i()\nprint('tool says', seen)",
        "seen['again'] = where_am_i()['host_calls']\nprint(sorted(seen))",
        "final_answer(seen)",
    ])
    with _agent(model, DolsotExecutor(backend=kind, timeout=30), tools=[where_am_i]) as agent:
        answer = agent.run("Where does the tool run?")
    assert answer == {"pid": os.getpid(), "host_calls": 1, "again": 2}
    assert len(HOST_SEEN) == 2  # the host's own list: the tool ran here
    assert "['again', 'host_calls', 'pid']" in model.prompts[2]  # step 3 saw step 2's print


@pytest.mark.parametrize("kind", BACKENDS)
def test_agent_sees_an_error_and_recovers_at_the_next_step(kind):
    model = ScriptedModel([
        "total = 10\nprint('about to fail')\ntotal / 0",
        "final_answer(total + 1)",
    ])
    with _agent(model, DolsotExecutor(backend=kind, timeout=30)) as agent:
        answer = agent.run("Divide.")
    assert answer == 11
    shown = model.prompts[1]
    assert "Execution logs:\nabout to fail" in shown
    assert re.search(r"Error:\nCode execution failed: Traceback.*ZeroDivisionError: division by zero", shown, re.S)


@pytest.mark.parametrize("kind", BACKENDS)
def test_agent_survives_a_step_that_times_out_with_the_state_from_before(kind):
    model = ScriptedModel([
        "kept = 41",
        "while True:\n    pass",
        "final_answer(kept + 1)",
    ])
    with _agent(model, DolsotExecutor(backend=kind, timeout=2)) as agent:
        answer = agent.run("Loop, then answer.")
    assert answer == 42
    assert re.search(r"Error:\nCode execution failed: TimeoutError: the cell ran past its 2 s timeout", model.prompts[2])


@pytest.mark.parametrize("kind", BACKENDS)
def test_agent_run_s_additional_args_arrive_through_send_variables(kind):
    class Shout(FinalAnswerTool):
        def forward(self, answer):
            return f"{answer}!".upper()  # the agent's own final-answer tool runs, in the host

    model = ScriptedModel(["final_answer(answer=question + ' ' + str(len(rows)))"])
    with CodeAgent(tools=[], model=model, executor=DolsotExecutor(backend=kind, timeout=30),
                   verbosity_level=0) as agent:
        agent.tools["final_answer"] = Shout()
        answer = agent.run("Answer.", additional_args={"question": "how many", "rows": [1, 2, 3]})
    assert answer == "HOW MANY 3!"


# ---- docs/smolagents.md
def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", path.read_text(), re.S | re.M)


def test_the_docs_python_blocks_run_with_a_scripted_model(monkeypatch, capsys, tmp_path):
    blocks = _python_blocks(ROOT / "docs" / "smolagents.md")
    assert blocks
    model = ScriptedModel([
        "gap = population('Paris') - population('Lyon')\nprint(gap)",
        "final_answer(gap)",
    ])
    # The docs' model needs a network and a token; the rest runs as written.
    monkeypatch.setattr(smolagents, "InferenceClientModel", lambda *args, **kwargs: model)
    printed = []
    for number, block in enumerate(blocks, 1):
        # From a file, as pasted into one: smolagents' @tool reads its function's source.
        script = tmp_path / f"smolagents_md_block_{number}.py"
        script.write_text(block)
        exec(compile(block, str(script), "exec"), {"__name__": "__main__"})
        printed.append(capsys.readouterr().out.strip().splitlines())
    assert len(printed) == 3
    assert printed[0][-1] == "1580400"  # the agent's answer, as the block prints it
    assert not model.steps
    assert printed[1] == ["[1, 2, 3]", " 3"]
    assert printed[2] == ["'left' 'right'"]
