"""The Ray session pool's direct channel: cells go from the pool to an actor
over a socket of their own instead of a Ray call (which costs ~1 ms alone).

Actor side, ``ChannelServer``: a listener (a unix socket in a private 0700
directory when the pool's driver is on the actor's node, else TCP on the
node's IP), whose every connection, once authenticated, is served by a thread
of its own: a request pickle in, its reply pickle out, one at a time. A
request that asks for it (live output) gets event pickles ahead of its reply,
``(kind, payload)`` as the handler emits them while it runs; the reply is
``("ok", value)`` or ``("err", exception)``.
Pool side, ``Channel``: up to ``limit`` connections to one actor, each used by
one calling thread at a time, so cells of different sessions run in parallel
and a thread's cells stay in order.

Both ends prove they know the pool's random key (``multiprocessing.connection``'s
HMAC challenge-response, both ways) before any pickle is read: the pickles are
code. The handshake has a deadline and the server a cap on connections, so a
client that connects and stays silent ties up one thread for a few seconds,
not the listener. After the handshake nothing is encrypted: the channel is as
trusted as Ray's own network, which must not be reachable by anyone else.
"""

from __future__ import annotations

import os
import pickle
import selectors
import socket
import struct
import tempfile
import threading
import time
from multiprocessing import connection as mpc
from typing import Any, Callable

__all__ = ["Channel", "ChannelLost", "ChannelServer"]

HANDSHAKE_SECONDS = 5.0  # a connection that has not authenticated by then is closed
CONNECT_SECONDS = 10.0
MAX_CONNECTIONS = 256  # per actor; the pool opens at most its max_concurrency


REPLIES = ("ok", "err")  # the last message of a call; anything else is an event


class ChannelLost(Exception):
    """The channel to an actor could not be opened, or broke during a call."""


class _Emitter:
    """Sends a call's events on its connection while the handler runs (from
    any thread, one at a time), until the reply is sent: then it is sealed
    and a late event raises instead of landing in the next call's stream."""

    def __init__(self, conn: mpc.Connection) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._sealed = False

    def __call__(self, kind: str, payload: Any) -> None:
        if kind in REPLIES:
            raise ValueError(f"an event cannot be of kind {kind!r}")
        data = pickle.dumps((kind, payload), pickle.HIGHEST_PROTOCOL)
        with self._lock:
            if self._sealed:
                raise ChannelLost("the call this event belongs to has returned")
            self._conn.send_bytes(data)

    def reply(self, payload: bytes) -> None:
        with self._lock:
            self._sealed = True
            self._conn.send_bytes(payload)


def _deadline(sock: socket.socket, seconds: float) -> None:
    """Bounds each blocking read and write of `sock` (0: no bound). Set on
    the kernel socket, so it holds for the Connection over a dup of its fd."""
    timeval = struct.pack("ll", int(seconds), int(seconds % 1 * 1e6))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, timeval)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, timeval)


def _no_delay(sock: socket.socket) -> None:
    """A reply goes out at once on TCP: a large message is two writes (length,
    then bytes), which Nagle's algorithm would hold for the peer's ACK."""
    if sock.family != socket.AF_UNIX:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def _authenticate(sock: socket.socket, authkey: bytes, server: bool) -> mpc.Connection:
    """The mutual challenge-response on a connected blocking socket, within
    HANDSHAKE_SECONDS; returns a Connection over a dup of its fd (the socket
    stays the caller's, to shut down or close). Raises on a wrong key."""
    _deadline(sock, HANDSHAKE_SECONDS)
    conn = mpc.Connection(os.dup(sock.fileno()))
    try:
        if server:
            mpc.deliver_challenge(conn, authkey)
            mpc.answer_challenge(conn, authkey)
        else:
            mpc.answer_challenge(conn, authkey)
            mpc.deliver_challenge(conn, authkey)
        _deadline(sock, 0)
    except BaseException:
        conn.close()
        raise
    return conn


class ChannelServer:
    """An actor's listener and the threads serving its connections.

    ``ChannelServer(handler, authkey, kind, host)``: ``kind`` is ``"unix"``
    or ``"tcp"`` (bound to ``host``, port chosen by the kernel);
    ``handler(method, args, emit)`` answers one request; ``emit(kind,
    payload)`` sends an event ahead of the reply when the client asked for
    them (else ``emit`` is None). ``address`` is what
    ``Channel`` connects to. ``stop()`` closes the listener and shuts every
    connection down (a cell being served finishes); ``join(timeout)`` waits
    for the threads and returns the names of any still alive.
    """

    def __init__(self, handler: Callable[[str, tuple, Any], Any], authkey: bytes, kind: str,
                 host: str = "127.0.0.1") -> None:
        self._handler = handler
        self._authkey = authkey
        self._lock = threading.Lock()
        self._conns: set[socket.socket] = set()
        self._unproven: dict[socket.socket, float] = {}  # in the handshake: its deadline
        self._threads: set[threading.Thread] = set()
        self._stopped = False
        self._dir: str | None = None
        if kind == "unix":
            self._dir = tempfile.mkdtemp(prefix="dolsot-ch-")  # mode 0700: only this user
            self.address: Any = os.path.join(self._dir, "s")
            family = socket.AF_UNIX
        elif kind == "tcp":
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
        else:
            raise ValueError(f"channel kind must be 'unix' or 'tcp', got {kind!r}")
        self.kind = kind
        self._listener = self._wake_r = self._wake_w = None
        try:
            self._listener = socket.socket(family, socket.SOCK_STREAM)
            self._wake_r, self._wake_w = socket.socketpair()
            if kind == "unix":
                self._listener.bind(self.address)
            else:
                self._listener.bind((host, 0))
                self.address = self._listener.getsockname()[:2]
            self._listener.listen(128)
        except BaseException:
            self._release_listener()
            raise
        self._acceptor = threading.Thread(target=self._accept_loop, name="dolsot-channel-accept",
                                          daemon=True)
        self._acceptor.start()

    def _release_listener(self) -> None:
        for sock in (self._listener, self._wake_r, self._wake_w):
            if sock is not None:
                sock.close()
        if self._dir is not None:
            try:
                os.unlink(os.path.join(self._dir, "s"))
            except FileNotFoundError:
                pass
            os.rmdir(self._dir)
            self._dir = None

    def _accept_loop(self) -> None:
        with selectors.DefaultSelector() as selector:
            selector.register(self._listener, selectors.EVENT_READ)
            selector.register(self._wake_r, selectors.EVENT_READ)
            while True:
                ready = {key.fileobj for key, _ in selector.select(self._expire())}
                if self._wake_r in ready:
                    return
                if self._listener not in ready:
                    continue
                try:
                    sock, _ = self._listener.accept()
                except OSError:
                    continue  # the client gave up before it was accepted
                sock.setblocking(True)  # accept() may return a socket with the listener's mode
                _no_delay(sock)
                with self._lock:
                    if self._stopped or len(self._conns) >= MAX_CONNECTIONS:
                        sock.close()
                        continue
                    self._conns.add(sock)
                    self._unproven[sock] = time.monotonic() + HANDSHAKE_SECONDS
                    thread = threading.Thread(target=self._serve, args=(sock,), daemon=True,
                                              name="dolsot-channel-conn")
                    self._threads.add(thread)
                thread.start()

    def _expire(self) -> float:
        """Shuts down the connections whose handshake outran its deadline
        (a client sending a byte at a time); returns the time to the next."""
        now = time.monotonic()
        with self._lock:
            for sock in [s for s, t in self._unproven.items() if t <= now]:
                del self._unproven[sock]
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
            return min(self._unproven.values(), default=now + 3600) - now

    def _serve(self, sock: socket.socket) -> None:
        conn = None
        try:
            conn = _authenticate(sock, self._authkey, server=True)
            with self._lock:
                self._unproven.pop(sock, None)
            while True:
                try:
                    request = conn.recv_bytes()
                except (EOFError, OSError):
                    return  # the pool closed it, or stop() shut it down
                emit = None
                try:
                    method, args, events = pickle.loads(request)
                    emit = _Emitter(conn) if events else None
                    reply = ("ok", self._handler(method, args, emit))
                except Exception as error:  # noqa: BLE001 - raised again in the pool
                    reply = ("err", error)
                try:
                    payload = pickle.dumps(reply, pickle.HIGHEST_PROTOCOL)
                except Exception as error:  # noqa: BLE001 - an unpicklable error or value
                    payload = pickle.dumps(("err", RuntimeError(
                        f"the actor's reply could not be pickled: {error!r}")))
                if emit is not None:
                    emit.reply(payload)
                else:
                    conn.send_bytes(payload)
        except Exception:  # noqa: BLE001 - a failed handshake or a vanished client
            return
        finally:
            if conn is not None:
                conn.close()
            with self._lock:
                self._conns.discard(sock)
                self._unproven.pop(sock, None)
                self._threads.discard(threading.current_thread())
                sock.close()

    def stop(self) -> None:
        """No new connections; every open one is shut down. Idempotent."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
            for sock in self._conns:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        self._wake_w.send(b"x")
        self._acceptor.join()
        self._release_listener()

    def join(self, timeout: float) -> list[str]:
        """Waits up to `timeout` seconds for the connections' threads (a cell
        being served ends first); returns the names of those still alive.
        Call it after stop()."""
        deadline = time.monotonic() + timeout
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return [t.name for t in threads if t.is_alive()]


class Channel:
    """The pool's connections to one actor's ChannelServer: at most `limit`
    open, each lent to one calling thread per call. Thread-safe."""

    def __init__(self, kind: str, address: Any, authkey: bytes, limit: int) -> None:
        self.kind = kind
        self.address = address
        self._authkey = authkey
        self._limit = limit
        self._cond = threading.Condition()
        self._idle: list[mpc.Connection] = []
        self._open = 0
        self._closed = False
        first = self._connect()  # fails here if the channel cannot be opened at all
        with self._cond:
            self._open += 1
            self._idle.append(first)

    def call(self, method: str, *args: Any,
             on_event: Callable[[str, Any], None] | None = None) -> Any:
        """Sends `method(*args)` and returns its reply, or raises what the
        actor raised; ChannelLost when the connection fails or breaks. With
        ``on_event``, the actor's handler may emit events while it runs:
        each reaches ``on_event(kind, payload)`` on this thread, in order,
        as it arrives (the actor's sends wait while this one is slow)."""
        request = pickle.dumps((method, args, on_event is not None),
                               pickle.HIGHEST_PROTOCOL)  # a caller's error raises here
        conn = self._take()
        try:
            conn.send_bytes(request)
            while True:
                status, value = pickle.loads(conn.recv_bytes())
                if status in REPLIES:
                    break
                if on_event is None:
                    raise ValueError(f"an event ({status!r}) came for a call that asked for none")
                on_event(status, value)
        except BaseException as error:
            self._drop(conn)  # its reply may still come: never reuse it
            if isinstance(error, (EOFError, OSError, pickle.UnpicklingError, ValueError)):
                raise ChannelLost(f"the connection broke ({type(error).__name__}: {error})"
                                  ) from error
            raise
        self._give(conn)
        if status == "err":
            raise value
        return value

    def open_connections(self) -> int:
        with self._cond:
            return self._open

    def close(self) -> None:
        """Closes the idle connections; one in use is closed when its call
        returns. Later calls raise ChannelLost."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._open -= len(idle)
            self._cond.notify_all()
        for conn in idle:
            conn.close()

    def remove_endpoint(self) -> None:
        """Removes a unix channel's socket and private directory when its
        server could not (its actor died): a no-op if gone, or for TCP."""
        if self.kind != "unix":
            return
        directory = os.path.dirname(self.address)
        if not os.path.basename(directory).startswith("dolsot-ch-"):
            return
        for remove, path in ((os.unlink, self.address), (os.rmdir, directory)):
            try:
                remove(path)
            except OSError:
                pass

    def _connect(self) -> mpc.Connection:
        family = socket.AF_UNIX if self.kind == "unix" else (
            socket.AF_INET6 if ":" in self.address[0] else socket.AF_INET)
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.settimeout(CONNECT_SECONDS)
            sock.connect(self.address)
            sock.settimeout(None)
            _no_delay(sock)
            return _authenticate(sock, self._authkey, server=False)
        except (OSError, EOFError, mpc.AuthenticationError) as error:
            raise ChannelLost(f"could not connect to {self.address!r} "
                              f"({type(error).__name__}: {error})") from error
        finally:
            sock.close()  # the Connection holds its own dup of the fd

    def _take(self) -> mpc.Connection:
        with self._cond:
            while True:
                if self._closed:
                    raise ChannelLost("the channel is closed")
                if self._idle:
                    return self._idle.pop()
                if self._open < self._limit:
                    self._open += 1
                    break
                self._cond.wait()
        try:
            return self._connect()
        except BaseException:
            with self._cond:
                self._open -= 1
                self._cond.notify()
            raise

    def _give(self, conn: mpc.Connection) -> None:
        with self._cond:
            if not self._closed:
                self._idle.append(conn)
                self._cond.notify()
                return
            self._open -= 1
        conn.close()

    def _drop(self, conn: mpc.Connection) -> None:
        conn.close()
        with self._cond:
            self._open -= 1
            self._cond.notify()
