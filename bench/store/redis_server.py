"""A throwaway redis-server for the benchmarks (Debian's, on a free loopback
port, no persistence): bench/store and bench/ray share it."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

import redis


def start_redis(workdir: str) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen(
        [shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind",
         "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", workdir],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    client = redis.Redis(port=port)
    for _ in range(200):
        try:
            client.ping()
            break
        except redis.ConnectionError:
            time.sleep(0.05)
    client.close()
    return server, f"redis://127.0.0.1:{port}/0"
