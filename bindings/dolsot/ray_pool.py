"""SessionPool: live sessions spread over Ray actors, each hosting a Repl over
one shared RedisStore. A session sticks to its actor while that actor lives
(affinity); new sessions go to the actor with the fewest; when an actor dies,
its sessions continue on the others from their last checkpoint in the store.
Ray does the scheduling and the processes; this module only routes.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Callable, Mapping

import ray
from ray.exceptions import RayActorError

from dolsot._backend import AsyncRunMixin
from dolsot._dolsot import Outcome, Result, SessionInfo, validate_session_id
from dolsot.errors import ConfigError, SessionBusy

__all__ = ["SessionPool"]

StoreSpec = Callable[[], Any]


class _Host:
    """The actor: one Repl over its own store (same Redis, its own lease token)."""

    def __init__(self, make_store: StoreSpec, repl_options: Mapping[str, Any]) -> None:
        from dolsot import Repl

        self.store = make_store()
        self.repl = Repl(store=self.store, **dict(repl_options))

    def token(self) -> str:
        return self.store.token

    def pid(self) -> int:
        import os

        return os.getpid()

    def run(self, sid: str, code: str, timeout: float | None,
            variables: dict[str, Any] | None = None) -> dict[str, Any]:
        result = self.repl.run(sid, code, timeout=timeout, variables=variables)
        return {
            "ok": result.ok, "value": result.value, "stdout": result.stdout,
            "error": result.error, "exit_code": result.exit_code, "held": list(result.held),
            "dropped": list(result.dropped), "outcome": result.outcome.name,
            "save_error": result.save_error, "error_type": result.error_type,
        }

    def sessions(self) -> list[tuple[str, int, float]]:
        return [(s.id, s.size_bytes, s.last_used) for s in self.repl.sessions()]

    def reset(self, target: str) -> int:
        return self.repl.reset(target)

    def close(self) -> str | None:
        """Closes the Repl (flushing checkpoints, releasing leases), then the
        store; returns what could not be saved, or None."""
        error = None
        try:
            self.repl.close()
        except Exception as e:  # noqa: BLE001 - reported to the pool's close
            error = str(e)
        self.store.close()
        return error


class PoolResult(Result):
    """A Result that crossed from an actor (Result itself has no pickling):
    the same fields, ``save_error`` and ``error_type`` included."""

    def __init__(self, fields: Mapping[str, Any]) -> None:
        super().__init__(ok=fields["ok"], value=fields["value"], stdout=fields["stdout"],
                         error=fields["error"], exit_code=fields["exit_code"],
                         held=fields["held"], dropped=fields["dropped"],
                         outcome=Outcome.__members__[fields["outcome"]],
                         error_type=fields.get("error_type"), save_error=fields["save_error"])


class _Slot:
    """One actor of the pool and what the pool knows of it."""

    def __init__(self, handle: Any, token: str) -> None:
        self.handle = handle
        self.token = token
        self.sessions: set[str] = set()


def _store_factory(store: Any) -> StoreSpec:
    if hasattr(store, "spec") and callable(store.spec):
        spec = store.spec()
        cls = type(store)
        return lambda: cls(**spec)
    if callable(store):
        return store
    raise ConfigError("store must be a RedisStore (or an object with spec()), or a picklable "
                      f"zero-argument callable making one; got {type(store).__name__}")


class SessionPool(AsyncRunMixin):
    """Sessions spread over ``num_actors`` Ray actors, each hosting a Repl.

    ``SessionPool(num_actors, *, store, repl_options=None, actor_options=None,
    lease_wait=None)``. ``store``: a RedisStore, whose ``spec()`` (HMAC key
    included) makes each actor's own store, or a picklable zero-argument
    callable returning a store every actor can reach. ``repl_options``: the
    keyword arguments of each actor's ``Repl``. ``actor_options``: Ray's
    ``.options()`` for the actors (default ``num_cpus=0``, so actors fit on
    any node, ``max_concurrency=32``: cells of different sessions on one
    actor run in parallel, as on a Repl). ``lease_wait``: how long ``run``
    retries a session another host still holds (default: twice the store's
    lease) before it raises ``SessionBusy``.

    ``run(session_id, code, *, timeout=None) -> Result`` (``arun`` awaits it),
    ``sessions()``, ``reset(target)``, ``close()``: as on a Repl. A cell
    whose actor died under it returns ``Outcome.WORKER_LOST``; the session
    continues on another actor from its last checkpoint. Thread-safe.
    Ray must be initialized first (``ray.init``); the pool does not own Ray.
    """

    def __init__(
        self,
        num_actors: int,
        *,
        store: Any,
        repl_options: Mapping[str, Any] | None = None,
        actor_options: Mapping[str, Any] | None = None,
        lease_wait: float | None = None,
    ) -> None:
        if not isinstance(num_actors, int) or num_actors < 1:
            raise ConfigError(f"num_actors must be an int >= 1, got {num_actors!r}")
        if not ray.is_initialized():
            raise ConfigError("Ray is not initialized: call ray.init(...) before SessionPool")
        self._make_store = _store_factory(store)
        self._repl_options = dict(repl_options or {})
        self._actor_options = {"num_cpus": 0, "max_concurrency": 32, **(actor_options or {})}
        self._admin = self._make_store()  # breaks the leases of dead actors
        lease = getattr(self._admin, "lease_seconds", 30.0)
        self._lease_wait = 2 * lease + 5 if lease_wait is None else float(lease_wait)
        self._remote = ray.remote(_Host)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # an actor was replaced
        self._routes: dict[str, _Slot] = {}
        self._closed = False
        self._slots = [self._start_actor() for _ in range(num_actors)]

    # ------------------------------------------------------------- the calls

    def run(self, session_id: str, code: str, *, timeout: float | None = None,
            variables: dict[str, Any] | None = None) -> Result:
        validate_session_id(session_id)
        deadline = time.monotonic() + self._lease_wait
        while True:
            slot = self._route(session_id)
            try:
                fields = ray.get(slot.handle.run.remote(session_id, code, timeout, variables))
                return PoolResult(fields)
            except RayActorError as error:
                self._replace(slot)
                return PoolResult({
                    "ok": False, "value": None, "stdout": "", "exit_code": 1, "held": [],
                    "dropped": [], "outcome": "WORKER_LOST", "save_error": None,
                    "error": (f"WorkerError: the Ray actor hosting session '{session_id}' died "
                              f"({type(error).__name__}); this cell's effects may be lost. The "
                              "session continues on another actor from its last checkpoint."),
                })
            except SessionBusy:
                # Another host still holds the session (a lease not yet given
                # up or expired): retry until lease_wait runs out.
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)

    def sessions(self) -> list[SessionInfo]:
        """Every session of the pool: live on an actor or stored, by id. An
        actor found dead is replaced (its sessions are in the store)."""
        merged: dict[str, tuple[str, int, float]] = {}
        calls = [(slot, slot.handle.sessions.remote()) for slot in self._live_slots()]
        for slot, ref in calls:
            try:
                rows = ray.get(ref)
            except RayActorError:
                self._replace(slot)
                continue
            for row in rows:
                if row[0] not in merged or row[1] > merged[row[0]][1]:
                    merged[row[0]] = row
        return [SessionInfo(*merged[sid]) for sid in sorted(merged)]

    def reset(self, target: str) -> int:
        """Forgets `target` (``"all"``: every session) on its actor and in the
        store; returns how many sessions were forgotten."""
        if target == "all":
            known = {info.id for info in self.sessions()}
            ray.get([slot.handle.reset.remote("all") for slot in self._live_slots()])
            with self._lock:
                self._routes.clear()
                for slot in self._slots:
                    slot.sessions.clear()
            return len(known)
        validate_session_id(target)
        with self._lock:
            slot = self._routes.pop(target, None)
            if slot is not None:
                slot.sessions.discard(target)
        slot = slot or self._least_loaded()
        try:
            return ray.get(slot.handle.reset.remote(target))
        except RayActorError:
            self._replace(slot)  # its leases broken: another actor can delete it
            return ray.get(self._least_loaded().handle.reset.remote(target))

    def close(self) -> None:
        """Closes every actor's Repl (flushing checkpoints), then ends the
        actors. Raises ``StoreError`` naming what could not be saved, and
        the sessions of an actor found dead (once; the pool is closed
        either way)."""
        from dolsot.errors import StoreError

        with self._lock:
            if self._closed:
                return
            self._closed = True
            slots, self._slots = self._slots, []
        errors = []
        for slot, ref in [(s, s.handle.close.remote()) for s in slots]:
            try:
                error = ray.get(ref)
            except RayActorError:
                # Died unnoticed: what it held after its last checkpoints is
                # lost, and no Result said so yet.
                error = None
                if slot.sessions:
                    error = (f"the actor hosting sessions {', '.join(sorted(slot.sessions))} "
                             "had died; they continue from their last checkpoint in the store "
                             "(cells after it may be lost)")
            if error:
                errors.append(error)
            ray.kill(slot.handle, no_restart=True)
        self._admin.close()
        if errors:
            raise StoreError("; ".join(errors))

    def __enter__(self) -> "SessionPool":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------- routing

    def actor_of(self, session_id: str) -> Any:
        """The actor handle `session_id` is routed to now (for tests and tools)."""
        return self._route(session_id).handle

    def actors(self) -> list[Any]:
        """The pool's actor handles."""
        with self._lock:
            return [slot.handle for slot in self._slots]

    def _start_actor(self) -> _Slot:
        handle = self._remote.options(**self._actor_options).remote(self._make_store,
                                                                    self._repl_options)
        return _Slot(handle, ray.get(handle.token.remote()))

    def _live_slots(self) -> list[_Slot]:
        with self._lock:
            if self._closed:
                raise ConfigError("this SessionPool is closed")
            return list(self._slots)

    def _least_loaded(self) -> _Slot:
        with self._lock:
            return self._pick_locked()

    def _pick_locked(self) -> _Slot:
        # Waits while every actor is being replaced (a pool of one).
        while not self._slots:
            if self._closed:
                raise ConfigError("this SessionPool is closed")
            self._changed.wait()
        return min(self._slots, key=lambda slot: len(slot.sessions))

    def _route(self, sid: str) -> _Slot:
        with self._lock:
            if self._closed:
                raise ConfigError("this SessionPool is closed")
            slot = self._routes.get(sid)
            if slot is None:
                slot = self._pick_locked()
                slot.sessions.add(sid)
                self._routes[sid] = slot
            return slot

    def _replace(self, dead: _Slot) -> None:
        """Replaces a dead actor: it leaves the routing at once, its leases
        are broken (Ray says it is dead, so it renews them no more), its
        sessions are routed anew at their next cell, and a new actor joins."""
        with self._lock:
            if dead not in self._slots:
                return  # another thread is replacing it already
            self._slots.remove(dead)
            orphans = set(dead.sessions)
            for sid in orphans:
                if self._routes.get(sid) is dead:
                    del self._routes[sid]
            dead.sessions.clear()
        ray.kill(dead.handle, no_restart=True)
        for sid in orphans:
            try:
                self._admin.break_lease(sid, dead.token)
            except Exception:  # noqa: BLE001 - the lease then expires by itself
                pass
        replacement = self._start_actor()
        with self._lock:
            if self._closed:
                ray.kill(replacement.handle, no_restart=True)
                return
            self._slots.append(replacement)
            self._changed.notify_all()
