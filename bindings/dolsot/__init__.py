"""dolsot: a stateful Python REPL engine for LLM agents.

Run cells of Python against a session that keeps its state between cells,
with toolboxes injected under aliases. Two backends share one call shape:
``Repl`` (forked workers, hard timeouts, rollback, durable checkpoints) and
``InProcessSession`` (the host's own interpreter, live objects by reference).
"""

from __future__ import annotations

from dolsot.errors import (
    ConfigError,
    DolsotError,
    InvalidSession,
    InvalidToolbox,
    SessionBusy,
    StoreError,
    Unsupported,
    WorkerError,
)
# Not typing.TYPE_CHECKING: `typing` costs ~5 ms to import; type checkers
# treat a name spelled TYPE_CHECKING alike.
TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers and IDEs; at run time see __getattr__
    from dolsot import sandbox, store
    from dolsot._backend import Backend
    from dolsot._dolsot import Capabilities, Outcome, Result, SessionInfo
    from dolsot._tools import calling_session
    from dolsot.inprocess import InProcessSession
    from dolsot.isolation import Mount, Sandbox, SandboxReport
    from dolsot.repl import Repl

# Each name is imported on first use (PEP 562): `import dolsot` stays a few
# hundred microseconds, and a Repl's worker, which imports dolsot._worker,
# loads the extension and nothing of the host's side.
_LAZY = {
    "Capabilities": "dolsot._dolsot",
    "Outcome": "dolsot._dolsot",
    "Result": "dolsot._dolsot",
    "SessionInfo": "dolsot._dolsot",
    "Backend": "dolsot._backend",
    "calling_session": "dolsot._tools",
    "InProcessSession": "dolsot.inprocess",
    "Repl": "dolsot.repl",
    "Mount": "dolsot.isolation",
    "Sandbox": "dolsot.isolation",
    "SandboxReport": "dolsot.isolation",
    "sandbox": "dolsot.sandbox",
    "store": "dolsot.store",
}


def __getattr__(name: str) -> object:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'dolsot' has no attribute {name!r}")
    import importlib

    module = importlib.import_module(where)
    value = module if where == f"dolsot.{name}" else getattr(module, name)
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__version__ = "0.5.0"

__all__ = [
    "Repl",
    "InProcessSession",
    "Sandbox",
    "Mount",
    "SandboxReport",
    "Backend",
    "calling_session",
    "Result",
    "Outcome",
    "Capabilities",
    "SessionInfo",
    "DolsotError",
    "InvalidSession",
    "InvalidToolbox",
    "ConfigError",
    "SessionBusy",
    "StoreError",
    "WorkerError",
    "Unsupported",
    "sandbox",
    "store",
    "__version__",
]
