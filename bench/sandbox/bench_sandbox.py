"""The Sandbox's cost (issue #16): medians, sandboxed against plain Repls
measured in the same run, configurations interleaved in rounds so background
load hits them alike.

- paced cell: a trivial cell 50 ms apart, rollback on, async checkpoint, with
  and without the default Sandbox (target <= 1.1x);
- worker start: Repl(...) to the first cell's Result, minus that cell (the
  first run starts the worker; target <= +20 ms);
- new session: the first cell of a new session on a warm worker (target
  <= +2 ms).

Run: PYTHONPATH=<build>/python python bench/sandbox/bench_sandbox.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from dolsot import Repl, Sandbox
from dolsot.store import MemoryStore


def make(sandboxed: bool) -> Repl:
    return Repl(store=MemoryStore(), typecheck=False,
                sandbox=Sandbox() if sandboxed else None)


def paced(sandboxed: bool, cells: int, pace: float) -> float:
    r = make(sandboxed)
    r.run("s", "x = 1")
    lat = []
    for _ in range(cells):
        time.sleep(pace)
        t0 = time.perf_counter()
        res = r.run("s", "x + 1")
        lat.append(time.perf_counter() - t0)
        assert res.ok and res.value == "2", res.error
    r.close()
    return statistics.median(lat)


def worker_start(sandboxed: bool) -> float:
    t0 = time.perf_counter()
    r = make(sandboxed)
    res = r.run("s", "1")
    elapsed = time.perf_counter() - t0
    assert res.ok, res.error
    r.close()
    return elapsed


def new_session(sandboxed: bool, sessions: int) -> float:
    r = make(sandboxed)
    r.run("warm", "1")
    lat = []
    for i in range(sessions):
        t0 = time.perf_counter()
        res = r.run(f"s{i}", "1")
        lat.append(time.perf_counter() - t0)
        assert res.ok, res.error
        r.reset(f"s{i}")
    r.close()
    return statistics.median(lat)


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cells", type=int, default=100)
    parser.add_argument("--pace", type=float, default=0.05)
    parser.add_argument("--sessions", type=int, default=20)
    args = parser.parse_args()
    rows = {k: {False: [], True: []} for k in ("paced", "start", "session")}
    for _ in range(args.rounds):
        for sandboxed in (False, True):
            rows["paced"][sandboxed].append(paced(sandboxed, args.cells, args.pace))
            rows["start"][sandboxed].append(worker_start(sandboxed))
            rows["session"][sandboxed].append(new_session(sandboxed, args.sessions))
    print(f"{args.rounds} rounds; medians of the per-round medians")
    print("| measurement | plain Repl | sandboxed | sandboxed vs plain | target |")
    print("|---|---|---|---|---|")
    p0, p1 = (statistics.median(rows["paced"][s]) for s in (False, True))
    print(f"| paced cell ({args.pace * 1e3:.0f} ms apart, rollback, async) | {ms(p0)} | {ms(p1)} | "
          f"{p1 / p0:.2f}x | <= 1.1x |")
    s0, s1 = (statistics.median(rows["start"][s]) for s in (False, True))
    print(f"| worker start (to the first Result) | {ms(s0)} | {ms(s1)} | +{ms(s1 - s0)} | <= +20 ms |")
    n0, n1 = (statistics.median(rows["session"][s]) for s in (False, True))
    print(f"| new session (first cell, warm worker) | {ms(n0)} | {ms(n1)} | +{ms(n1 - n0)} | <= +2 ms |")
    for key in rows:
        print(key, {s: [ms(v) for v in rows[key][s]] for s in (False, True)})


if __name__ == "__main__":
    main()
