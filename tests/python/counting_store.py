"""A store with MemoryStore's behaviour that counts its saves (the tests of
read-only and binding cells tell by it which cells were checkpointed)."""
from __future__ import annotations

import threading

from dolsot.store import MemoryStore


class CountingStore:
    """`saves` counts the saves that landed in `inner` (a MemoryStore unless
    given), `saved` is set on each, and the next `fail_next` saves raise
    OSError."""

    def __init__(self, inner=None):
        self.inner = MemoryStore() if inner is None else inner
        self.saves = 0
        self.fail_next = 0
        self.saved = threading.Event()

    def load(self, sid):
        return self.inner.load(sid)

    def save(self, sid, blob):
        if self.fail_next:
            self.fail_next -= 1
            raise OSError("the disk is gone")
        self.saves += 1
        self.inner.save(sid, blob)
        self.saved.set()

    def delete(self, sid):
        return self.inner.delete(sid)

    def list(self):
        return self.inner.list()


class JournalingStore(CountingStore):
    """A CountingStore that can append (SessionStore.append: a checkpoint's
    journal frames): `appends` counts the appends that landed, `appended` is
    set on each, and the next `fail_next_append` appends raise OSError after
    writing half of the frame (a write cut short)."""

    def __init__(self, inner=None):
        super().__init__(inner)
        self.appends = 0
        self.fail_next_append = 0
        self.appended = threading.Event()

    def append(self, sid, data):
        if self.fail_next_append:
            self.fail_next_append -= 1
            self.inner.append(sid, data[: len(data) // 2])
            raise OSError("the disk filled up mid-write")
        self.inner.append(sid, data)
        self.appends += 1
        self.appended.set()
