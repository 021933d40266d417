"""dolsot as a smolagents executor: ``DolsotExecutor`` runs the code of a
``smolagents.CodeAgent`` (``CodeAgent(executor=DolsotExecutor())``) in one
dolsot session that keeps its state from one step to the next.

Needs the extra ``dolsot[smolagents]`` (the pinned smolagents); ``import
dolsot`` never imports this module. The agent's tools stay in the host and
are called as dolsot host tools: no tool's code crosses into the session
(smolagents' remote executors ship the tools' source instead). smolagents'
``final_answer`` is dolsot's final-answer function, ``send_variables`` binds
``variables=``, and errors follow smolagents' local executor: an
``InterpreterError`` (a timeout: ``ExecutionTimeoutError``) whose text the
agent shows the model, which may recover at its next step.
"""

from __future__ import annotations

import builtins
import contextvars
import itertools
import keyword
import threading
import uuid
import weakref
from typing import Any, Callable, Mapping

try:
    from smolagents.local_python_executor import (
        CodeOutput,
        ExecutionTimeoutError,
        InterpreterError,
        PythonExecutor,
    )
except ImportError as error:  # pragma: no cover - exercised only without smolagents
    raise ImportError(
        f"dolsot.smolagents needs smolagents ({error}); install it with: pip install 'dolsot[smolagents]'"
    ) from error

import dolsot
from dolsot._tools import calling_session
from dolsot.errors import DolsotError

__all__ = ["DolsotExecutor"]

# smolagents' final-answer tool's name: dolsot's final-answer function.
_FINAL = "final_answer"
_BACKENDS = ("repl", "inprocess")
# Options the executor sets itself (tools come from send_tools).
_OWN_OPTIONS = ("tools", "final")
# The names a backend refuses for a tool or a variable besides non-identifiers
# and keywords (core/cell_inputs.cc): dunders and the builtins' public names.
# Such a tool is bound under a private name and aliased as a global; such a
# variable is bound under a private name and renamed in the session.
_BUILTIN_NAMES = frozenset(name for name in dir(builtins) if not name.startswith("__"))
# How long a Repl's worker may take to start (off the first step's clock).
_WORKER_START_SECONDS = 120.0
# A backend's tools dict is replaced whole; executors sharing a backend
# replace their own part under this lock, so none loses another's.
_TOOLS_LOCK = threading.Lock()
_EXECUTOR_NUMBERS = itertools.count(1)


class DolsotExecutor(PythonExecutor):
    """A smolagents ``PythonExecutor`` on a dolsot backend.

    ``DolsotExecutor(*, backend="repl", sandbox=None, timeout=None,
    **backend_options)``. ``backend``: ``"repl"`` (a forked worker process:
    hard timeouts with rollback, a crash costs only the step; ``sandbox=`` a
    ``dolsot.Sandbox`` walls it in) or ``"inprocess"`` (this interpreter:
    fastest, no isolation, cooperative timeouts; it refuses ``sandbox=``).
    ``timeout``: seconds per step (dolsot's default when None).
    ``backend_options`` go to ``dolsot.Repl`` / ``dolsot.InProcessSession``
    as they are (``max_output=``, smolagents' ``max_print_outputs_length``;
    ``gate=``, ``inject=``, ``unpickle=``...).

    ``backend`` may also be a ``dolsot.Repl`` or ``dolsot.InProcessSession``
    made with ``final="final_answer"``, shared by several executors (one warm
    worker for many agents): the caller owns and closes it. Each executor
    then has its own session and binds its tools under names of its own; in
    a Repl a session calling another executor's tool gets ``PermissionError``.

    One executor is one session (one agent's state); its steps run one at a
    time (a lock), from any thread. ``cleanup()`` (``CodeAgent.cleanup()``,
    ``with CodeAgent(...)``) closes the backend it made (a shared one: ends
    its session and removes its tools); so does the executor becoming
    garbage.
    """

    def __init__(
        self,
        *,
        backend: str | dolsot.Repl | dolsot.InProcessSession = "repl",
        sandbox: Any = None,
        timeout: float | None = None,
        **backend_options: Any,
    ) -> None:
        shared = isinstance(backend, (dolsot.Repl, dolsot.InProcessSession))
        if shared:
            if sandbox is not None or backend_options:
                given = ", ".join(["sandbox"] * (sandbox is not None) + sorted(backend_options))
                raise TypeError(f"a backend given as a Repl or InProcessSession is configured already: "
                                f"pass {given} to its constructor")
            if backend.final != _FINAL:
                raise ValueError(f"a shared backend needs final={_FINAL!r} (smolagents' final-answer tool), "
                                 f"not final={backend.final!r}")
        elif not isinstance(backend, str) or backend not in _BACKENDS:
            raise ValueError(f"backend must be 'repl', 'inprocess', or a dolsot.Repl or dolsot.InProcessSession "
                             f"to share, not {backend!r}")
        own = sorted(set(backend_options) & set(_OWN_OPTIONS))
        if own:
            raise TypeError(
                f"DolsotExecutor sets {', '.join(own)} itself: the agent's tools come from send_tools, "
                f"and the final-answer function is smolagents' {_FINAL}"
            )
        if sandbox is not None:
            if backend != "repl":
                raise dolsot.Unsupported(
                    "sandbox= needs backend='repl': an in-process session runs on a thread of the "
                    "host's own process, which no kernel wall can separate from the host"
                )
            if not isinstance(sandbox, dolsot.Sandbox):
                raise TypeError(f"sandbox must be a dolsot.Sandbox, not {type(sandbox).__name__}")
            backend_options["sandbox"] = sandbox
        if shared:
            self.backend_kind = "repl" if isinstance(backend, dolsot.Repl) else "inprocess"
        else:
            self.backend_kind = backend
        self.timeout = timeout
        # What CodeAgent reads when a step fails: the output the step printed
        # before its error (smolagents' executors keep it here too). The
        # session's own variables live in the session, not in this dict.
        self.state: dict[str, Any] = {"_print_outputs": ""}
        self._session_id = f"smolagents-{uuid.uuid4().hex[:12]}"
        self._host = _ToolHost(self._session_id)
        self._lock = threading.Lock()  # one step (or setup cell) at a time
        self._closed = False
        self._started = False
        self._aliased: set[str] = set()
        self._owned = not shared
        # A shared backend's tools are named per executor: _dolsot_smol<n>_<name>.
        self._tool_prefix = "" if self._owned else f"_dolsot_smol{next(_EXECUTOR_NUMBERS)}_"
        self._backend: Any = backend if shared else _make_backend(self.backend_kind, timeout, backend_options)
        # Garbage without cleanup(): the backend still closes, or its part is
        # released (nothing the backend holds refers back to this executor).
        if self._owned:
            self._finalizer = weakref.finalize(self, _close_quietly, self._backend)
        else:
            self._finalizer = weakref.finalize(self, _release_quietly, self._backend, self._tool_prefix,
                                               self._session_id)

    # ---- lifecycle
    @property
    def backend(self) -> Any:
        """The dolsot backend (``Repl`` or ``InProcessSession``); None after
        ``cleanup``."""
        return self._backend

    @property
    def session_id(self) -> str:
        """The id of this executor's session in its backend."""
        return self._session_id

    def cleanup(self) -> None:
        """Stops the backend it made (for a Repl, its worker process) and ends
        the session; a shared backend stays open, without this executor's
        session and tools. Idempotent; ``CodeAgent.cleanup()`` calls it."""
        backend, self._backend = self._backend, None
        self._closed = True
        if backend is None:
            return
        self._finalizer.detach()
        if self._owned:
            backend.close()
        else:
            _release(backend, self._tool_prefix, self._session_id)

    delete = cleanup  # the name smolagents' Docker and Modal executors also answer to

    def __enter__(self) -> DolsotExecutor:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.cleanup()

    # ---- smolagents' PythonExecutor
    def send_tools(self, tools: dict[str, Any]) -> None:
        """Makes ``tools`` (name -> smolagents ``Tool`` or any callable; managed
        agents too) the session's host tools from the next step on. ``final_answer``
        becomes the final-answer function: the value a step hands it goes
        through the tool (in the host) and ends the run."""
        if not isinstance(tools, Mapping):
            raise TypeError(f"tools must be a dict of names to tools, not {type(tools).__name__}")
        bad = [name for name in tools if not isinstance(name, str) or not name.isidentifier()
               or keyword.iskeyword(name)]
        if bad:
            raise ValueError(f"tool names must be Python identifiers that are not keywords; invalid: {bad!r}")
        not_callable = [name for name, tool in tools.items() if not callable(tool)]
        if not_callable:
            raise TypeError(f"tools must be callable; not callable: {not_callable!r}")
        with self._lock:
            backend = self._ready()
            self._host.tools = dict(tools)
            wanted = {self._engine_name(name): self._host.proxy(name) for name in tools if name != _FINAL}
            with _TOOLS_LOCK:
                others = {} if self._owned else {
                    name: tool for name, tool in backend.tools.items() if not name.startswith(self._tool_prefix)}
                backend.tools = {**others, **wanted}
            self._bind_aliases()

    def send_variables(self, variables: dict[str, Any]) -> None:
        """Binds ``variables`` in the session now (CodeAgent sends its state,
        the ``additional_args`` of ``run``, before the first step)."""
        if not isinstance(variables, Mapping):
            raise TypeError(f"variables must be a dict, not {type(variables).__name__}")
        if not variables:
            return
        bad = [name for name in variables if not isinstance(name, str) or not name.isidentifier()
               or keyword.iskeyword(name) or name == "__builtins__"]
        if bad:
            raise ValueError(f"variable names must be Python identifiers that are not keywords; invalid: {bad!r}")
        with self._lock:
            self._ready()
            engine = {name: _private_name("variable", name) for name in variables}
            code = "\n".join(f"{name} = {private}\ndel {private}"
                             for name, private in engine.items() if private != name) or "pass"
            self._setup(code, {engine[name]: value for name, value in variables.items()}, "send the variables")

    def __call__(self, code_action: str) -> CodeOutput:
        """Runs one step's code in the session: ``CodeOutput(output, logs,
        is_final_answer)`` with ``output`` the trailing expression's repr (or
        the final answer, as data) and ``logs`` what the step printed."""
        if not isinstance(code_action, str):
            raise TypeError(f"code must be a str, not {type(code_action).__name__}")
        with self._lock:
            backend = self._ready()
            self.state["_print_outputs"] = ""
            if not code_action.strip():
                return CodeOutput(output=None, logs="", is_final_answer=False)
            self._bind_aliases()
            self._host.context = contextvars.copy_context()
            try:
                result = self._run(backend, code_action, {}, None)
            finally:
                self._host.context = None
            return self._outcome(result)

    # ---- inside
    def _ready(self) -> Any:
        """The backend, its worker started (off any step's clock); raises
        once cleaned up. Called with the lock held."""
        backend = self._backend
        if self._closed or backend is None:
            raise RuntimeError("this DolsotExecutor was cleaned up; create a new one for a new session")
        if not self._started:
            self._started = True
            if self.backend_kind == "repl":
                self._setup("None", {}, "start its worker", timeout=_WORKER_START_SECONDS)
        return backend

    def _bind_aliases(self) -> None:
        """Binds as globals the tools bound under a private name (a builtin's
        name, a dunder), once per session. Called with the lock held."""
        missing = [name for name in self._host.tools if name != _FINAL and name not in self._aliased
                   and self._engine_name(name) != name]
        if missing:
            self._setup("\n".join(f"{n} = {self._engine_name(n)}" for n in missing), {}, "bind the tools")
            self._aliased.update(missing)

    def _engine_name(self, name: str) -> str:
        if self._tool_prefix:
            return self._tool_prefix + name.lstrip("_")
        return _private_name("tool", name)

    def _run(self, backend: Any, code: str, variables: dict[str, Any], timeout: float | None,
             what: str = "run the code") -> Any:
        options: dict[str, Any] = {"variables": variables} if variables else {}
        if timeout is None and not self._owned:
            timeout = self.timeout  # a shared backend's own default is not this executor's
        if timeout is not None:
            options["timeout"] = timeout
        try:
            return backend.run(self._session_id, code, **options)
        except dolsot.SessionBusy as error:
            raise InterpreterError(
                f"the dolsot session cannot take code any more (an earlier step still runs in C code "
                f"after its timeout): {error}"
            ) from error
        except (DolsotError, TypeError, ValueError) as error:
            raise InterpreterError(f"dolsot could not {what}: {error}") from error

    def _setup(self, code: str, variables: dict[str, Any], what: str, timeout: float | None = None) -> None:
        result = self._run(self._backend, code, variables, timeout, what)
        if not result.ok:
            raise InterpreterError(f"dolsot could not {what} in the session: {result.error}")

    def _outcome(self, result: Any) -> CodeOutput:
        Outcome = dolsot.Outcome
        logs = result.stdout or ""
        self.state["_print_outputs"] = logs
        outcome = result.outcome
        if outcome == Outcome.OK:
            if result.has_returned:
                return CodeOutput(output=self._final(result.returned), logs=logs, is_final_answer=True)
            return CodeOutput(output=result.value, logs=logs, is_final_answer=False)
        error = (result.error or result.error_type or "the step failed").rstrip("\n")
        if outcome == Outcome.TIMEOUT:
            raise ExecutionTimeoutError(f"Code execution failed: {error}")
        if outcome == Outcome.WORKER_LOST:
            # The session's state is gone: the next step starts afresh, and
            # the model is told so.
            self._aliased.clear()
            self._started = False
            try:
                self._backend.reset(self._session_id)
            except (DolsotError, AttributeError):  # AttributeError: cleaned up meanwhile
                pass
            raise InterpreterError(
                f"Code execution failed: {error}\nThe session was lost: the variables, imports and "
                "functions of earlier steps are gone; the next step starts in a fresh session."
            )
        if outcome == Outcome.ERROR and result.error_type in ("SyntaxError", "IndentationError", "TabError"):
            raise InterpreterError(f"Code parsing failed: {error}")
        raise InterpreterError(f"Code execution failed: {error}")

    def _final(self, returned: Any) -> Any:
        """The step's final answer: what it handed ``final_answer``, through
        the agent's final-answer tool (run in the host, in the step's
        context), as smolagents' executors do. ``final_answer(answer=x)``
        arrives as ``{"answer": x}``, which smolagents' ``Tool`` takes as
        keywords, as it does ``final_answer({"answer": x})``."""
        tool = self._host.tools.get(_FINAL)
        if tool is None:
            return returned
        try:
            return contextvars.copy_context().run(tool, returned)
        except Exception as error:  # noqa: BLE001 - shown to the model, as a step's error
            raise InterpreterError(
                f"Code execution failed: {_FINAL} raised {type(error).__name__}: {error}"
            ) from error


class _ToolHost:
    """The executor's tools and the context of the step running, as the
    backend's tool proxies see them. Holds no reference to the executor or
    the backend, so an executor nobody cleans up is still garbage."""

    def __init__(self, session_id: str) -> None:
        self.session_id = session_id
        self.tools: dict[str, Any] = {}
        self.context: contextvars.Context | None = None
        self._proxies: dict[str, Callable[..., Any]] = {}

    def proxy(self, name: str) -> Callable[..., Any]:
        """One proxy per name, calling ``tools[name]`` as it is at call time,
        in a copy of the calling step's contextvars context."""
        proxy = self._proxies.get(name)
        if proxy is not None:
            return proxy

        def tool(*args: Any, **kwargs: Any) -> Any:
            calling = calling_session.get()
            if calling is not None and calling != self.session_id:
                # A Repl shared by executors: only this one's session may
                # call its tools (every session sees every tool's name).
                raise PermissionError(f"the host tool {name!r} belongs to another agent's session")
            function = self.tools.get(name)
            if function is None:
                raise NameError(f"the host tool {name!r} was removed")
            context = self.context
            if context is None:  # a call from a thread the step left running
                return function(*args, **kwargs)
            return context.copy().run(function, *args, **kwargs)

        tool.__name__ = tool.__qualname__ = name
        self._proxies[name] = tool
        return tool


def _make_backend(kind: str, timeout: float | None, backend_options: Mapping[str, Any]) -> Any:
    options: dict[str, Any] = {"timeout": timeout, "final": _FINAL}
    if kind == "inprocess":
        return dolsot.InProcessSession(**options, **backend_options)
    # An agent's session lives as long as its executor: nothing to make
    # durable (as dolsot.dspy). A timeout or a crash in a step still rolls
    # back to the snapshot.
    options["store"] = dolsot.store.MemoryStore()
    options["checkpoint"] = "off"
    options.update(backend_options)
    return dolsot.Repl(**options)


def _close_quietly(backend: Any) -> None:
    try:
        backend.close()
    except Exception:  # noqa: BLE001 - at garbage collection or exit: nothing to tell
        pass


def _release(backend: Any, prefix: str, session_id: str) -> None:
    """A shared backend without one executor's tools and session."""
    try:
        with _TOOLS_LOCK:
            backend.tools = {name: tool for name, tool in backend.tools.items() if not name.startswith(prefix)}
        backend.reset(session_id)
    except DolsotError:
        pass  # closed by its owner already


def _release_quietly(backend: Any, prefix: str, session_id: str) -> None:
    try:
        _release(backend, prefix, session_id)
    except Exception:  # noqa: BLE001 - at garbage collection or exit: nothing to tell
        pass


def _private_name(kind: str, name: str) -> str:
    """The name a tool or variable is bound under in the backend: its own, or
    ``_dolsot_<kind>_<name>`` when the backend refuses that name."""
    if name.isascii() and not name.startswith("__") and name not in _BUILTIN_NAMES:
        return name
    return f"_dolsot_{kind}_{name.lstrip('_')}"
