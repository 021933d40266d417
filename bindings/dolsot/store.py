"""Session stores: where Repl checkpoints live. Bytes only; a store never
deserializes a session.

``FileStore`` (the default) keeps one file per session in a private directory;
``MemoryStore`` keeps them in this process. Any object with the four methods of
``SessionStore`` works as a store too (a Redis- or database-backed one, say).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from dolsot._dolsot import FileStore, MemoryStore, SessionInfo

__all__ = ["SessionStore", "FileStore", "MemoryStore", "SessionInfo"]


@runtime_checkable
class SessionStore(Protocol):
    """The whole store protocol."""

    def load(self, sid: str) -> bytes | None: ...

    def save(self, sid: str, blob: bytes) -> None: ...

    def delete(self, sid: str) -> int: ...  # sid == "all" wipes everything

    def list(self) -> list[SessionInfo]: ...
