"""Exceptions dolsot raises. Only caller mistakes raise; a failing cell never does."""

from __future__ import annotations

__all__ = [
    "DolsotError",
    "InvalidSession",
    "InvalidToolbox",
    "ConfigError",
    "SessionBusy",
    "StoreError",
    "WorkerError",
    "Unsupported",
    "SessionLeased",
    "WeakerWalls",
]


class DolsotError(Exception):
    """Base class of every error dolsot raises."""


class InvalidSession(DolsotError, ValueError):
    """A bad session id, or empty code. Raised before any code runs."""


class InvalidToolbox(DolsotError, ValueError):
    """An inject value that is neither a module nor an importable module name."""


class ConfigError(DolsotError, ValueError):
    """A malformed configuration value (an argument or a DOLSOT_* variable)."""


class SessionBusy(DolsotError, RuntimeError):
    """The session is still running an earlier cell (in-process backend)."""


class StoreError(DolsotError, OSError):
    """A session store failed or refused an unsafe directory or file."""


class WorkerError(DolsotError, RuntimeError):
    """The engine itself failed (a worker could not start, a protocol error)."""


class Unsupported(DolsotError, NotImplementedError):
    """An optional operation this backend does not offer (see ``capabilities``)."""


class SessionLeased(SessionBusy):
    """Another host holds the session's lease (RedisStore): retry later.

    A store raises it; through a ``Repl`` it surfaces as ``SessionBusy`` (its
    base class) with this message, since the Repl carries errors as values."""


class WeakerWalls(DolsotError, PermissionError):
    """A session checkpointed under a Sandbox, asked for under weaker walls (none,
    the network, a freer mount, a higher cap): it is not restored, since what its
    cells left could run code when loaded. Use the same Sandbox, or pass
    ``accept_weaker_walls=True`` (CLI ``--accept-weaker-walls``) to trust it."""
