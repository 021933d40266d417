"""A real redis-server for tests: started on a free loopback port with no
persistence, ready once PING answers, stopped and reaped at teardown. CI has
redis-server from scripts/setup.sh; a missing one fails the tests, it never
skips them."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
import uuid

import pytest
import redis


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RedisServer:
    """One redis-server process this test owns; restartable on its port."""

    def __init__(self, workdir) -> None:
        self.binary = shutil.which("redis-server")
        assert self.binary, "redis-server is not installed (scripts/setup.sh installs it)"
        self.workdir = workdir
        self.port = _free_port()
        self.process: subprocess.Popen | None = None
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        assert self.process is None
        self.process = subprocess.Popen(
            [self.binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(self.workdir), "--daemonize", "no",
             "--loglevel", "warning"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
        client = redis.Redis(host="127.0.0.1", port=self.port, socket_connect_timeout=1)
        try:
            for _ in range(200):  # until PING answers (at most ~10 s)
                assert self.process.poll() is None, "redis-server exited at start"
                try:
                    if client.ping():
                        return
                except redis.ConnectionError:
                    time.sleep(0.05)
            raise AssertionError("redis-server did not answer PING")
        finally:
            client.close()

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)  # in case a test paused it
            self.process.kill()
        self.process.wait()
        self.process = None

    def pause(self) -> None:
        """Stops the server without closing its port (a stuck Redis)."""
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        self.process.send_signal(signal.SIGCONT)

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=5)


@pytest.fixture(scope="module")
def redis_server(tmp_path_factory):
    """A redis-server shared by one module's tests that do not stop it (per
    module, so other modules' checks for leftover children never see it)."""
    server = RedisServer(tmp_path_factory.mktemp("redis"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def own_redis_server(tmp_path):
    """A redis-server for one test, which may stop, pause or restart it."""
    server = RedisServer(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def redis_prefix():
    """A key prefix of this test's own, so tests sharing a server never meet."""
    return f"t{uuid.uuid4().hex[:10]}:"
