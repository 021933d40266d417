"""Session stores: where Repl checkpoints live. Bytes only; a store never
deserializes a session.

``FileStore`` (the default) keeps one file per session in a private directory;
``MemoryStore`` keeps them in this process; ``RedisStore`` (the extra
``dolsot[redis]``, imported on first use) keeps them in Redis, leased to one
host at a time. Any object with the four methods of ``SessionStore`` works as
a store too; one that also has ``release(sid)`` is told when a session leaves
the host, and one that also has ``append(sid, data)`` (add ``data`` to the end
of the blob under ``sid``, so that ``load`` returns both; raise if there is no
such blob) gets a binding cell's checkpoint as a small frame appended to the
last one instead of a whole new checkpoint (docs/stores.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from dolsot._dolsot import FileStore, MemoryStore, SessionInfo
from dolsot.errors import SessionLeased

if TYPE_CHECKING:
    from dolsot.redis_store import RedisStore

__all__ = ["SessionStore", "FileStore", "MemoryStore", "RedisStore", "SessionInfo", "SessionLeased"]


def __getattr__(name: str) -> Any:
    # RedisStore needs the `redis` client (dolsot[redis]); `import dolsot` never does.
    if name == "RedisStore":
        try:
            from dolsot.redis_store import RedisStore
        except ImportError as error:
            if error.name != "redis" and not str(error.name).startswith("redis."):
                raise
            raise ImportError("RedisStore needs the redis client: "
                              "pip install 'dolsot[redis]' (redis==8.1.0)") from error
        return RedisStore
    raise AttributeError(f"module 'dolsot.store' has no attribute {name!r}")


@runtime_checkable
class SessionStore(Protocol):
    """The whole store protocol."""

    def load(self, sid: str) -> bytes | None: ...

    def save(self, sid: str, blob: bytes) -> None: ...

    def delete(self, sid: str) -> int: ...  # sid == "all" wipes everything

    def list(self) -> list[SessionInfo]: ...
