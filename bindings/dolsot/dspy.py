"""dolsot as a DSPy CodeInterpreter: ``DolsotInterpreter`` runs the code of
``dspy.RLM`` (and any module taking an ``interpreter_factory``) in dolsot sessions.

Needs the extra ``dolsot[dspy]`` (the pinned dspy); ``import dolsot`` never
imports this module. One interpreter owns one backend (a ``Repl`` or an
``InProcessSession``) and gives each thread that calls it a session of its own.
"""

from __future__ import annotations

import asyncio
import builtins
import contextvars
import inspect
import itertools
import keyword
import sys
import threading
import uuid
import weakref
from typing import Any, Callable, Mapping

try:
    from dspy.primitives.code_interpreter import (
        CodeExecutionError,
        CodeInterpreterError,
        FinalOutput,
    )
except ImportError as error:  # pragma: no cover - exercised only without dspy
    raise ImportError(
        f"dolsot.dspy needs dspy ({error}); install it with: pip install 'dolsot[dspy]'"
    ) from error

import dolsot
from dolsot.errors import DolsotError
from dolsot._tools import calling_session

__all__ = ["DolsotInterpreter", "DolsotInterpreterFactory"]

# The final-answer function the model calls; RLM reserves the name.
_FINAL = "SUBMIT"
# dspy's sandbox facade finds its host tools in the session's globals()
# (``_facade_shim.py``: ``globals()[name](**kw)``), while a backend binds tools
# as the session's builtins: tools with these prefixes are also aliased as
# globals, once per session.
_GLOBAL_TOOL_PREFIXES = ("__dspy", "_dspy")
# The names a backend refuses for a tool or a variable besides non-identifiers
# and keywords (core/cell_inputs.cc): dunders and the builtins' public names.
# Such a tool is bound under a private name and aliased as a global; such a
# variable is bound under a private name and renamed by a cell of its own.
_BUILTIN_NAMES = frozenset(name for name in dir(builtins) if not name.startswith("__"))
_BACKENDS = ("repl", "inprocess")


class DolsotInterpreter:
    """A dspy ``CodeInterpreter`` on a dolsot backend.

    ``DolsotInterpreter(tools=None, output_fields=None, *, backend="repl",
    sandbox=None, timeout=None, max_output=None, **backend_options)``.
    ``backend``: ``"repl"`` (forked worker processes: hard timeouts with
    rollback, a crash costs only the cell) or ``"inprocess"`` (this
    interpreter: fastest, no isolation, cooperative timeouts).
    ``backend_options`` go to ``dolsot.Repl`` / ``dolsot.InProcessSession``
    as they are (``inject=``, ``gate=``, ``checkpoint=``...).

    ``execute(code, variables=None)`` returns what the cell printed (and the
    trailing expression's repr), ``None`` when nothing, or a ``FinalOutput``
    once the code calls ``SUBMIT(...)``. A failing cell raises ``SyntaxError``
    or ``CodeExecutionError`` (a timeout included: the session keeps its state
    from before the cell); only a lost engine raises ``CodeInterpreterError``,
    and that session then stays lost. Safe to share between threads: each
    thread gets its own session. A host tool runs in the contextvars context
    of the ``execute`` call that runs the cell (so ``dspy.context(lm=...)``
    reaches ``llm_query``).
    """

    execution_instructions = (
        "Code runs as CPython in a persistent dolsot session: variables, imports and functions persist "
        "between executions. Host tools, llm_query and SUBMIT are built-in functions. print() what you "
        "want to see; a trailing expression's value is shown too. A step that runs too long is stopped "
        "and the session keeps its state from before that step."
    )

    def __init__(
        self,
        tools: Mapping[str, Callable[..., Any]] | None = None,
        output_fields: list[dict[str, Any]] | None = None,
        *,
        backend: str = "repl",
        sandbox: Any = None,
        timeout: float | None = None,
        max_output: int | None = None,
        **backend_options: Any,
    ) -> None:
        if backend not in _BACKENDS:
            raise ValueError(f"backend must be 'repl' or 'inprocess', not {backend!r}")
        if sandbox is not None:
            # The kernel's walls around the Repl's worker (docs/sandbox.md).
            if not isinstance(sandbox, dolsot.Sandbox):
                raise TypeError(f"sandbox must be a dolsot.Sandbox, not {type(sandbox).__name__}")
            if backend != "repl":
                raise ValueError("sandbox= needs backend='repl': an in-process session cannot be "
                                 "walled off from its host")
            backend_options = {**backend_options, "sandbox": sandbox}
        if tools is not None and not isinstance(tools, Mapping):
            raise TypeError(f"tools must be a dict of names to callables, not {type(tools).__name__}")
        self.tools: dict[str, Callable[..., Any]] = dict(tools or {})
        self.output_fields = output_fields
        self.backend_kind = backend
        self.timeout = timeout
        self.max_output = max_output
        self._backend_options = dict(backend_options)
        self._backend: Any = None
        self._lock = threading.Lock()
        self._ended = False
        self._local = threading.local()
        self._session_numbers = itertools.count(1)
        self._prefix = f"dspy-{uuid.uuid4().hex[:12]}"
        self._in_flight: dict[int, contextvars.Context] = {}  # execute caller's thread -> context
        self._namespaces: dict[int, int] = {}  # in-process: id(session dict) -> caller's thread
        self._session_threads: dict[str, int] = {}  # session running a cell -> caller's thread
        self._proxies: dict[str, Callable[..., Any]] = {}
        self._sessions: set[str] = set()
        # Set by a factory: the backend is its, shared by the interpreters it
        # makes; this one's tools go under names of its own (_dolsot_i<n>_...).
        self._shared: _SharedBackend | None = None
        self._release_shared: weakref.finalize | None = None
        self._tool_prefix = ""

    # ---- lifecycle
    def start(self) -> None:
        """Starts the backend (for a Repl, its worker process). Idempotent;
        after ``shutdown`` it raises ``CodeInterpreterError``."""
        with self._lock:
            if self._ended:
                raise CodeInterpreterError(
                    "this DolsotInterpreter was shut down; create a new one for a fresh session"
                )
            if self._backend is None and self._shared is not None:
                self._backend, self._release_shared = self._shared.acquire(self)
            elif self._backend is None:
                self._backend = self._make_backend()

    def _borrow(self, shared: _SharedBackend) -> None:
        self._shared = shared
        self._tool_prefix = f"_dolsot_i{shared.next_number()}_"

    def _make_backend(self) -> Any:
        return _make_backend(self.backend_kind, self.timeout, self.max_output, self._backend_options)

    @property
    def backend(self) -> Any:
        """The dolsot backend (``Repl`` or ``InProcessSession``) once started,
        else None; this interpreter owns it and closes it in ``shutdown``."""
        return self._backend

    def shutdown(self) -> None:
        """Ends every session and stops the backend's processes (a backend
        shared by a factory's interpreters: this one's sessions and tools, the
        rest at the factory's ``close``). Idempotent."""
        with self._lock:
            self._ended = True
            backend, self._backend = self._backend, None
            sessions, self._sessions = self._sessions, set()
        if backend is None:
            return
        if self._shared is None:
            backend.close()
            return
        self._shared.replace_tools(self._tool_prefix, {})
        for session_id in sessions:
            try:
                backend.reset(session_id)
            except DolsotError:
                pass
        if self._release_shared is not None:
            self._release_shared()  # the factory's backend stops here if it was the last use

    def __enter__(self) -> DolsotInterpreter:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    def __call__(self, code: str, variables: dict[str, Any] | None = None) -> Any:
        return self.execute(code, variables)

    @classmethod
    def factory(cls, **options: Any) -> DolsotInterpreterFactory:
        """A zero-argument ``interpreter_factory`` for ``dspy.RLM`` that makes
        ``DolsotInterpreter(**options)`` and tells RLM how the runtime behaves."""
        return DolsotInterpreterFactory(cls, options)

    # ---- execution
    def execute(self, code: str, variables: dict[str, Any] | None = None) -> Any:
        """Runs ``code`` in this thread's session, ``variables`` bound first."""
        if not isinstance(code, str):
            raise CodeInterpreterError(f"code must be a str, not {type(code).__name__}")
        variables = self._checked_variables(variables)
        self.start()
        backend = self._backend
        if backend is None:  # shut down by another thread in between
            raise CodeInterpreterError("this DolsotInterpreter was shut down")
        session_id = self._session_id()
        if not code.strip():
            return None
        self._sync_tools(backend)
        me = threading.get_ident()
        with self._lock:
            self._in_flight[me] = contextvars.copy_context()
            self._session_threads[session_id] = me
        try:
            variables, code, aliasing = self._set_up(backend, session_id, variables, code)
            # Before the cell runs, so its first tool call finds its caller.
            if self.backend_kind == "inprocess" and session_id not in self._local.__dict__.get("mapped", ()):
                self._map_namespace(backend, session_id, me)
            result = self._run(backend, session_id, code, variables)
            if aliasing and result.ok:
                self._local.__dict__.setdefault("aliased", set()).update(aliasing)
        finally:
            with self._lock:
                self._in_flight.pop(me, None)
                self._session_threads.pop(session_id, None)
        return self._outcome(result)

    def _run(self, backend: Any, session_id: str, code: str, variables: dict[str, Any]) -> Any:
        try:
            return backend.run(session_id, code, variables=variables or None)
        except dolsot.SessionBusy as error:
            self._local.lost = f"its session is stuck: {error}"
            raise CodeInterpreterError(
                f"dolsot session {session_id} cannot take cells any more (an earlier cell still runs in C "
                f"code after its timeout): {error}. Create a new DolsotInterpreter."
            ) from error
        except (DolsotError, TypeError, ValueError) as error:
            raise CodeInterpreterError(f"dolsot could not run the code: {error}") from error

    def _outcome(self, result: Any) -> Any:
        Outcome = dolsot.Outcome
        outcome = result.outcome
        if outcome == Outcome.OK:
            if result.has_returned:
                return FinalOutput(self._final_fields(result.returned))
            return _output_text(result) or None
        if outcome == Outcome.WORKER_LOST:
            self._local.lost = result.error or "the worker was lost"
            raise CodeInterpreterError(
                f"dolsot lost the session's worker ({result.error}); the session's state is gone. "
                "Create a new DolsotInterpreter."
            )
        if outcome == Outcome.ERROR and result.error_type is not None and _is_syntax_error(result.error_type):
            raise SyntaxError(_error_text(result))
        raise CodeExecutionError(_error_text(result))

    def _final_fields(self, returned: Any) -> dict[str, Any]:
        """SUBMIT's arguments as RLM's dict of output fields; CodeExecutionError
        (fed back to the model) when they do not match the fields."""
        if not self.output_fields:
            return {"output": returned}
        names = [field["name"] for field in self.output_fields]
        usage = f"SUBMIT({', '.join(names)})"
        if isinstance(returned, dict) and set(returned) == set(names) and all(isinstance(k, str) for k in returned):
            return dict(returned)  # SUBMIT(name=value, ...)
        if len(names) == 1:
            return {names[0]: returned}  # SUBMIT(value)
        if isinstance(returned, tuple) and len(returned) == len(names):
            return dict(zip(names, returned))  # SUBMIT(v1, v2, ...)
        if isinstance(returned, dict):
            got = ", ".join(sorted(map(str, returned))) or "no fields"
            raise CodeExecutionError(f"TypeError: SUBMIT got {got}; it takes exactly the output fields: {usage}")
        count = len(returned) if isinstance(returned, tuple) else 1
        raise CodeExecutionError(
            f"TypeError: SUBMIT got {count} value(s); it takes {len(names)}: {usage}"
        )

    # ---- sessions, variables, tools
    def _session_id(self) -> str:
        lost = getattr(self._local, "lost", None)
        if lost is not None:
            raise CodeInterpreterError(
                f"this thread's dolsot session was lost ({lost}); create a new DolsotInterpreter"
            )
        session_id = getattr(self._local, "session_id", None)
        if session_id is None:
            session_id = f"{self._prefix}-{next(self._session_numbers)}"
            self._local.session_id = session_id
            with self._lock:
                self._sessions.add(session_id)
        return session_id

    def _checked_variables(self, variables: dict[str, Any] | None) -> dict[str, Any]:
        if variables is None:
            return {}
        if not isinstance(variables, Mapping):
            raise CodeInterpreterError(f"variables must be a dict, not {type(variables).__name__}")
        bad = [
            name for name in variables
            if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name)
            or name in (_FINAL, "__builtins__") or name in self.tools
        ]
        if bad:
            raise CodeInterpreterError(
                f"variable names must be Python identifiers other than SUBMIT and the tools' names; invalid: {bad!r}"
            )
        return dict(variables)

    def _sync_tools(self, backend: Any) -> None:
        """Makes the backend's tools this interpreter's: one proxy per name,
        which calls ``self.tools[name]`` as it is at call time."""
        wanted = {}
        for name, function in list(self.tools.items()):
            if not callable(function):
                raise CodeInterpreterError(f"tools[{name!r}] is not callable ({type(function).__name__})")
            if name not in self._proxies:
                self._proxies[name] = self._tool_proxy(name)
            wanted[self._engine_name(name)] = self._proxies[name]
        if self._shared is not None:
            self._shared.replace_tools(self._tool_prefix, wanted)
            return
        current = backend.tools
        if current.keys() != wanted.keys() or any(current[n] is not wanted[n] for n in wanted):
            backend.tools = wanted

    def _engine_name(self, name: str) -> str:
        if self._tool_prefix:
            return self._tool_prefix + name.lstrip("_")
        return _private_name("tool", name)

    def _tool_proxy(self, name: str) -> Callable[..., Any]:
        def tool(*args: Any, **kwargs: Any) -> Any:
            function = self.tools.get(name)
            if function is None:
                raise NameError(f"the host tool {name!r} was removed")
            calling = calling_session.get()
            if calling is not None and calling not in self._sessions:
                # A Repl shared by a factory's interpreters: only this one's
                # sessions may call its tools.
                raise PermissionError(f"the host tool {name!r} belongs to another interpreter")
            context = self._caller_context(_calling_cell_globals(sys._getframe(1)))
            if args:
                args, kwargs = _as_keywords(function, args, kwargs)
            value = context.run(function, *args, **kwargs)
            if inspect.isawaitable(value):
                value = _await(value, context)
            return value

        tool.__name__ = tool.__qualname__ = name
        tool.__doc__ = getattr(self.tools.get(name), "__doc__", None)
        return tool

    def _caller_context(self, caller_globals: dict[str, Any]) -> contextvars.Context:
        """The context of the execute() whose cell calls a tool: the one in
        flight whose session made the call (a Repl names it in
        ``dolsot._tools.calling_session``; in-process, the session whose
        namespace the calling frame runs in), else the latest."""
        calling = calling_session.get()
        with self._lock:
            in_flight = list(self._in_flight.items())
            owner = (self._session_threads.get(calling) if calling is not None
                     else self._namespaces.get(id(caller_globals)))
        if not in_flight:
            return contextvars.copy_context()
        for thread, context in in_flight:
            if thread == owner:
                return context.copy()
        return in_flight[-1][1].copy()

    def _map_namespace(self, backend: Any, session_id: str, thread: int) -> None:
        try:
            namespace = backend.namespace(session_id)
        except DolsotError:
            return
        with self._lock:
            self._namespaces[id(namespace)] = thread
        self._local.mapped = session_id

    def _set_up(
        self, backend: Any, session_id: str, variables: dict[str, Any], code: str
    ) -> tuple[dict[str, Any], str, list[str]]:
        """Does what the backend cannot do by itself: binds as globals the
        tools the facade looks up there and those bound under a private name
        (once per session), and renames the variables whose names a backend
        refuses (``input``, ``__token``), which are sent under a private
        name. That runs in one cell of its own ahead of the code, except
        ahead of dspy's own facade source (RLM's and Flex's first cell, which
        no user wrote): then it leads that cell, one cell instead of two, and
        the returned aliases are recorded once it ran. Returns the variables
        and the code to run, and those aliases."""
        aliased: set[str] = self._local.__dict__.setdefault("aliased", set())
        missing = [
            name for name in self.tools
            if name not in aliased and (name.startswith(_GLOBAL_TOOL_PREFIXES) or self._engine_name(name) != name)
        ]
        private = {name: _private_name("variable", name) for name in variables}
        renamed = {name: engine for name, engine in private.items() if engine != name}
        if not missing and not renamed:
            return variables, code, []
        lines = [f"{n} = {self._engine_name(n)}" for n in missing]
        lines += [f"{name} = {engine}\ndel {engine}" for name, engine in renamed.items()]
        sent = {renamed[name]: variables[name] for name in renamed}
        kept = {name: value for name, value in variables.items() if name not in renamed}
        if _is_dspy_facade(code):
            return {**kept, **sent}, "\n".join(lines) + "\n" + code, missing
        self._run_setup(backend, session_id, "\n".join(lines), sent)
        aliased.update(missing)
        return kept, code, []

    def _run_setup(self, backend: Any, session_id: str, code: str, variables: dict[str, Any]) -> None:
        result = self._run(backend, session_id, code, variables)
        if not result.ok:
            raise CodeInterpreterError(f"dolsot could not bind tools or variables in the session: {result.error}")


class DolsotInterpreterFactory:
    """``interpreter_factory`` for dspy modules: each call makes a new
    ``DolsotInterpreter(**options)`` (RLM shuts each down after its forward
    pass). Carries the runtime's ``execution_instructions`` for RLM's prompt.

    The factory owns the backend its interpreters share (one warm worker for
    every forward pass): ``close`` stops it. dspy never closes an
    ``interpreter_factory``, so once the factory is garbage (its module is)
    the backend stops as soon as no interpreter it made is still in use."""

    def __init__(self, cls: type[DolsotInterpreter], options: Mapping[str, Any]) -> None:
        self._cls = cls
        self._options = dict(options)
        self.execution_instructions = cls.execution_instructions
        cls(**self._options).shutdown()  # the options' mistakes surface here, not mid-forward
        self._shared = _SharedBackend(self._options)
        weakref.finalize(self, self._shared.orphan)

    def __call__(self) -> DolsotInterpreter:
        interpreter = self._cls(**self._options)
        interpreter._borrow(self._shared)
        return interpreter

    def close(self) -> None:
        """Stops the shared backend (its worker process) now. Idempotent;
        without it the backend stops once this factory is garbage and its
        interpreters are shut down (or garbage too)."""
        self._shared.close()

    def __enter__(self) -> DolsotInterpreterFactory:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        options = ", ".join(f"{k}={v!r}" for k, v in self._options.items())
        return f"{self._cls.__name__}.factory({options})"


class _SharedBackend:
    """The backend a factory's interpreters share, started on first use: a
    forward pass then starts a session on a warm worker, not a worker. It
    stops at the factory's ``close``, or once the factory is gone
    (``orphan``) and no interpreter holds it (each ``acquire`` is released
    at that interpreter's shutdown, or when it is garbage)."""

    def __init__(self, options: Mapping[str, Any]) -> None:
        self._kind = options.get("backend", "repl")
        self._timeout = options.get("timeout")
        self._max_output = options.get("max_output")
        self._backend_options = {
            k: v for k, v in options.items() if k not in ("backend", "timeout", "max_output", "tools")
        }
        self._backend: Any = None
        # Reentrant: a release runs from a finalizer, which the collector
        # may call on a thread that holds this lock.
        self._lock = threading.RLock()
        self._numbers = itertools.count(1)
        self._holders: set[int] = set()
        self._orphaned = False

    def next_number(self) -> int:
        with self._lock:
            return next(self._numbers)

    def acquire(self, holder: object) -> tuple[Any, weakref.finalize]:
        """The backend (started if needed) for ``holder``, and the call that
        releases it: made by ``holder``'s shutdown, else when it is garbage."""
        with self._lock:
            if self._backend is None:
                self._backend = _make_backend(self._kind, self._timeout, self._max_output, self._backend_options)
            token = next(self._numbers)
            self._holders.add(token)
            backend = self._backend
        return backend, weakref.finalize(holder, self._release, token)

    def _release(self, token: int) -> None:
        with self._lock:
            self._holders.discard(token)
            unused = self._orphaned and not self._holders
        if unused:
            self.close()

    def orphan(self) -> None:
        """The factory is gone: stop now, or when the last holder releases."""
        with self._lock:
            self._orphaned = True
            unused = not self._holders
        if unused:
            self.close()

    def replace_tools(self, prefix: str, tools: dict[str, Callable[..., Any]]) -> None:
        """Sets the tools under ``prefix`` (one interpreter's) to ``tools``;
        a new dict each time, so a cell never sees one half made."""
        with self._lock:
            backend = self._backend
            if backend is None:
                return
            current = backend.tools
            mine = {name: tool for name, tool in current.items() if name.startswith(prefix)}
            if mine.keys() == tools.keys() and all(mine[n] is tools[n] for n in tools):
                return
            others = {name: tool for name, tool in current.items() if not name.startswith(prefix)}
            backend.tools = {**others, **tools}

    def close(self) -> None:
        with self._lock:
            backend, self._backend = self._backend, None
        if backend is not None:
            backend.close()


def _make_backend(kind: str, timeout: float | None, max_output: int | None, backend_options: Mapping[str, Any]) -> Any:
    options: dict[str, Any] = {"timeout": timeout, "max_output": max_output, "final": _FINAL}
    try:
        if kind == "inprocess":
            return dolsot.InProcessSession(**options, **backend_options)
        # RLM's sessions live for one forward pass: nothing to make durable
        # (bench/rlm: checkpoints doubled a forward pass's cost). A timeout or
        # a crash in a cell still rolls back to the snapshot.
        options["store"] = dolsot.store.MemoryStore()
        options["checkpoint"] = "off"
        options.update(backend_options)
        repl = dolsot.Repl(**options)
        try:
            _start_worker(repl)
        except BaseException:
            repl.close()
            raise
        return repl
    except DolsotError as error:
        raise CodeInterpreterError(f"dolsot could not start its {kind} backend: {error}") from error


# How long the Repl's worker may take to start (off every cell's clock).
_WORKER_START_SECONDS = 120.0


def _start_worker(repl: Any) -> None:
    """Starts the Repl's worker before the first cell: a cell's timeout counts
    from its call, so the first one would also pay the worker's start (a
    second or more on a loaded machine) and a tight timeout would stop the
    model's first step before any of its code ran. One empty cell in a
    session of its own, then that session is reset; a worker that cannot
    start says so at the first real cell, as before."""
    session_id = f"dspy-start-{uuid.uuid4().hex[:12]}"
    try:
        repl.run(session_id, "None", timeout=_WORKER_START_SECONDS)
    finally:
        repl.reset(session_id)


def _calling_cell_globals(frame: Any) -> dict[str, Any]:
    """The globals of the code that called a tool: in-process, the cell's
    (past the front dolsot puts before every tool, dolsot._tools)."""
    while frame.f_back is not None and frame.f_code.co_filename == "<dolsot host tools>":
        frame = frame.f_back
    return frame.f_globals


def _await(awaitable: Any, context: contextvars.Context) -> Any:
    """Runs an async tool's awaitable to completion from synchronous code, on
    this thread unless it already runs an event loop."""

    async def wait() -> Any:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return context.run(asyncio.run, wait())
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = context.run(asyncio.run, wait())
        except BaseException as error:  # noqa: BLE001 - re-raised on the caller's thread
            box["error"] = error

    thread = threading.Thread(target=run, name="dolsot-dspy-await", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def _is_dspy_facade(code: str) -> bool:
    """Whether ``code`` is dspy's sandbox facade source (``SHIM_SETUP``),
    which dspy's modules run in a new interpreter before any user code."""
    facade = sys.modules.get("dspy.primitives.facade")
    source = getattr(facade, "SHIM_SETUP", None)
    return isinstance(source, str) and code == source


def _private_name(kind: str, name: str) -> str:
    """The name a tool or variable is bound under in the backend: its own, or
    ``_dolsot_<kind>_<name>`` when the backend refuses that name."""
    if name.isascii() and not name.startswith("__") and name not in _BUILTIN_NAMES:
        return name
    return f"_dolsot_{kind}_{name.lstrip('_')}"


def _as_keywords(
    function: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Positional arguments as keywords when the signature names them: RLM
    wraps user tools as ``invoke(**kwargs)`` carrying the tool's signature,
    and models write ``search("q")``."""
    try:
        bound = inspect.signature(function).bind(*args, **kwargs)
    except (TypeError, ValueError):
        return args, kwargs  # the call itself will say what is wrong
    named = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    if any(bound.signature.parameters[name].kind not in named for name in bound.arguments):
        return args, kwargs
    return (), dict(bound.arguments)


def _is_syntax_error(error_type: str) -> bool:
    return error_type in ("SyntaxError", "IndentationError", "TabError")


def _output_text(result: Any) -> str:
    """What a REPL shows: the cell's output, then its trailing expression's repr."""
    parts = [result.stdout.rstrip("\n")] if result.stdout else []
    if result.value is not None:
        parts.append(result.value)
    return "\n".join(parts)


def _error_text(result: Any) -> str:
    """The error for the model: output printed before it, then the error."""
    error = (result.error or result.error_type or "the cell failed").rstrip("\n")
    if result.stdout:
        return f"{result.stdout.rstrip()}\n{error}"
    return error
