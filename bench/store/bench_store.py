"""Save and load of a 1 MB and a 100 MB checkpoint: RedisStore against
FileStore, measured in the same run, interleaved round by round.

    python bench/store/bench_store.py [--url redis://127.0.0.1:6379/0] \
        [--rounds 15] [--big-rounds 5] [--markdown docs/bench/store.md]

Without --url it starts its own redis-server (Debian's, as the tests do) on a
free loopback port with no persistence, and stops it at the end. Rows:
FileStore (one file, written to a temp file, fsynced, renamed), RedisStore
(one Lua script: lease check, blob, metadata, SHA-256), RedisStore signed
(HMAC-SHA256 instead of the digest), and the floor: the redis client's plain
SET / GET of the same bytes. Figures are medians over rounds and ratios of
medians against FileStore.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import redis

from dolsot.store import FileStore, RedisStore
from redis_server import start_redis




class RawRedis:
    """The floor: one SET / GET of the same bytes with the same client."""

    def __init__(self, url: str) -> None:
        self.client = redis.Redis.from_url(url)

    def save(self, sid: str, blob: bytes) -> None:
        self.client.set(f"bench-raw:{sid}", blob)

    def load(self, sid: str) -> bytes | None:
        return self.client.get(f"bench-raw:{sid}")


def measure(stores: dict, size: int, rounds: int) -> dict[str, tuple[float, float]]:
    blob = os.urandom(size)
    times: dict[str, tuple[list[float], list[float]]] = {name: ([], []) for name in stores}
    names = list(stores)
    for r in range(rounds + 1):
        for name in names[r % len(names):] + names[:r % len(names)]:  # rotate the order
            store = stores[name]
            start = time.perf_counter()
            store.save("bench", blob)
            saved = time.perf_counter()
            loaded = store.load("bench")
            done = time.perf_counter()
            assert loaded == blob
            if r:  # the first round warms up
                times[name][0].append(saved - start)
                times[name][1].append(done - saved)
    return {n: (statistics.median(s), statistics.median(l)) for n, (s, l) in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--big-rounds", type=int, default=5)
    parser.add_argument("--markdown")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="dolsot-bench-store-")
    server = None
    url = args.url
    if url is None:
        server, url = start_redis(work)
    try:
        stores = {
            "FileStore": FileStore(os.path.join(work, "sessions")),
            "RedisStore": RedisStore(url, prefix="bench:"),
            "RedisStore, HMAC key": RedisStore(url, prefix="bench-signed:", hmac_key=b"k" * 32),
            "redis SET/GET (floor)": RawRedis(url),
        }
        rows = []
        for label, size, rounds in (("1 MB", 1 << 20, args.rounds),
                                    ("100 MB", 100 << 20, args.big_rounds)):
            figures = measure(stores, size, rounds)
            base_save, base_load = figures["FileStore"]
            for name, (save, load) in figures.items():
                rows.append(f"| {label} | {name} | {save * 1e3:.1f} | {save / base_save:.2f} "
                            f"| {load * 1e3:.1f} | {load / base_load:.2f} |")
        for store in stores.values():
            if hasattr(store, "close"):
                store.close()
    finally:
        if server is not None:
            server.kill()
            server.wait()
        shutil.rmtree(work, ignore_errors=True)
    load1 = os.getloadavg()[0]
    table = "\n".join(
        [f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
         f"{platform.python_version()}, {redis_version()}, load {load1:.1f}; rounds "
         f"{args.rounds} (1 MB) / {args.big_rounds} (100 MB), medians.", "",
         "| blob | store | save ms | x FileStore | load ms | x FileStore |",
         "|---|---|---:|---:|---:|---:|", *rows])
    print(table)
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write("\n" + table + "\n")


def redis_version() -> str:
    try:
        out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True).stdout
        return "redis-server " + out.split("v=")[1].split()[0]
    except (OSError, IndexError):
        return "redis-server ?"


if __name__ == "__main__":
    sys.exit(main())
