"""SessionPool: live sessions spread over Ray actors, each hosting a Repl over
one shared RedisStore. A session sticks to its actor while that actor lives
(affinity); new sessions go to the actor with the fewest; when an actor dies,
its sessions continue on the others from their last checkpoint in the store.
Ray does the scheduling and the processes; this module only routes. Cells
and the other calls travel over a direct channel to each actor
(`ray_channel.py`), not through Ray, whose own call costs ~1 ms; Ray starts,
watches, kills and replaces the actors.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from typing import Any, Callable, Mapping, NamedTuple

import ray
from ray.exceptions import GetTimeoutError, RayActorError

from dolsot._backend import AsyncRunMixin, OnImage, OnOutput
from dolsot._dolsot import Outcome, Result, SessionInfo, validate_session_id
from dolsot.errors import ConfigError, SessionBusy
from dolsot.ray_channel import Channel, ChannelLost, ChannelServer

__all__ = ["ActorStats", "SessionPool"]

StoreSpec = Callable[[], Any]

CHANNELS = ("auto", "unix", "tcp", "ray")
CLASSIFY_SECONDS = 10.0  # how long a broken channel waits for Ray's word on its actor

# Live sessions per actor (docs/stores.md, "Live sessions per actor"). What one
# live idle session costs the machine, rounded up from the PSS of a Repl's
# process tree per session after an ordinary cell (12.5 MB, issue #39), and
# what an actor sizing itself from the node's memory leaves free.
SESSION_BYTES = 16 * 1024 * 1024
RESERVE_FRACTION = 0.1
REPL_DEFAULT_LIVE = 16  # a Repl's own max_live_sessions, where an actor starts


def _available_memory() -> int | None:
    """Bytes this node can still give (MemAvailable), or None when unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def _total_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


class _LiveSizing:
    """How many sessions an actor's Repl keeps live. ``fixed``: the pool's
    ``max_live_sessions`` (never changed). Else the limit follows the
    sessions the pool has given the actor (those it ran and did not reset),
    from the Repl's default of 16 up, bounded by memory: ``memory`` (the
    bytes Ray reserved for the actor, ``actor_options["memory"]``) divided by
    SESSION_BYTES, or without it what the node still has (MemAvailable, less
    RESERVE_FRACTION of the total) at each raise, one SESSION_BYTES a session
    more, so actors sharing a node share what is left. MemAvailable falls as
    sessions come live; sessions given at once (up to the actor's
    max_concurrency) may each find the room not yet taken by the others, so
    the limit can pass the room by that many sessions, within the reserve.
    Never lowered: a session past the limit is evicted, not refused."""

    def __init__(self, fixed: int | None, memory: int | None) -> None:
        self.fixed = fixed
        self.memory = memory
        self.given: set[str] = set()
        self.lock = threading.Lock()

    def initial(self) -> int:
        if self.fixed is not None:
            return self.fixed
        if self.memory is not None:
            return max(1, min(REPL_DEFAULT_LIVE, self.memory // SESSION_BYTES))
        return REPL_DEFAULT_LIVE

    def _bound(self, cap: int, wanted: int) -> int:
        """The limit ``wanted`` comes to from ``cap`` within memory (>= 1)."""
        if self.memory is not None:
            return max(1, min(wanted, self.memory // SESSION_BYTES))
        available = _available_memory()
        if available is None:
            return max(1, min(wanted, max(cap, REPL_DEFAULT_LIVE)))
        room = (available - int(_total_memory() * RESERVE_FRACTION)) // SESSION_BYTES
        return max(1, cap, min(wanted, cap + max(0, room)))

    def give(self, sid: str, repl: Any) -> None:
        """`sid` runs on this actor: the limit grows to the sessions given."""
        with self.lock:
            if sid in self.given:
                return
            self.given.add(sid)
            if self.fixed is not None:
                return
            cap = repl.max_live_sessions
            if len(self.given) > cap:
                raised = self._bound(cap, len(self.given))
                if raised > cap:
                    repl.max_live_sessions = raised

    def forget(self, target: str) -> None:
        with self.lock:
            if target == "all":
                self.given.clear()
            else:
                self.given.discard(target)


class _Host:
    """The actor: one Repl over its own store (same Redis, its own lease
    token), and the listener of its direct channel. ``channel``: None (Ray
    calls only) or ``{"kind": "auto" | "unix" | "tcp", "node": the driver's
    node id, "authkey": bytes}``; "auto" is a unix socket when the driver is
    on this node, else TCP on this node's IP."""

    _CALLS = frozenset({"run", "interrupt", "sessions", "reset", "hello", "stats"})  # the channel's

    def __init__(self, make_store: StoreSpec, repl_options: Mapping[str, Any],
                 channel: Mapping[str, Any] | None = None,
                 live: tuple[int | None, int | None] = (None, None)) -> None:
        from dolsot import Repl

        self.sizing = _LiveSizing(*live)  # (the pool's max_live_sessions, Ray's memory)
        self.store = make_store()
        self.repl = Repl(store=self.store, max_live_sessions=self.sizing.initial(),
                         **dict(repl_options))
        self.server: ChannelServer | None = None
        self.channel_error = None if channel else "the pool asked for Ray calls only"
        if channel:
            try:
                kind, here = channel["kind"], ray.get_runtime_context().get_node_id()
                if kind == "auto":
                    kind = "unix" if here == channel["node"] else "tcp"
                host = ""
                if kind == "tcp":  # the address Ray's own node uses
                    host = next(n["NodeManagerAddress"] for n in ray.nodes() if n["NodeID"] == here)
                self.server = ChannelServer(self._serve, channel["authkey"], kind, host)
            except Exception as error:  # noqa: BLE001 - the pool falls back to Ray calls
                self.channel_error = f"the actor could not listen ({type(error).__name__}: {error})"

    def hello(self) -> tuple[str, str | None, Any, str | None]:
        """(lease token, channel kind or None, its address, why there is none)."""
        if self.server is None:
            return self.store.token, None, None, self.channel_error
        return self.store.token, self.server.kind, self.server.address, None

    def _serve(self, method: str, args: tuple, emit: Callable[[str, Any], None] | None) -> Any:
        if method not in self._CALLS:
            raise ValueError(f"the channel serves {sorted(self._CALLS)}, not {method!r}")
        if emit is not None:
            if method != "run":
                raise ValueError(f"only run streams events, not {method!r}")
            return self.run(*args, emit=emit)
        return getattr(self, method)(*args)

    def pid(self) -> int:
        import os

        return os.getpid()

    def run(self, sid: str, code: str, timeout: float | None,
            variables: dict[str, Any] | None = None, live: tuple[bool, bool] | None = None,
            emit: Callable[[str, Any], None] | None = None) -> dict[str, Any]:
        """The cell's Result as a dict. ``live``: (on_output, on_image) as the
        pool's caller gave them: the Repl streams those to ``emit`` (the
        channel's events, ``("out", str)`` and ``("image", bytes)``) or,
        without a channel (a Ray call cannot stream), into the reply's
        ``"live"`` list, delivered by the pool when the call returns."""
        collected: list[tuple[str, Any]] = []
        send = emit if emit is not None else (lambda kind, payload: collected.append(
            (kind, payload)))
        callbacks: dict[str, Any] = {}
        if live and live[0]:
            callbacks["on_output"] = lambda text: send("out", text)
        if live and live[1]:
            callbacks["on_image"] = lambda png: send("image", png)
        if sid not in self.sizing.given:
            self.sizing.give(sid, self.repl)
        result = self.repl.run(sid, code, timeout=timeout, variables=variables, **callbacks)
        return {
            "live": collected,
            "ok": result.ok, "value": result.value, "stdout": result.stdout,
            "error": result.error, "exit_code": result.exit_code, "held": list(result.held),
            "dropped": list(result.dropped), "outcome": result.outcome.name,
            "save_error": result.save_error, "error_type": result.error_type,
            "images": list(result.images), "has_returned": result.has_returned,
            "returned": result.returned if result.has_returned else None,
        }

    def interrupt(self, sid: str) -> None:
        self.repl.interrupt(sid)

    def sessions(self) -> list[tuple[str, int, float]]:
        return [(s.id, s.size_bytes, s.last_used) for s in self.repl.sessions()]

    def reset(self, target: str) -> int:
        forgotten = self.repl.reset(target)
        self.sizing.forget(target)
        return forgotten

    def stats(self) -> dict[str, int]:
        """The sessions given to this actor, its Repl's live-session limit and
        how many live sessions that limit has evicted so far."""
        with self.sizing.lock:
            given = len(self.sizing.given)
        return {"sessions": given, "max_live_sessions": self.repl.max_live_sessions,
                "evictions": self.repl.evictions}

    def close(self) -> str | None:
        """Stops the channel (no new cells), closes the Repl (flushing
        checkpoints, releasing leases), waits for the channel's threads,
        then closes the store; returns what went wrong, or None."""
        errors = []
        if self.server is not None:
            self.server.stop()
        try:
            self.repl.close()
        except Exception as e:  # noqa: BLE001 - reported to the pool's close
            errors.append(str(e))
        if self.server is not None:
            left = self.server.join(30.0)
            if left:
                errors.append(f"{len(left)} channel threads of the actor did not end")
        self.store.close()
        return "; ".join(errors) or None


class ActorStats(NamedTuple):
    """One actor of a pool, as ``SessionPool.stats()`` reports it."""

    sessions: int           # sessions the pool gave it (run there, not reset)
    max_live_sessions: int  # its Repl's live-session limit now
    evictions: int          # live sessions that limit ended so far (checkpointed)


class PoolResult(Result):
    """A Result that crossed from an actor (Result itself has no pickling):
    the same fields, ``save_error``, ``error_type``, ``images`` and the
    final answer (``returned``, a copy unpickled here) included."""

    def __init__(self, fields: Mapping[str, Any]) -> None:
        super().__init__(ok=fields["ok"], value=fields["value"], stdout=fields["stdout"],
                         error=fields["error"], exit_code=fields["exit_code"],
                         held=fields["held"], dropped=fields["dropped"],
                         outcome=Outcome.__members__[fields["outcome"]],
                         error_type=fields.get("error_type"), save_error=fields["save_error"],
                         images=fields.get("images", ()))
        self._has_returned = bool(fields.get("has_returned", False))
        self._returned = fields.get("returned")

    @property
    def has_returned(self) -> bool:
        return self._has_returned

    @property
    def returned(self) -> Any:
        return self._returned


class _LiveRelay:
    """One run()'s on_output/on_image in the pool: the actor's events reach
    them on the calling thread, in order. The first exception either raises
    is logged once (logger ``dolsot``, as a Repl does); the cell goes on."""

    def __init__(self, on_output: OnOutput | None, on_image: OnImage | None) -> None:
        for name, callback in (("on_output", on_output), ("on_image", on_image)):
            if callback is not None and not callable(callback):
                raise TypeError(f"run() argument '{name}' must be a callable or None, "
                                f"not {type(callback).__name__}")
        self._callbacks = {"out": ("on_output", on_output), "image": ("on_image", on_image)}
        self._logged = False

    def __call__(self, kind: str, payload: Any) -> None:
        name, callback = self._callbacks.get(kind, (kind, None))
        if callback is None:
            return  # not asked for (the actor sends only what was)
        try:
            callback(payload)
        except Exception:  # noqa: BLE001 - the caller's bug is not the cell's
            if not self._logged:
                self._logged = True
                logging.getLogger("dolsot").error(
                    "%s raised; the cell goes on (this is logged once per run, later errors "
                    "are not)", name, exc_info=True)


class _Slot:
    """One actor of the pool and what the pool knows of it."""

    def __init__(self, handle: Any, token: str, channel: Channel | None) -> None:
        self.handle = handle
        self.token = token
        self.channel = channel  # None: Ray calls
        self.sessions: set[str] = set()

    def call(self, method: str, *args: Any,
             on_event: Callable[[str, Any], None] | None = None) -> Any:
        """`method(*args)` on the actor, over its channel or else through Ray.
        Raises ChannelLost or RayActorError when the actor cannot answer.
        ``on_event``: the channel's events as they come (none through Ray)."""
        if self.channel is not None:
            return self.channel.call(method, *args, on_event=on_event)
        return ray.get(getattr(self.handle, method).remote(*args))

    def end(self) -> None:
        """The pool is done with this actor (closed, or found dead): kills it
        and removes its unix socket if the actor could not."""
        ray.kill(self.handle, no_restart=True)
        if self.channel is not None:
            self.channel.close()
            self.channel.remove_endpoint()


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
    lease_wait=None, channel="auto", max_live_sessions=None)``. ``store``: a RedisStore, whose ``spec()`` (HMAC key
    included) makes each actor's own store, or a picklable zero-argument
    callable returning a store every actor can reach. ``repl_options``: the
    keyword arguments of each actor's ``Repl``. ``actor_options``: Ray's
    ``.options()`` for the actors (default ``num_cpus=0``, so actors fit on
    any node, ``max_concurrency=32``: cells of different sessions on one
    actor run in parallel, as on a Repl). ``lease_wait``: how long ``run``
    retries a session another host still holds (default: twice the store's
    lease) before it raises ``SessionBusy``. ``channel``: how calls reach
    the actors: ``"auto"`` (a unix socket to an actor on the driver's node,
    else TCP), ``"unix"``, ``"tcp"``, or ``"ray"`` (Ray calls, ~1 ms more per
    cell). An actor whose channel cannot be opened is called through Ray,
    with a ``RuntimeWarning`` saying why. ``max_live_sessions``: how many
    sessions each actor's Repl keeps live before it evicts the least recently
    used to the store (an int >= 1, or in ``repl_options``); None (default):
    the limit follows the sessions the pool gives the actor, from 16 up,
    bounded by the actor's memory (``_LiveSizing``). ``stats()`` reports,
    per actor, the sessions given, the limit and the evictions so far.

    ``run(session_id, code, *, timeout=None, variables=None, on_output=None,
    on_image=None) -> Result`` (``arun`` awaits it, ``astream`` yields its
    chunks then the Result), ``interrupt(session_id)``, ``sessions()``,
    ``reset(target)``, ``close()``: as on a Repl. ``on_output``/``on_image``
    are called on the thread that called ``run`` as the actor's Repl streams
    over the channel; through Ray calls they are called when the cell ends. A cell
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
        channel: str = "auto",
        max_live_sessions: int | None = None,
    ) -> None:
        if not isinstance(num_actors, int) or isinstance(num_actors, bool) or num_actors < 1:
            raise ConfigError(f"num_actors must be an int >= 1, got {num_actors!r}")
        repl_options = dict(repl_options or {})
        if "max_live_sessions" in repl_options:
            if max_live_sessions is not None:
                raise ConfigError("max_live_sessions is given twice (to SessionPool and in "
                                  "repl_options); give it once")
            max_live_sessions = repl_options.pop("max_live_sessions")
        if max_live_sessions is not None and (
                not isinstance(max_live_sessions, int) or isinstance(max_live_sessions, bool)
                or not 1 <= max_live_sessions <= 2**31 - 1):
            raise ConfigError("max_live_sessions (live sessions per actor) must be an int >= 1, "
                              f"or None to follow the sessions each actor is given; got "
                              f"{max_live_sessions!r}")
        if channel not in CHANNELS:
            raise ConfigError(f"channel must be one of {', '.join(CHANNELS)}; got {channel!r}")
        if not ray.is_initialized():
            raise ConfigError("Ray is not initialized: call ray.init(...) before SessionPool")
        self._make_store = _store_factory(store)
        self._repl_options = repl_options
        self._actor_options = {"num_cpus": 0, "max_concurrency": 32, **(actor_options or {})}
        memory = self._actor_options.get("memory")
        self._live = (max_live_sessions, None if memory is None else int(memory))
        self._channel_spec = None if channel == "ray" else {
            "kind": channel, "node": ray.get_runtime_context().get_node_id(),
            "authkey": os.urandom(32)}
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
            variables: dict[str, Any] | None = None, on_output: OnOutput | None = None,
            on_image: OnImage | None = None) -> Result:
        validate_session_id(session_id)
        relay = _LiveRelay(on_output, on_image)
        live = None
        if on_output is not None or on_image is not None:
            live = (on_output is not None, on_image is not None)
        deadline = time.monotonic() + self._lease_wait
        while True:
            slot = self._route(session_id)
            try:
                fields = slot.call("run", session_id, code, timeout, variables, live,
                                   on_event=relay if live else None)
                for kind, payload in fields.pop("live", ()):  # a Ray call's, at its end
                    relay(kind, payload)
                return PoolResult(fields)
            except (RayActorError, ChannelLost) as error:
                what = self._lost(slot, error)
                return PoolResult({
                    "ok": False, "value": None, "stdout": "", "exit_code": 1, "held": [],
                    "dropped": [], "outcome": "WORKER_LOST", "save_error": None,
                    "error": (f"WorkerError: the Ray actor hosting session '{session_id}' {what}; "
                              "this cell's effects may be lost. The session continues on another "
                              "actor from its last checkpoint."),
                })
            except SessionBusy:
                # Another host still holds the session (a lease not yet given
                # up or expired): retry until lease_wait runs out.
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.05)

    def interrupt(self, session_id: str) -> None:
        """Stops the cell running in `session_id` now, as ``Repl.interrupt``
        (its Result: ``INTERRUPTED``, exit 130); nothing if none runs. Asked
        of the session's actor over another connection of its channel (or a
        Ray call); an actor that cannot answer is left to the running call,
        which reports it."""
        validate_session_id(session_id)
        with self._lock:
            if self._closed:
                raise ConfigError("this SessionPool is closed")
            slot = self._routes.get(session_id)
        if slot is None:
            return  # never routed: nothing runs there
        try:
            slot.call("interrupt", session_id)
        except (RayActorError, ChannelLost):
            pass

    def sessions(self) -> list[SessionInfo]:
        """Every session of the pool: live on an actor or stored, by id. An
        actor found dead is replaced (its sessions are in the store)."""
        merged: dict[str, tuple[str, int, float]] = {}
        for slot in self._live_slots():
            try:
                rows = slot.call("sessions")
            except (RayActorError, ChannelLost) as error:
                self._lost(slot, error)
                continue
            for row in rows:
                if row[0] not in merged or row[1] > merged[row[0]][1]:
                    merged[row[0]] = row
        return [SessionInfo(*merged[sid]) for sid in sorted(merged)]

    def stats(self) -> list[ActorStats]:
        """Per actor, in the order of ``actors()``: the sessions the pool gave
        it, its Repl's live-session limit and how many live sessions that
        limit evicted (checkpointed to the store and ended; the next cell of
        one restores it, a round trip to Redis). An actor found dead is
        replaced, and its counts start again at 0 in the new one."""
        out = []
        for slot in self._live_slots():
            try:
                out.append(ActorStats(**slot.call("stats")))
            except (RayActorError, ChannelLost) as error:
                self._lost(slot, error)
        return out

    def reset(self, target: str) -> int:
        """Forgets `target` (``"all"``: every session) on its actor and in the
        store; returns how many sessions were forgotten."""
        if target == "all":
            known = {info.id for info in self.sessions()}
            for slot in self._live_slots():
                try:
                    slot.call("reset", "all")
                except (RayActorError, ChannelLost) as error:
                    self._lost(slot, error)  # the others' reset wiped the store
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
            return slot.call("reset", target)
        except (RayActorError, ChannelLost) as error:
            self._lost(slot, error)  # its leases broken: another actor can delete it
            return self._least_loaded().call("reset", target)

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
        for slot in slots:
            if slot.channel is not None:
                slot.channel.close()  # calls in flight end when the actor stops its channel
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
            slot.end()
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

    def channel_of(self, session_id: str) -> str:
        """How cells of `session_id` reach its actor now: "unix", "tcp" or "ray"."""
        channel = self._route(session_id).channel
        return "ray" if channel is None else channel.kind

    def _start_actor(self) -> _Slot:
        handle = self._remote.options(**self._actor_options).remote(
            self._make_store, self._repl_options, self._channel_spec, self._live)
        token, kind, address, why = ray.get(handle.hello.remote())
        channel = None
        if kind is not None:
            try:
                channel = Channel(kind, address, self._channel_spec["authkey"],
                                  self._actor_options["max_concurrency"])
            except ChannelLost as error:
                why = f"the pool could not connect ({error})"
        if channel is None and self._channel_spec is not None:
            warnings.warn(f"dolsot.ray.SessionPool: no direct channel to a new actor: {why}; "
                          "its calls go through Ray (~1 ms more per cell)", RuntimeWarning,
                          stacklevel=2)
        return _Slot(handle, token, channel)

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

    def _lost(self, slot: _Slot, error: Exception) -> str:
        """A call found `slot`'s actor unable to answer: replaces it and says
        what happened. A broken channel is classified by asking Ray whether
        the actor is dead; either way the actor is replaced, since the cell's
        fate and the actor's state are unknown."""
        if self._closed:
            raise ConfigError("this SessionPool was closed during the call") from error
        what = f"died ({type(error).__name__})"
        if isinstance(error, ChannelLost):
            try:
                ray.get(slot.handle.hello.remote(), timeout=CLASSIFY_SECONDS)
                what = (f"broke its direct channel ({error}) though Ray reports it alive; the "
                        "pool replaced it")
            except RayActorError as dead:
                what = f"died ({type(dead).__name__})"
            except GetTimeoutError:
                what = (f"broke its direct channel ({error}) and did not answer Ray within "
                        f"{CLASSIFY_SECONDS:.0f} s; the pool replaced it")
        self._replace(slot)
        return what

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
        dead.end()
        for sid in orphans:
            try:
                self._admin.break_lease(sid, dead.token)
            except Exception:  # noqa: BLE001 - the lease then expires by itself
                pass
        replacement = self._start_actor()
        with self._lock:
            if self._closed:
                replacement.end()
                return
            self._slots.append(replacement)
            self._changed.notify_all()
