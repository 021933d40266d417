"""InProcessSession: cells run in this very interpreter, against live objects.

Use it when a cell must see things that cannot cross a process boundary (a
database connection, a client, a generator, an object a C++ host made). The
trade-off: no isolation, and the timeout is cooperative. At the deadline
``run`` returns exit code 124 with the output so far, and the cell's thread
gets a ``KeyboardInterrupt`` (which stops a pure-Python loop); a cell stuck in
C code keeps running on a leaked thread (counted in ``leaked_threads``) and its
session refuses new cells (``SessionBusy``) until ``reset``. At the host's
exit, every cell thread still running (a late cell, a finalizer past a
reset's deadline) is interrupted until it stops, for at most 5 s, before the
interpreter finalizes; one that outlasts that is reported on stderr.
"""

from __future__ import annotations

from dolsot.errors import Unsupported

import atexit
import sys
import weakref
from typing import Any, Callable, Mapping

from dolsot._tools import ToolHost
from dolsot._backend import AsyncRunMixin, Gate, ToolsMixin, checked_config
from dolsot._dolsot import InProcessSession as _CoreInProcessSession
from dolsot._dolsot import _stop_cell_threads_before_exit

__all__ = ["InProcessSession", "Gate"]

# Every open session, so the interpreter's exit stops their worker threads
# while the interpreter still runs.
_open_sessions: "weakref.WeakSet[InProcessSession]" = weakref.WeakSet()

# How long the exit waits for cell threads still running Python (a late cell,
# a finalizer past a reset's deadline), interrupting them every 50 ms. A
# thread still running Python when finalization starts is ended by CPython
# mid-call, which can crash the exit; one that ignores KeyboardInterrupt
# past this wait is reported on stderr.
_EXIT_STOP_SECONDS = 5.0


@atexit.register
def _close_open_sessions() -> None:
    for session in list(_open_sessions):
        try:
            session.close()
        except Exception:  # noqa: BLE001 - exit must go on
            pass
    still = _stop_cell_threads_before_exit(_EXIT_STOP_SECONDS)
    if still:
        print(
            f"dolsot: {still} in-process cell thread(s) still running at exit after "
            f"{_EXIT_STOP_SECONDS:g} s of KeyboardInterrupt; the exit may not be clean",
            file=sys.stderr,
        )


class InProcessSession(_CoreInProcessSession, AsyncRunMixin, ToolsMixin):
    """Sessions of cells in this interpreter, each a live namespace dict.

    ``InProcessSession(inject=None, *, timeout=None, max_output=None,
    max_repr=None, max_text=None, gate=None, typecheck=None, tools=None,
    final=None, max_unpickle_mb=None)``: ``max_unpickle_mb`` is checked as a
    Repl checks it (one call shape) but bounds nothing here: in-process a
    tool's arguments and a final answer are the cell's objects themselves,
    never unpickled. ``inject`` maps aliases to any object (the
    very same object is bound in every new session) or to a module name (a
    ``str``, imported once). ``run(session_id, code, *, timeout=None)``
    returns a ``Result``; ``namespace(session_id)`` the session's dict
    itself; ``sessions()``, ``reset(session_id | "all")``, ``close()``.
    """

    def __init__(
        self,
        inject: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        max_output: int | None = None,
        max_repr: int | None = None,
        max_text: int | None = None,
        gate: Gate | None = None,
        typecheck: bool | None = None,
        ty_bin: str | None = None,
        tools: Mapping[str, Callable[..., Any]] | None = None,
        final: str | None = None,
        max_unpickle_mb: int | None = None,
        sandbox: object = None,
    ) -> None:
        if sandbox is not None:
            raise Unsupported(
                "InProcessSession cannot be sandboxed: its cells run on a thread of the host's "
                "own process, which no kernel wall can separate from the host. Use "
                "dolsot.Repl(sandbox=dolsot.Sandbox(...)) (docs/sandbox.md)"
            )
        config = checked_config(
            timeout=timeout,
            max_output=max_output,
            max_repr=max_repr,
            max_text=max_text,
            typecheck=typecheck,
            ty_bin=ty_bin,
        )
        # In-process, values are the host's own objects: nothing is unpickled.
        self._dolsot_tools = ToolHost(tools, final, "full", max_unpickle_mb)
        super().__init__(inject, gate=gate, **config)
        _open_sessions.add(self)

    def close(self) -> None:
        """Stops the idle worker threads and forgets every session. Idempotent."""
        tools = self.__dict__.get("_dolsot_tools")
        if tools is not None:
            tools.close()
        super().close()

    def __enter__(self) -> InProcessSession:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
