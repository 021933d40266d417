"""The Ray session pool against one Repl on the same machine, same run: cells
per second over 64 sessions, and the latency the pool adds to one cell, with
cells over the pool's direct channel and over Ray calls.

    python bench/ray/bench_pool.py [--actors 2 4] [--rounds 3] [--cells 8] \
        [--latency-cells 300] [--pace 0] [--checkpoint async] \
        [--max-live-sessions N] [--markdown FILE]

Starts its own redis-server (no persistence, loopback) and Ray in local mode
(2 CPUs, no dashboard). Every backend uses a RedisStore on that server and
the same Repl options (type gate off, checkpoint async, the default); the
one Repl keeps all 64 sessions live (max_live_sessions=64), since evictions
would otherwise dominate its figure, and each pool actor's limit follows the
sessions it is given (the pool's default): its evictions are reported.
Throughput: 64 sessions, `--cells` cells each (`x += 1`), sent from 16
threads; after one warm-up cell per session. Latency: cells back to back on
one warm session from one thread, the pool's and the Repl's in alternating
blocks of 20 (so both see the same load); a pool's extra p50 is its p50
minus the Repl's p50 over those blocks. Each round opens one Repl (kept for
the round) and measures its throughput, then for each actor count a pool
over Ray calls and a pool over the direct channel (their order alternating
by round), then the Repl's throughput again. The figures are medians over
the rounds. Floors, beside them: a no-op call (`hello`) of a pool actor
through Ray and over the direct channel.
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
from typing import Any

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


BLOCK = 20  # latency cells back to back on one backend before the other's turn


def latency(repl, pool, tag: str, cells: int, pace: float) -> tuple[tuple[float, float], ...]:
    """(p50, p90) of the Repl's cells and of the pool's, in alternating blocks
    of BLOCK cells back to back (a cell may wait for its session's previous
    checkpoint: cells sent one by one alternately would hide that from both)."""
    sid = f"{tag}-latency"
    repl.run(sid, "x = 0")
    pool.run(sid, "x = 0")
    times: dict[Any, list[float]] = {repl: [], pool: []}
    for block in range(max(1, cells // BLOCK)):
        for backend in ((repl, pool) if block % 2 == 0 else (pool, repl)):
            for _ in range(BLOCK):
                if pace:
                    time.sleep(pace)  # a pause between cells, as an agent thinks
                start = time.perf_counter()
                backend.run(sid, "x += 1")
                times[backend].append(time.perf_counter() - start)
    out = []
    for backend in (repl, pool):
        ordered = sorted(times[backend])
        out.append((statistics.median(ordered), ordered[int(len(ordered) * 0.9)]))
    return tuple(out)


def floor(call, cells: int, pace: float) -> float:
    """p50 of a call that does nothing on the actor: what reaching it costs
    (paced as the latency cells are)."""
    call()
    times = []
    for _ in range(cells):
        if pace:
            time.sleep(pace)
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--actors", type=int, nargs="+", default=[2, 4])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cells", type=int, default=8)
    parser.add_argument("--latency-cells", type=int, default=300)
    parser.add_argument("--pace", type=float, default=0.0,
                        help="seconds between latency cells (default 0: back to back)")
    parser.add_argument("--checkpoint", choices=("async", "sync", "off"), default="async",
                        help="every backend's checkpoint mode (default async, the library's)")
    parser.add_argument("--max-live-sessions", type=int, default=None,
                        help="each pool actor's fixed limit (default: the pool's, which follows "
                             "the sessions an actor is given; 16 is what actors kept before #39)")
    parser.add_argument("--markdown")
    args = parser.parse_args()
    OPTIONS["checkpoint"] = args.checkpoint
    work = tempfile.mkdtemp(prefix="dolsot-bench-ray-")
    server, url = start_redis(work)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=80 * 1024 * 1024, _node_ip_address="127.0.0.1")
    # label -> per round (cells/s, p50, p90, extra p50 or None)
    figures: dict[str, list[tuple[float, float, float, float | None]]] = {}
    floors: dict[str, list[float]] = {"Ray call": [], "direct channel": []}
    loads = [os.getloadavg()[0]]
    evictions: dict[int, list[int]] = {}  # actors -> per pool, its actors' evictions
    try:
        def pool_run(repl, n: int, channel: str, tag: str) -> tuple[float, ...]:
            store = RedisStore(url, prefix=f"{tag}:")
            with SessionPool(n, store=store, repl_options=OPTIONS, channel=channel,
                             max_live_sessions=args.max_live_sessions) as pool:
                tput = throughput(pool, tag, args.cells)
                evictions.setdefault(n, []).append(sum(a.evictions for a in pool.stats()))
                (rp50, rp90), (p50, p90) = latency(repl, pool, tag, args.latency_cells, args.pace)
                slot = pool._slots[0]
                if channel == "ray":
                    floors["Ray call"].append(
                        floor(lambda: ray.get(slot.handle.hello.remote()), args.latency_cells,
                              args.pace))
                else:
                    assert slot.channel is not None, "the direct channel did not open"
                    floors["direct channel"].append(
                        floor(lambda: slot.channel.call("hello"), args.latency_cells, args.pace))
            store.close()
            return tput, p50, p90, rp50, rp90

        for r in range(args.rounds):
            store = RedisStore(url, prefix=f"r{r}-repl:")
            with Repl(store=store, max_live_sessions=64, **OPTIONS) as repl:
                repl_tputs = [throughput(repl, f"r{r}-repl1", args.cells)]
                repl_lat = []
                for n in args.actors:
                    order = ("ray", "auto") if r % 2 == 0 else ("auto", "ray")
                    for channel in order:
                        tput, p50, p90, rp50, rp90 = pool_run(repl, n, channel,
                                                              f"r{r}-pool{n}{channel}")
                        name = "Ray calls" if channel == "ray" else "direct channel"
                        figures.setdefault(f"SessionPool, {n} actors, {name}", []).append(
                            (tput, p50, p90, p50 - rp50))
                        repl_lat.append((rp50, rp90))
                repl_tputs.append(throughput(repl, f"r{r}-repl2", args.cells))
            store.close()
            figures.setdefault("one Repl", []).append(
                (statistics.mean(repl_tputs), statistics.median(p for p, _ in repl_lat),
                 statistics.median(p for _, p in repl_lat), None))
            loads.append(os.getloadavg()[0])
    finally:
        ray.shutdown()
        server.kill()
        server.wait()
        shutil.rmtree(work, ignore_errors=True)
    repl_tput = statistics.median(f[0] for f in figures["one Repl"])
    lines = [f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "
             f"{platform.python_version()}, Ray {ray.__version__}, checkpoint "
             f"{args.checkpoint}, pool actors' max_live_sessions "
             f"{args.max_live_sessions or 'the default (following the sessions given)'}, "
             f"load average "
             f"{min(loads):.1f}-{max(loads):.1f} (between rounds); {args.rounds} rounds, "
             f"medians; 64 sessions x {args.cells} cells from 16 threads; "
             f"{args.latency_cells} cells for latency, the Repl's and the pool's in "
             f"alternating blocks of {BLOCK}, "
             + (f"{args.pace * 1e3:.0f} ms apart" if args.pace else "back to back")
             + "; the Repl's latency: median over its runs.", "",
             "| backend | cells/s | x one Repl | p50 ms | p90 ms | extra p50 ms (rounds) |",
             "|---|---:|---:|---:|---:|---:|"]
    for label, rounds in figures.items():
        tput = statistics.median(f[0] for f in rounds)
        p50 = statistics.median(f[1] for f in rounds)
        p90 = statistics.median(f[2] for f in rounds)
        extras = [f[3] for f in rounds if f[3] is not None]
        extra = (f"{statistics.median(extras) * 1e3:+.2f} "
                 f"({', '.join(f'{e * 1e3:+.2f}' for e in extras)})" if extras else "")
        lines.append(f"| {label} | {tput:.0f} | {tput / repl_tput:.2f} | {p50 * 1e3:.2f} "
                     f"| {p90 * 1e3:.2f} | {extra} |")
    lines += ["", "A no-op call of a pool actor (p50 per pool, ms): " + "; ".join(
        f"{name} {', '.join(f'{v * 1e3:.3f}' for v in values)}"
        for name, values in floors.items()) + "."]
    lines += ["", "Evictions per pool over its throughput run (all actors): " + "; ".join(
        f"{n} actors {', '.join(map(str, values))}" for n, values in evictions.items()) + "."]
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write("\n" + table + "\n")


if __name__ == "__main__":
    sys.exit(main())
