"""Repl: the forked-worker backend (the default).

A worker process started from this very interpreter (``sys.executable``, with
this process's ``sys.path``, so every module the host can import the worker can
too) imports the toolboxes once and forks one process per live session. A cell
that times out or dies is killed and the session rolls back to its state
before that cell (``snapshots=True``); state is checkpointed to the store
(``checkpoint="async"`` by default: a forked copy writes it while the next cell
runs; ``"sync"``: the Result returns once it is durable; ``"off"``).
"""

from __future__ import annotations

import atexit
import os
import sys
import weakref
from typing import Any, Callable, Mapping

from dolsot._tools import ToolHost
from dolsot._backend import (
    AsyncRunMixin, Gate, InjectValue, ToolsMixin, check_argument, checked_config, toolbox_module_names,
)
from dolsot._dolsot import Repl as _CoreRepl, _parse_flag
from dolsot.isolation import Sandbox, SandboxLayer, SandboxReport

__all__ = ["Repl", "Gate"]

_PACKAGE_PARENT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Every open Repl, so the interpreter's exit closes them (flushing checkpoints)
# while Python can still run a Python store's save().
_open_repls: "weakref.WeakSet[Repl]" = weakref.WeakSet()


@atexit.register
def _close_open_repls() -> None:
    for repl in list(_open_repls):
        try:
            repl.close()
        except Exception as error:  # noqa: BLE001 - exit must go on, but not silently
            sys.stderr.write(f"dolsot: warning: {error}\n")


def _worker_command() -> list[str]:
    # -c keeps __main__ (the session namespace) free of any name of ours.
    bootstrap = (
        f"__import__('sys').path.insert(0, {_PACKAGE_PARENT!r}); "
        "__import__('dolsot._worker', fromlist=['main']).main()"
    )
    return [sys.executable, "-c", bootstrap]


def _host_path() -> list[str]:
    cwd = os.getcwd()
    return [os.path.abspath(p) if p else cwd for p in sys.path if isinstance(p, str)]


class Repl(_CoreRepl, AsyncRunMixin, ToolsMixin):
    """Sessions of Python cells in forked worker processes.

    ``Repl(inject=None, *, store=None, timeout=None, max_output=None,
    max_repr=None, max_text=None, snapshots=True, checkpoint=None,
    checkpoint_delay=None, max_live_sessions=None, gate=None, typecheck=None,
    tools=None, final=None, unpickle="safe", max_unpickle_mb=None, sandbox=None,
    accept_weaker_walls=False)``: ``max_repr``
    and ``max_text`` bound a value's repr and ``Result.text`` in characters
    (docs/python.md, Result); ``tools`` and ``final`` as its "Host tools" says;
    ``unpickle`` is how bytes a session sends (tool arguments, final answers)
    are decoded, and ``max_unpickle_mb`` (default 64) how much one decode of
    them may build in the host (over it, the call or the Result fails).
    ``sandbox`` walls the worker in (docs/sandbox.md); a session checkpointed
    under a Sandbox is restored only under walls at least as strong (else
    ``WeakerWalls``) unless ``accept_weaker_walls``. ``inject`` maps aliases to modules or importable module
    names. ``run(session_id, code, *, timeout=None) -> Result`` never raises for
    the cell's own failure; only caller mistakes raise (``InvalidSession``,
    ``InvalidToolbox``), before any code runs. Thread-safe: calls on
    different sessions run in parallel, calls on one session in order.

    Every method but ``close`` (which also forgets the Repl at exit) and
    ``arun`` is the one C++ ``Backend`` binding's, ``run`` included (no
    Python frame on a cell's path): ``interrupt``, ``capabilities``,
    ``sessions``, ``reset``, ``branch``; ``namespace`` raises ``Unsupported``.
    """

    def __init__(
        self,
        inject: Mapping[str, InjectValue] | None = None,
        *,
        store: Any = None,
        timeout: float | None = None,
        max_output: int | None = None,
        max_repr: int | None = None,
        max_text: int | None = None,
        snapshots: bool = True,
        checkpoint: str | None = None,
        checkpoint_delay: float | None = None,
        max_live_sessions: int | None = None,
        gate: Gate | None = None,
        typecheck: bool | None = None,
        tools: Mapping[str, Callable[..., Any]] | None = None,
        final: str | None = None,
        unpickle: str = "safe",
        max_unpickle_mb: int | None = None,
        sandbox: Sandbox | None = None,
        accept_weaker_walls: bool = False,
    ) -> None:
        config = checked_config(
            timeout=timeout,
            max_output=max_output,
            max_repr=max_repr,
            max_text=max_text,
            snapshots=snapshots,
            checkpoint=checkpoint,
            checkpoint_delay=checkpoint_delay,
            max_live_sessions=max_live_sessions,
            typecheck=typecheck,
        )
        if sandbox is None and _parse_flag("DOLSOT_SANDBOX", os.environ.get("DOLSOT_SANDBOX", "")):
            sandbox = Sandbox()  # DOLSOT_SANDBOX=1: the default Sandbox
        check_argument("sandbox", sandbox, (Sandbox,), "a dolsot.Sandbox or None")
        config.update(checked_config(accept_weaker_walls=accept_weaker_walls))
        config["snapshots"] = bool(snapshots)
        self._dolsot_tools = ToolHost(tools, final, unpickle, max_unpickle_mb)
        super().__init__(
            toolbox_module_names(inject),
            store=store,
            gate=gate,
            python_path=_host_path(),
            worker_command=_worker_command(),
            python_executable=sys.executable,
            sandbox=sandbox,
            **config,
        )
        self._constructed = True  # the C++ Repl exists (__del__ may close it)
        _open_repls.add(self)

    def sandbox_report(self) -> SandboxReport:
        """The layers this Repl's worker runs under (starting the worker if
        needed). Raises ``ConfigError`` for a Repl without a sandbox, ``WorkerError``
        when a layer asked for cannot be applied."""
        return SandboxReport(tuple(SandboxLayer(*layer) for layer in self._sandbox_layers()))

    def close(self) -> None:
        """Flushes pending checkpoints and stops every worker process. Idempotent.

        Raises ``StoreError`` naming the sessions whose last state could not
        be saved (the store keeps an older one), once; the Repl is closed
        either way."""
        _open_repls.discard(self)
        tools = self.__dict__.get("_dolsot_tools")
        if tools is not None:
            tools.close()
        super().close()

    def __enter__(self) -> Repl:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        # Closed here, not by the C++ destructor: closing releases the GIL, so a
        # Python store's save() can still run for the last checkpoints.
        if self.__dict__.get("_constructed"):
            try:
                _CoreRepl.close(self)
            except Exception:  # noqa: BLE001 - never raise from a finalizer
                pass
