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
from dolsot._dolsot import Capabilities, Outcome, Result, SessionInfo
from dolsot._backend import Backend
from dolsot._tools import calling_session
from dolsot.inprocess import InProcessSession
from dolsot.repl import Repl
from dolsot.isolation import Mount, Sandbox, SandboxReport
from dolsot import sandbox, store

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
