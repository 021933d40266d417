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

Two builds side by side (one interpreter loads one build, so each round runs
this script once per build, alternating, in a child with --json):
  python bench/sandbox/bench_sandbox.py --compare main=/path/to/main/build/python \
      walls=build/python [--rounds 5]
prints the medians of both builds and the second against the first.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

if "--compare" not in sys.argv:  # the comparing parent loads no build
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


def signed_ms(seconds: float) -> str:
    return ("+" if seconds >= 0 else "-") + ms(abs(seconds))


def compare(args) -> None:
    """Each round runs every build once (a child with --json), alternating."""
    builds = [spec.split("=", 1) for spec in args.compare]
    rows = {name: {k: {False: [], True: []} for k in ("paced", "start", "session")}
            for name, _ in builds}
    load = [os.getloadavg()[0]]
    for _ in range(args.rounds):
        for name, path in builds:
            env = dict(os.environ, PYTHONPATH=path)
            out = subprocess.run([sys.executable, __file__, "--json", "--rounds", "1",
                                  "--cells", str(args.cells), "--pace", str(args.pace),
                                  "--sessions", str(args.sessions)],
                                 env=env, check=True, capture_output=True, text=True).stdout
            for key, by_sandbox in json.loads(out).items():
                for sandboxed in (False, True):
                    rows[name][key][sandboxed] += by_sandbox[str(sandboxed).lower()]
        load.append(os.getloadavg()[0])
    med = {name: {k: {s: statistics.median(v[s]) for s in (False, True)} for k, v in by.items()}
           for name, by in rows.items()}
    (base, _), (new, _) = builds[0], builds[-1]
    print(f"{args.rounds} rounds; medians of the per-round medians; load average "
          f"{min(load):.1f}-{max(load):.1f}")
    print(f"| measurement | {base}: plain | {base}: sandboxed | {new}: plain | {new}: sandboxed "
          f"| {new} sandboxed vs {base} sandboxed | {new} sandboxed vs its plain |")
    print("|---|---|---|---|---|---|---|")
    labels = {"paced": f"paced cell ({args.pace * 1e3:.0f} ms apart)", "start": "worker start",
              "session": "new session"}
    for key, label in labels.items():
        a, b = med[base][key], med[new][key]
        if key == "paced":
            versus, own = f"{b[True] / a[True]:.2f}x", f"{b[True] / b[False]:.2f}x"
        else:
            versus, own = signed_ms(b[True] - a[True]), signed_ms(b[True] - b[False])
        print(f"| {label} | {ms(a[False])} | {ms(a[True])} | {ms(b[False])} | {ms(b[True])} "
              f"| {versus} | {own} |")
    for name in rows:
        for key in rows[name]:
            print(name, key, {s: [ms(v) for v in rows[name][key][s]] for s in (False, True)})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cells", type=int, default=100)
    parser.add_argument("--pace", type=float, default=0.05)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--compare", nargs="+", metavar="NAME=PYTHONPATH")
    parser.add_argument("--json", action="store_true", help="raw figures, for --compare")
    args = parser.parse_args()
    if args.compare:
        compare(args)
        return
    rows = {k: {False: [], True: []} for k in ("paced", "start", "session")}
    for _ in range(args.rounds):
        for sandboxed in (False, True):
            rows["paced"][sandboxed].append(paced(sandboxed, args.cells, args.pace))
            rows["start"][sandboxed].append(worker_start(sandboxed))
            rows["session"][sandboxed].append(new_session(sandboxed, args.sessions))
    if args.json:
        print(json.dumps({k: {str(s).lower(): v[s] for s in (False, True)} for k, v in rows.items()}))
        return
    print(f"{args.rounds} rounds; medians of the per-round medians")
    print("| measurement | plain Repl | sandboxed | sandboxed vs plain | target |")
    print("|---|---|---|---|---|")
    p0, p1 = (statistics.median(rows["paced"][s]) for s in (False, True))
    print(f"| paced cell ({args.pace * 1e3:.0f} ms apart, rollback, async) | {ms(p0)} | {ms(p1)} | "
          f"{p1 / p0:.2f}x | <= 1.1x |")
    s0, s1 = (statistics.median(rows["start"][s]) for s in (False, True))
    print(f"| worker start (to the first Result) | {ms(s0)} | {ms(s1)} | {signed_ms(s1 - s0)} | <= +20 ms |")
    n0, n1 = (statistics.median(rows["session"][s]) for s in (False, True))
    print(f"| new session (first cell, warm worker) | {ms(n0)} | {ms(n1)} | {signed_ms(n1 - n0)} | <= +2 ms |")
    for key in rows:
        print(key, {s: [ms(v) for v in rows[key][s]] for s in (False, True)})


if __name__ == "__main__":
    main()
