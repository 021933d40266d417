"""RedisStore: session checkpoints in Redis, so a session can continue on any
host that reaches it, with a lease so only one host runs a session at a time.

Layout under ``prefix`` (``{sid}`` is a Redis Cluster hash tag, so a session's
keys share a slot): ``<prefix>s:{sid}`` is a hash holding the blob (``data``),
its ``size``, ``used`` (time of the last save or append), ``appended``
(the bytes appended since the save; ``list`` adds them to the size) and
``sum`` (SHA-256) or ``mac`` (HMAC-SHA256 with the store key);
``<prefix>j:{sid}`` is a list of what was
appended to the blob since it was saved (a checkpoint's journal frames),
each item its digest (32 bytes, over the session id and the frame) and the
frame; ``<prefix>lease:{sid}`` names the host that holds the session. A save
(which empties the journal) and an append are each one MULTI/EXEC
transaction watching the lease, a load one transaction, every other write
one Lua script: each is atomic.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import socket
import threading
import time
import uuid
from typing import Any, Iterator

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from dolsot._dolsot import SessionInfo, resolve_config, validate_session_id
from dolsot.errors import ConfigError, StoreError
from dolsot.errors import SessionLeased

__all__ = ["RedisStore"]

KEY_ENVIRONMENT = "DOLSOT_STORE_KEY"
_ALL = "all"

# Takes the lease, or renews it when this token holds it. KEYS: lease.
# ARGV: token, lease ms. Returns '' on success, else the holder.
_ACQUIRE = """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return holder end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return ''
"""

# Deletes the lease only while `token` holds it (compare and delete).
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

# Deletes one session (KEYS: session, lease, journal) unless another holder
# has its lease. Returns 0/1, or -1 and the holder.
_DELETE = """
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[1] then return {-1, holder} end
local deleted = redis.call('DEL', KEYS[1])
redis.call('DEL', KEYS[3])
return {deleted, ''}
"""


def _key_from(hmac_key: bytes | str | None) -> bytes | None:
    if hmac_key is None:
        hmac_key = os.environ.get(KEY_ENVIRONMENT) or None
    if hmac_key is None:
        return None
    key = hmac_key.encode() if isinstance(hmac_key, str) else bytes(hmac_key)
    if len(key) < 16:
        raise ConfigError(
            f"the store key (hmac_key or {KEY_ENVIRONMENT}) must be at least 16 bytes, got "
            f"{len(key)}; use a random secret, e.g. `python -c 'import secrets; "
            "print(secrets.token_hex(32))'`"
        )
    return key


class RedisStore:
    """Session checkpoints in Redis (the ``SessionStore`` protocol, plus leases).

    ``RedisStore(url="redis://localhost:6379/0", *, prefix="dolsot:",
    ttl_days=None, hmac_key=None, lease_seconds=30.0, timeout=2.0)``.

    - ``ttl_days``: a checkpoint not saved for that long is expired by Redis
      itself (None: ``DOLSOT_SESSION_TTL_DAYS`` or its default, 7, as for
      FileStore; 0: never).
    - ``hmac_key`` (or ``DOLSOT_STORE_KEY``): blobs are signed on save and
      refused on load unless signed with this key. Without a key a SHA-256
      digest still catches damage. A blob that fails either check raises
      ``StoreError`` naming the damage; it is never returned.
    - ``lease_seconds``: ``load`` leases the session to this store (this
      host) and a daemon thread renews the lease until ``release(sid)`` or
      ``close()``; another store's ``load``, ``save`` or ``delete`` of that
      session raises ``SessionLeased`` (retryable) until then, or until the
      lease expires once this host stops renewing it (it died).
    - ``timeout``: the socket and connect timeout of every Redis call, so a
      Redis that is down or stuck fails a call within about twice that
      (one retry, for a Redis that restarted) instead of hanging.
    """

    def __init__(
        self,
        url: str = "redis://localhost:6379/0",
        *,
        prefix: str = "dolsot:",
        ttl_days: int | None = None,
        hmac_key: bytes | str | None = None,
        lease_seconds: float = 30.0,
        timeout: float = 2.0,
    ) -> None:
        if not isinstance(url, str) or not url:
            raise ConfigError(f"url must be a redis:// URL, got {url!r}")
        if not isinstance(prefix, str) or "{" in prefix or "}" in prefix:
            raise ConfigError(f"prefix must be a str without braces, got {prefix!r}")
        if not isinstance(lease_seconds, (int, float)) or lease_seconds < 0.5:
            raise ConfigError(f"lease_seconds must be a number >= 0.5, got {lease_seconds!r}")
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
        self._url = url
        self._prefix = prefix
        self._ttl_days = int(resolve_config(ttl_days=ttl_days)["ttl_days"])
        self._key = _key_from(hmac_key)
        self._lease_ms = int(lease_seconds * 1000)
        self._timeout = float(timeout)
        self._client = redis.Redis.from_url(
            url,
            socket_timeout=self._timeout,
            socket_connect_timeout=self._timeout,
            retry=Retry(NoBackoff(), 1),
            health_check_interval=0,
        )
        self._acquire_script = self._client.register_script(_ACQUIRE)
        self._release_script = self._client.register_script(_RELEASE)
        self._delete_script = self._client.register_script(_DELETE)
        # Names this store as a lease holder (shown to the host that is refused).
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
        self._held: set[str] = set()
        self._lock = threading.Lock()  # guards _held
        self._lease_lock = threading.Lock()  # orders renewals against releases
        self._stop = threading.Event()
        self._renewer: threading.Thread | None = None
        self._closed = False

    # ------------------------------------------------------------ properties

    @property
    def url(self) -> str:
        return self._url

    @property
    def prefix(self) -> str:
        return self._prefix

    @property
    def ttl_days(self) -> int:
        return self._ttl_days

    @property
    def lease_seconds(self) -> float:
        return self._lease_ms / 1000.0

    @property
    def signed(self) -> bool:
        """True when blobs are signed with an HMAC key."""
        return self._key is not None

    def held(self) -> list[str]:
        """The sessions this store holds a lease on, sorted."""
        with self._lock:
            return sorted(self._held)

    def spec(self) -> dict[str, Any]:
        """The arguments that make an equal store elsewhere (another process
        or a Ray actor); includes the HMAC key when there is one."""
        return {
            "url": self._url,
            "prefix": self._prefix,
            "ttl_days": self._ttl_days,
            "hmac_key": self._key,
            "lease_seconds": self.lease_seconds,
            "timeout": self._timeout,
        }

    def __repr__(self) -> str:
        return f"RedisStore({self._url!r}, prefix={self._prefix!r})"

    # -------------------------------------------------------------- protocol

    def load(self, sid: str) -> bytes | None:
        """The blob of `sid` (None if there is none), after leasing `sid` to
        this store. Raises ``SessionLeased`` if another store holds it and
        ``StoreError`` if the blob is damaged or not signed with this key."""
        self._check_open()
        validate_session_id(sid)
        holder = self._script("load", self._acquire_script, [self._lease_key(sid)],
                              [self.token, self._lease_ms])
        if holder:
            raise self._leased(sid, holder)
        with self._lock:
            held_before = sid in self._held
        self._hold(sid)
        try:
            # The blob and its journal as of one instant (a save empties the journal).
            with self._client.pipeline(transaction=True) as pipe:
                pipe.hmget(self._session_key(sid), ["data", "size", "sum", "mac"])
                pipe.lrange(self._journal_key(sid), 0, -1)
                fields, journal = self._call("load", pipe.execute)
            data, size, digest, mac = fields
            if data is None:
                return None
            self._verify(sid, data, size, digest, mac)
            if journal:
                data = bytes(data) + b"".join(self._verified_frames(sid, journal))
        except StoreError:
            if not held_before:  # not loaded, so not on this host
                try:
                    self.release(sid)
                except StoreError:
                    pass  # no longer renewed: it expires by itself
            raise
        return bytes(data)

    def save(self, sid: str, blob: bytes) -> None:
        """Replaces the blob of `sid` atomically (one transaction), signed or
        digested. Raises ``SessionLeased`` if another store holds `sid`."""
        self._check_open()
        validate_session_id(sid)
        data = bytes(blob)
        field, digest = self._digest(sid, data)
        with self._lock:
            take = sid in self._held
        self._call("save", self._save_transaction, sid, data, field, digest, take)

    def _save_transaction(self, sid: str, data: bytes, field: str, digest: str,
                          take: bool) -> None:
        # The blob travels as a plain argument (a Lua script would copy
        # 100 MB twice more).
        session = self._session_key(sid)

        def write(pipe: Any) -> None:
            pipe.multi()
            if take:
                pipe.set(self._lease_key(sid), self.token, px=self._lease_ms)
            pipe.delete(session, self._journal_key(sid))
            pipe.hset(session, mapping={"data": data, "size": len(data),
                                        "used": repr(time.time()), field: digest})
            if self._ttl_days > 0:
                pipe.expire(session, self._ttl_days * 86400)

        self._leased_transaction("save", sid, [], write)

    def append(self, sid: str, data: bytes) -> None:
        """Appends `data` to the blob of `sid` (a checkpoint's journal frame),
        digested or signed on its own; ``load`` returns the blob and every
        frame appended since it was saved. Raises ``SessionLeased`` if another
        store holds `sid` and ``StoreError`` if `sid` has no blob."""
        self._check_open()
        validate_session_id(sid)
        frame = bytes(data)
        item = self._frame_digest(sid, frame) + frame
        session, journal = self._session_key(sid), self._journal_key(sid)

        def write(pipe: Any) -> None:
            if not pipe.exists(session):  # watched: a save or delete in between retries
                raise StoreError(f"RedisStore.append: session '{sid}' has no checkpoint to "
                                 "append to")
            pipe.multi()
            pipe.rpush(journal, item)
            # For list(), which reports what load returns (the blob and its
            # frames); `size` stays the blob's, which load checks.
            pipe.hincrby(session, "appended", len(frame))
            pipe.hset(session, "used", repr(time.time()))
            if self._ttl_days > 0:
                pipe.expire(session, self._ttl_days * 86400)
                pipe.expire(journal, self._ttl_days * 86400)

        self._call("append", self._leased_transaction, "append", sid, [session], write)

    def _leased_transaction(self, method: str, sid: str, watched: list[str],
                            write: Any) -> None:
        # One MULTI/EXEC watching the lease (and `watched`): `write` queues
        # the commands, and the transaction fails (WatchError: checked again)
        # if one of them changed meanwhile.
        lease = self._lease_key(sid)
        with self._client.pipeline(transaction=True) as pipe:
            for _ in range(16):
                try:
                    pipe.watch(lease, *watched)
                    holder = pipe.get(lease)
                    if holder is not None and holder.decode() != self.token:
                        raise self._leased(sid, holder)
                    write(pipe)
                    pipe.execute()
                    return
                except redis.WatchError:
                    continue
        done = "saved" if method == "save" else "appended"
        raise StoreError(f"RedisStore.{method}: session '{sid}' (its lease or checkpoint) kept "
                         f"changing under 16 attempts; not {done}")

    def delete(self, sid: str) -> int:
        """Deletes `sid` (``"all"``: every session under this prefix, leases
        too); returns how many. Raises ``SessionLeased`` if another store
        holds `sid`."""
        self._check_open()
        if sid == _ALL:
            deleted = 0
            for keys in self._batches(self._pattern("s:")):
                deleted += self._call("delete", self._client.delete, *keys)
            for kind in ("j:", "lease:"):
                for keys in self._batches(self._pattern(kind)):
                    self._call("delete", self._client.delete, *keys)
            with self._lock:
                self._held.clear()
            return deleted
        validate_session_id(sid)
        count, holder = self._script("delete", self._delete_script,
                                     [self._session_key(sid), self._lease_key(sid),
                                      self._journal_key(sid)], [self.token])
        if count < 0:
            raise self._leased(sid, holder)
        return int(count)

    def list(self) -> list[SessionInfo]:
        """Every stored session (id, size, time of its last save), sorted by
        id; reads only the metadata, never a blob."""
        self._check_open()
        keys: list[bytes] = []
        for batch in self._batches(self._pattern("s:")):
            keys.extend(batch)
        pipe = self._client.pipeline(transaction=False)
        for key in keys:
            pipe.hmget(key, ["size", "used", "appended"])
        rows = self._call("list", pipe.execute) if keys else []
        start = len(self._prefix.encode()) + len(b"s:{")
        out = []
        for key, (size, used, appended) in zip(keys, rows):
            if size is None:  # expired or deleted since the scan
                continue
            out.append(SessionInfo(key[start:-1].decode(), int(size) + int(appended or 0),
                                   float(used)))
        return sorted(out, key=lambda info: info.id)

    # ---------------------------------------------------------------- leases

    def release(self, sid: str) -> None:
        """Gives up this store's lease on `sid` (the Repl calls it when the
        session leaves this host). A lease that cannot be deleted now (Redis
        down) is no longer renewed and expires by itself."""
        with self._lease_lock:  # so a renewal in flight cannot take it again
            with self._lock:
                self._held.discard(sid)
            if not self._closed:
                self._script("release", self._release_script, [self._lease_key(sid)],
                             [self.token])

    def break_lease(self, sid: str, holder: str) -> bool:
        """Deletes the lease on `sid` if `holder` (another store's ``token``)
        still holds it; for a supervisor that knows that holder is dead (the
        Ray pool). Returns whether it did. The dead holder's late writes are
        refused once another store leases the session."""
        self._check_open()
        validate_session_id(sid)
        return bool(self._script("break_lease", self._release_script, [self._lease_key(sid)],
                                 [holder]))

    def close(self) -> None:
        """Stops the renewal thread, releases every lease this store holds
        and closes its connections. Idempotent."""
        if self._closed:
            return
        self._stop.set()
        if self._renewer is not None:
            self._renewer.join()
        with self._lock:
            held, self._held = self._held, set()
        for sid in held:
            try:
                self._release_script(keys=[self._lease_key(sid)], args=[self.token])
            except redis.RedisError:
                pass  # not renewed any more: it expires by itself
        self._closed = True
        self._client.close()

    def __enter__(self) -> "RedisStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --------------------------------------------------------------- helpers

    def _session_key(self, sid: str) -> str:
        return f"{self._prefix}s:{{{sid}}}"

    def _lease_key(self, sid: str) -> str:
        return f"{self._prefix}lease:{{{sid}}}"

    def _journal_key(self, sid: str) -> str:
        return f"{self._prefix}j:{{{sid}}}"

    def _pattern(self, kind: str) -> str:
        escaped = "".join("\\" + c if c in "*?[]\\" else c for c in self._prefix)
        return f"{escaped}{kind}{{*}}"

    def _batches(self, pattern: str) -> Iterator[list[bytes]]:
        cursor = 0
        while True:
            cursor, keys = self._call("scan", self._client.scan, cursor, match=pattern, count=500)
            if keys:
                yield keys
            if cursor == 0:
                return

    def _call(self, method: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except redis.RedisError as error:
            raise StoreError(
                f"RedisStore.{method}: Redis at {self._safe_url()} failed: "
                f"{type(error).__name__}: {error}; the store keeps its previous state"
            ) from None

    def _script(self, method: str, script: Any, keys: list[str], args: list[Any]) -> Any:
        return self._call(method, script, keys=keys, args=args)

    def _safe_url(self) -> str:
        kwargs = self._client.connection_pool.connection_kwargs
        where = kwargs.get("path") or f"{kwargs.get('host')}:{kwargs.get('port')}"
        return f"{where} db {kwargs.get('db', 0)}"

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError("this RedisStore is closed")

    def _leased(self, sid: str, holder: Any) -> SessionLeased:
        who = holder.decode(errors="replace") if isinstance(holder, bytes) else str(holder)
        return SessionLeased(
            f"session '{sid}' is leased by another host ({who}); retry once that host "
            f"releases it or its lease expires (at most {self.lease_seconds:g} s after it "
            "stops renewing)"
        )

    def _digest(self, sid: str, data: bytes) -> tuple[str, str]:
        if self._key is not None:
            mac = hmac.new(self._key, sid.encode() + b"\0", hashlib.sha256)
            mac.update(data)
            return "mac", mac.hexdigest()
        digest = hashlib.sha256(sid.encode() + b"\0")
        digest.update(data)
        return "sum", digest.hexdigest()

    def _frame_digest(self, sid: str, frame: bytes) -> bytes:
        if self._key is not None:
            return hmac.new(self._key, b"journal\0" + sid.encode() + b"\0" + frame,
                            hashlib.sha256).digest()
        return hashlib.sha256(b"journal\0" + sid.encode() + b"\0" + frame).digest()

    def _verified_frames(self, sid: str, journal: list[bytes]) -> Iterator[bytes]:
        for number, item in enumerate(journal, 1):
            frame = bytes(item[32:])
            if len(item) < 32 or not hmac.compare_digest(bytes(item[:32]),
                                                         self._frame_digest(sid, frame)):
                signed = "signature" if self._key is not None else "SHA-256 digest"
                raise StoreError(
                    f"the checkpoint journal of session '{sid}' in Redis "
                    f"({self._journal_key(sid)}) is damaged: item {number}'s {signed} does not "
                    "match (signed with another key, or altered); it was not loaded (reset the "
                    "session to start it anew)")
            yield frame

    def _verify(self, sid: str, data: bytes, size: Any, digest: Any, mac: Any) -> None:
        where = f"the checkpoint of session '{sid}' in Redis ({self._session_key(sid)})"
        if size is None or int(size) != len(data):
            raise StoreError(f"{where} is damaged: its size does not match its record; "
                             "it was not loaded (reset the session to start it anew)")
        field, expected = self._digest(sid, data)
        found = mac if field == "mac" else digest
        if found is None:
            why = ("is not signed with this host's store key (DOLSOT_STORE_KEY)"
                   if field == "mac" else "is signed with a store key this host does not have")
            raise StoreError(f"{where} {why}; it was not loaded. Give every host that "
                             "shares the store the same key")
        if not hmac.compare_digest(found.decode(errors="replace"), expected):
            what = "its signature does not match (signed with another key, or altered)" \
                if field == "mac" else "its SHA-256 digest does not match"
            raise StoreError(f"{where} is damaged: {what}; it was not loaded "
                             "(reset the session to start it anew)")

    def _hold(self, sid: str) -> None:
        with self._lock:
            self._held.add(sid)
            if self._renewer is None and not self._stop.is_set():
                self._renewer = threading.Thread(
                    target=self._renew_loop, name="dolsot-redis-lease", daemon=True)
                self._renewer.start()

    def _renew_loop(self) -> None:
        # Renews three times per lease period (taking it again if Redis lost
        # it, say in a restart); a lease another host holds now (this one
        # expired) is dropped, and this host's next save of that session is
        # refused (SessionLeased): two hosts never both write one session.
        while not self._stop.wait(self._lease_ms / 3000.0):
            with self._lock:
                held = list(self._held)
            for sid in held:
                with self._lease_lock:
                    with self._lock:
                        if sid not in self._held:
                            continue  # released meanwhile
                    try:
                        holder = self._acquire_script(keys=[self._lease_key(sid)],
                                                      args=[self.token, self._lease_ms])
                    except redis.RedisError:
                        continue  # Redis down: retried at the next tick
                    if holder:
                        with self._lock:
                            self._held.discard(sid)
