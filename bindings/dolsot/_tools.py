"""Host tools, per-call variables and final answers: the host's side.

Every backend keeps one ``ToolHost`` as ``_dolsot_tools``; the C++ ``run``
reads it on each call (``bindings/cell_inputs_from_python.cc``). In a Repl the
cell's process sends a tool call as ``pickle.dumps((args, kwargs))``; the host
runs the tool on a thread of its own and answers with the pickled result or
the exception. In-process, a tool is called directly.

Bytes that come from a session (a tool's arguments, a final answer) were made
by the cell's code. Unpickling them runs whatever code they name, in the host,
so by default they are decoded with an allow-list: plain data only (see
``SAFE_GLOBALS``), and within a budget: the pickle is walked first
(bindings/pickle_budget.h), charging what each opcode and each allowed
constructor's call would build, and one that would build more than
``max_unpickle_mb`` is refused before anything is built.
``unpickle="full"`` trusts the session's code as much as the host's own.
"""

from __future__ import annotations

import contextvars
import inspect
import io
import pickle
import queue
import threading
from typing import Any, Callable, Mapping

try:  # the built-in BLAKE2 alone: hashlib would load OpenSSL (~2.5 ms at import)
    from _blake2 import blake2b  # type: ignore[import-not-found]
except ImportError:  # a Python built without it
    from hashlib import blake2b

from dolsot._dolsot import check_pickle as _check_pickle
from dolsot._dolsot import safe_pickle_globals as _safe_pickle_globals

__all__ = ["ToolHost", "SAFE_GLOBALS", "encode_variable", "calling_session"]

calling_session: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "dolsot_calling_session", default=None)
"""While a Repl's host tool runs: the id of the session whose cell called it
(None elsewhere), so a tool shared by sessions can tell them apart."""

# What a session's pickle may name when unpickle="safe": constructors of plain
# data, none of which runs code of the pickle's choosing, each of which the
# walk knows how to cost (bindings/pickle_budget.cc keeps the list).
SAFE_GLOBALS = frozenset(tuple(pair) for pair in _safe_pickle_globals())

# The default budget of one decode of a session's bytes, in MiB.
DEFAULT_MAX_UNPICKLE_MB = 64

_UNPICKLE_POLICIES = ("safe", "full")
# Tool calls in flight at once per backend (a slow tool holds one thread).
_MAX_TOOL_THREADS = 64


class _SafeUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in SAFE_GLOBALS:
            return super().find_class(module, name)
        raise pickle.UnpicklingError(
            f"the pickle names {module}.{name}, which is not allowed to cross from the session "
            "into the host (unpickle='safe' takes plain data only: str, bytes, numbers, lists, "
            "tuples, dicts, sets, datetime, Decimal...; pass unpickle='full' to trust "
            "the session's code)"
        )


def _budget_bytes(max_unpickle_mb: Any) -> int:
    """max_unpickle_mb (None: the default) in bytes, or the error saying what it takes."""
    if max_unpickle_mb is None:
        max_unpickle_mb = DEFAULT_MAX_UNPICKLE_MB
    if isinstance(max_unpickle_mb, bool) or not isinstance(max_unpickle_mb, int):
        raise TypeError(
            "max_unpickle_mb must be an int (MiB a decode of a session's bytes may build) or "
            f"None, not {_type_name(max_unpickle_mb)}")
    if not 1 <= max_unpickle_mb <= 1 << 20:
        raise ValueError(
            "max_unpickle_mb must be between 1 and 1048576 (MiB a decode of a session's bytes "
            f"may build), not {max_unpickle_mb}")
    return max_unpickle_mb << 20


def _type_name(value: Any) -> str:
    kind = type(value)
    module = getattr(kind, "__module__", None)
    return kind.__qualname__ if module in (None, "", "builtins") else f"{module}.{kind.__qualname__}"


def _unpicklable(value: Any, whose: str, where: str, error: Exception) -> TypeError:
    """The TypeError saying whose value of which type cannot be sent where."""
    return TypeError(
        f"{whose}: a value of type {_type_name(value)} cannot be sent to {where} "
        f"(it cannot be pickled: {error})"
    )


def _pickled(value: Any, whose: str, where: str) -> bytes:
    """pickle.dumps(value, 5), or _unpicklable's TypeError."""
    try:
        return pickle.dumps(value, 5)
    except Exception as error:
        raise _unpicklable(value, whose, where, error) from None


def _error_reply(error: BaseException) -> bytes:
    """An exception described for the cell: its type, message and exit code,
    and the exception itself when it is a builtin one."""
    exit_code = getattr(error, "exit_code", None)
    info: dict[str, Any] = {
        "type": type(error).__name__,
        "module": getattr(type(error), "__module__", "builtins"),
        "message": str(error),
        "exit_code": exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None,
        "exception": None,
    }
    # Only the builtin exceptions travel as themselves: unpickling another
    # class would import its module inside the session.
    if info["module"] == "builtins":
        try:
            info["exception"] = pickle.dumps(error, 5)
        except Exception:  # noqa: BLE001 - described by name instead
            pass
    return pickle.dumps(info, 5)


class _VariableCache:
    """The pickle of each variable last sent, so the same object is pickled
    once: immutable values by identity, others re-pickled and compared by
    digest (the Repl resends only what changed)."""

    _IMMUTABLE = (str, bytes, int, float, complex, bool, type(None), frozenset, range)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last: dict[str, tuple[Any, bytes, bytes]] = {}

    def encode(self, name: str, value: Any) -> tuple[bytes, bytes]:
        with self._lock:
            last = self._last.get(name)
        if last is not None and last[0] is value and isinstance(value, self._IMMUTABLE):
            return last[1], last[2]
        data = _pickled(value, f"run() variable {name!r}", "a Repl session")
        digest = blake2b(data, digest_size=16).digest()
        with self._lock:
            self._last[name] = (value, data, digest)
        return data, digest


_default_cache = _VariableCache()


def encode_variable(session_id: str, name: str, value: Any) -> tuple[bytes, bytes]:
    """(pickle, digest) of a variable, for a backend without a ToolHost."""
    return _default_cache.encode(name, value)


class _Workers:
    """Threads waiting on a queue, one started when none is idle (up to
    ``most``): not an executor, so a hand-off is one put and one wake (a
    tool's round trip is on a cell's path). ``put`` is called under ``lock``."""

    def __init__(self, name: str, work: Callable[[Any], None], lock: threading.Lock,
                 most: int | None = None) -> None:
        self._name, self._work, self._lock, self._most = name, work, lock, most
        self._items: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.threads: list[threading.Thread] = []
        self._idle = 0

    def put(self, item: Any) -> None:
        if self._idle == 0 and (self._most is None or len(self.threads) < self._most):
            thread = threading.Thread(target=self._run, daemon=True,
                                      name=f"{self._name}-{len(self.threads)}")
            self.threads.append(thread)
            self._idle += 1
            thread.start()
        self._idle -= 1
        self._items.put(item)

    def stop(self) -> list[threading.Thread]:
        """Asks every thread to end once it is idle; returns them."""
        for _ in self.threads:
            self._items.put(None)
        return list(self.threads)

    def _run(self) -> None:
        while True:
            item = self._items.get()
            if item is None:
                return
            try:
                self._work(item)
            finally:
                del item
                with self._lock:
                    self._idle += 1


class ToolHost:
    """One backend's tools (``backend.tools``, a live dict), its final-answer
    function's name, and how session bytes are decoded."""

    def __init__(
        self,
        tools: Mapping[str, Callable[..., Any]] | None,
        final: str | None,
        unpickle: str,
        max_unpickle_mb: int | None = None,
    ) -> None:
        if tools is not None and not isinstance(tools, Mapping):
            raise TypeError(f"tools must be a dict of names to callables, not {_type_name(tools)}")
        if final is not None and not isinstance(final, str):
            raise TypeError(f"final must be a name (str) or None, not {_type_name(final)}")
        if unpickle not in _UNPICKLE_POLICIES:
            raise ValueError(f"unpickle must be 'safe' or 'full', not {unpickle!r}")
        self.tools: dict[str, Callable[..., Any]] = dict(tools or {})
        for name, tool in self.tools.items():
            if not callable(tool):
                raise TypeError(f"tools[{name!r}] is not callable ({_type_name(tool)})")
        self.final = final
        self.unpickle = unpickle
        self.max_unpickle_bytes = _budget_bytes(max_unpickle_mb)
        self._variables = _VariableCache()
        self._wrapped: dict[tuple[int, str], tuple[Callable[..., Any], Callable[..., Any]]] = {}
        self._lock = threading.Lock()
        self._calls = _Workers("dolsot-tool", lambda call: self._serve(*call), self._lock,
                               _MAX_TOOL_THREADS)
        # Threads serving cells' own tool pipes (serve_pipes): one per cell
        # that calls a tool while it runs, kept for the next.
        self._servers = _Workers("dolsot-tool-pipes", self._serve_pipes, self._lock)
        self._closed = False

    # ---- in-process: tools called directly
    def callables(self) -> dict[str, Callable[..., Any]]:
        """name -> what the cell calls: the tool behind a front that shows
        the cell what a Repl shows when it raises (the exception's type and
        message, no frame of the host's, so no host path); an async tool is
        run to completion."""
        out = {}
        with self._lock:
            kept: dict[tuple[int, str], tuple[Callable[..., Any], Callable[..., Any]]] = {}
            for name, tool in self.tools.items():
                cached = self._wrapped.get((id(tool), name))
                if cached is None or cached[0] is not tool:
                    target = _synchronous(tool) if inspect.iscoroutinefunction(tool) else tool
                    cached = (tool, _front(target, name))
                kept[(id(tool), name)] = cached
                out[name] = cached[1]
            self._wrapped = kept  # the fronts of tools no longer listed go
        return out

    # ---- Repl: tools called from another process
    def dispatch(self, name: str, payload: bytes, done: Callable[[bool, bytes], None],
                 session_id: str | None = None) -> None:
        """Runs one call on a thread of the host's own; ``done(ok, bytes)``."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the backend is closed")
            self._calls.put((name, payload, done, session_id))

    def serve_pipes(self, serve: Callable[[ToolHost, frozenset[str], Callable[[bool, bytes], None]], None],
                     reply: Callable[[bool, bytes], None], session_id: str,
                     names: tuple[str, ...]) -> None:
        """Serves a Repl cell's own tool pipes until the cell is over: a
        thread of the host's runs ``serve(self, names, reply)``, the C loop
        that receives each call and runs it itself (one wake-up fewer than
        ``dispatch``; bindings/tool_calls_from_python.h), handing what it
        cannot take to ``_call`` and ``_answer``; ``names`` are the tools the
        cell was given. The session sends a call there only while no other
        waits on it, so calls from several of its threads still run at once."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the backend is closed")
            self._servers.put([serve, reply, session_id, frozenset(names)])

    def _serve_pipes(self, item: list[Any]) -> None:
        serve, reply, session_id, names = item
        # The last references to the pipes' functions go with this call: they close.
        item.clear()
        # One session's calls: its id is set once, not per call.
        token = calling_session.set(session_id)
        try:
            serve(self, names, reply)
        except Exception:  # noqa: BLE001 - the pipes are dropped; the cell's call fails
            pass
        finally:
            del serve, reply
            calling_session.reset(token)

    def _serve(self, name: str, payload: bytes, done: Callable[[bool, bytes], None],
               session_id: str | None = None) -> None:
        token = calling_session.set(session_id)
        try:
            self._call(name, payload, done)
        finally:
            calling_session.reset(token)

    def _call(self, name: str, payload: bytes, done: Callable[[bool, bytes], None]) -> None:
        """Runs one call and answers it with ``done(ok, bytes)``."""
        try:
            tool = self.tools.get(name)
            if tool is None:
                done(False, b"")
                return
            try:
                args, kwargs = self.loads(payload)
            except pickle.UnpicklingError as error:
                raise pickle.UnpicklingError(f"tool {name}(): {error}") from None
            self._answer(name, tool(*args, **kwargs), done)
        except BaseException as error:  # noqa: BLE001 - every failure goes back to the cell
            done(False, _error_reply(error))

    def _answer(self, name: str, value: Any, done: Callable[[bool, bytes], None]) -> None:
        """Answers a call with what its tool returned (awaited if it is
        awaitable); raises what the await raised or a TypeError naming an
        unpicklable result."""
        if inspect.isawaitable(value):
            import asyncio  # only for an async tool: `import dolsot` stays free of it

            value = asyncio.run(_awaited(value))
        try:
            data = pickle.dumps(value, 5)
        except Exception as error:  # the message is made only when it is needed
            raise _unpicklable(value, f"tool {name}() returned", "the cell", error) from None
        done(True, data)

    def loads(self, data: bytes) -> Any:
        """Decodes bytes a session made, by this host's policy. The pickle is
        walked within the budget first (pickle.UnpicklingError naming it when
        it would build more); one that names nothing (plain data:
        bindings/plain_pickle.h) needs no allow-list, and pickle.loads
        decodes it several times faster."""
        if self.unpickle == "full" or _check_pickle(data, self.max_unpickle_bytes):
            return pickle.loads(data)
        return _SafeUnpickler(io.BytesIO(data)).load()

    def decode_returned(self, data: bytes) -> Any:
        return self.loads(data)

    def encode_variable(self, session_id: str, name: str, value: Any) -> tuple[bytes, bytes]:
        return self._variables.encode(name, value)

    def close(self) -> None:
        """Stops taking calls; a tool still running finishes on its thread and
        its result is dropped."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            # A cell's pipes server ends once its cell is over (the host stops it
            # when run() returns).
            threads = self._calls.stop() + self._servers.stop()
        # Idle threads end at once; one running a tool ends when it returns
        # (a daemon thread: it never holds the interpreter's exit).
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(timeout=0.05)


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _synchronous(tool: Callable[..., Any]) -> Callable[..., Any]:
    import asyncio  # an async tool's front: asyncio is loaded by then

    def call(*args: Any, **kwargs: Any) -> Any:
        return asyncio.run(tool(*args, **kwargs))

    call.__name__ = getattr(tool, "__name__", "tool")
    call.__qualname__ = getattr(tool, "__qualname__", call.__name__)
    call.__doc__ = getattr(tool, "__doc__", None)
    call.__wrapped__ = tool  # type: ignore[attr-defined]
    return call


# What an in-process cell calls for a tool. Compiled under the file name a
# Repl's tool stubs have, so a traceback through it names no host file; the
# tool's own frames are dropped from what it raises (and its chain, as a
# Repl's pickled reply drops them), the exception object itself kept so
# `except Missing` in the cell still catches it.
_FRONT_SOURCE = """
def front(target, name, doc, wrapped):
    def tool(*args, **kwargs):
        try:
            return target(*args, **kwargs)
        except BaseException as error:
            error.__traceback__ = None
            raise error from None
    tool.__name__ = tool.__qualname__ = name
    tool.__doc__ = doc
    tool.__wrapped__ = wrapped
    return tool
"""
_front_namespace: dict[str, Any] = {"__name__": "dolsot.tools"}
exec(compile(_FRONT_SOURCE, "<dolsot host tools>", "exec"), _front_namespace)


def _front(target: Callable[..., Any], name: str) -> Callable[..., Any]:
    wrapped = getattr(target, "__wrapped__", target)
    return _front_namespace["front"](target, name, getattr(wrapped, "__doc__", None), wrapped)
