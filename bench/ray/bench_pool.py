"""The Ray session pool against one Repl on the same machine, same run: cells
per second over 64 sessions, and the latency the pool adds to one cell.

    python bench/ray/bench_pool.py [--actors 2 4] [--cells 8] [--latency-cells 300] \
        [--markdown docs/bench/ray.md]

Starts its own redis-server (no persistence, loopback) and Ray in local mode
(2 CPUs, no dashboard). Every backend uses a RedisStore on that server and
the same Repl options (type gate off, checkpoint async, the default); the
one Repl keeps all 64 sessions live (max_live_sessions=64, as 4 actors of the
default 16 do), since evictions would otherwise dominate its figure.
Throughput: 64 sessions, `--cells` cells each (`x += 1`), sent from 16
threads; after one warm-up cell per session. Latency: cells back to back on
one warm session from one thread; the pool's extra latency is its p50 minus
the Repl's p50 in the same run (both p50 and p90 shown), and Ray's own floor
(a no-op actor call) is printed beside it. Order: Repl, then
each pool, then the Repl again (its two figures bound the drift).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import ray

from dolsot import Repl
from dolsot.ray import SessionPool
from dolsot.store import RedisStore

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "store"))
from redis_server import start_redis  # noqa: E402 (bench/store's helper)

OPTIONS = {"typecheck": False}




def throughput(backend, tag: str, cells: int) -> float:
    sids = [f"{tag}-{i}" for i in range(64)]
    with ThreadPoolExecutor(16) as threads:
        assert all(r.ok for r in threads.map(lambda s: backend.run(s, "x = 0"), sids))
        work = [s for _ in range(cells) for s in sids]
        start = time.perf_counter()
        results = list(threads.map(lambda s: backend.run(s, "x += 1"), work))
        elapsed = time.perf_counter() - start
    assert all(r.ok for r in results)
    return len(work) / elapsed


def latency(backend, tag: str, cells: int) -> tuple[float, float]:
    sid = f"{tag}-latency"
    backend.run(sid, "x = 0")
    times = []
    for _ in range(cells):
        start = time.perf_counter()
        backend.run(sid, "x += 1")
        times.append(time.perf_counter() - start)
    times.sort()
    return statistics.median(times), times[int(len(times) * 0.9)]


def ray_floor(actor, cells: int) -> float:
    """p50 of a call that does nothing: what any Ray actor call costs."""
    ray.get(actor.pid.remote())
    times = []
    for _ in range(cells):
        start = time.perf_counter()
        ray.get(actor.pid.remote())
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actors", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--cells", type=int, default=8)
    parser.add_argument("--latency-cells", type=int, default=300)
    parser.add_argument("--markdown")
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="dolsot-bench-ray-")
    server, url = start_redis(work)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=80 * 1024 * 1024, _node_ip_address="127.0.0.1")
    rows, floors = [], []
    try:
        def repl_row(label: str, tag: str) -> tuple[float, float]:
            store = RedisStore(url, prefix=f"{tag}:")
            with Repl(store=store, max_live_sessions=64, **OPTIONS) as repl:
                tput = throughput(repl, tag, args.cells)
                p50, p90 = latency(repl, tag, args.latency_cells)
            store.close()
            rows.append((label, tput, p50, p90))
            return tput, p50

        base_tput, base_p50 = repl_row("one Repl", "repl1")
        for n in args.actors:
            store = RedisStore(url, prefix=f"pool{n}:")
            with SessionPool(n, store=store, repl_options=OPTIONS) as pool:
                tput = throughput(pool, f"pool{n}", args.cells)
                p50, p90 = latency(pool, f"pool{n}", args.latency_cells)
                floors.append(ray_floor(pool.actors()[0], args.latency_cells))
            store.close()
            rows.append((f"SessionPool, {n} actors", tput, p50, p90))
        end_tput, end_p50 = repl_row("one Repl, again", "repl2")
    finally:
        ray.shutdown()
        server.kill()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)
    repl_tput = (base_tput + end_tput) / 2
    repl_p50 = (base_p50 + end_p50) / 2
    lines = [f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
             f"{platform.python_version()}, Ray {ray.__version__}, load "
             f"{os.getloadavg()[0]:.1f}; 64 sessions x {args.cells} cells from 16 threads; "
             f"{args.latency_cells} cells back to back for latency.", "",
             "| backend | cells/s | x one Repl | p50 ms | p90 ms | extra p50 ms |",
             "|---|---:|---:|---:|---:|---:|"]
    for label, tput, p50, p90 in rows:
        lines.append(f"| {label} | {tput:.0f} | {tput / repl_tput:.2f} | {p50 * 1e3:.2f} "
                     f"| {p90 * 1e3:.2f} | {(p50 - repl_p50) * 1e3:+.2f} |")
    lines += ["", f"Ray's own round trip in the same run (a no-op method of a pool actor, "
              f"p50): {', '.join(f'{f * 1e3:.2f}' for f in floors)} ms."]
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write("\n" + table + "\n")


if __name__ == "__main__":
    sys.exit(main())
