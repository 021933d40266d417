"""A session's lifecycle costs on a warm worker: the first cell of a new
session, and a crash-and-rollback cycle (a cell that dies with os._exit, then
the next cell on the promoted snapshot). Medians per configuration.

To compare two builds (a change against its base), name them: each round runs
every build once, in a child interpreter with that build first on sys.path,
so background load hits them alike:

  python bench/repl/bench_lifecycle.py --build base=/path/a/build/python \
      --build change=build/python [--rounds 7] [--cells 30]

With no --build, the dolsot on the current sys.path is measured.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time


def measure(cells: int, pace: float) -> dict[str, float]:
    from dolsot import Repl
    from dolsot.store import MemoryStore

    repl = Repl(store=MemoryStore(), typecheck=False)
    repl.run("warm", "1")
    new, cycle = [], []
    for i in range(cells):
        if pace:
            time.sleep(pace)  # untimed: a host that opens sessions now and then
        t0 = time.perf_counter()
        r = repl.run(f"n{i}", "1")
        new.append(time.perf_counter() - t0)
        assert r.ok, r.error
    repl.run("c", "x = 1")
    for _ in range(cells):
        t0 = time.perf_counter()
        bad = repl.run("c", "import os; os._exit(3)")
        good = repl.run("c", "x")
        cycle.append(time.perf_counter() - t0)
        assert not bad.ok and good.value == "1", (bad.error, good.error)
    repl.close()
    return {"new_session_ms": statistics.median(new) * 1e3,
            "crash_cycle_ms": statistics.median(cycle) * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", action="append", default=[],
                        help="name=path of a build's python directory")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--cells", type=int, default=30)
    parser.add_argument("--pace", type=float, default=0.0,
                        help="seconds between new sessions (untimed); 0: back to back")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child or not args.build:
        print(json.dumps(measure(args.cells, args.pace)))
        return
    builds = [b.split("=", 1) for b in args.build]
    results: dict[str, list[dict[str, float]]] = {name: [] for name, _ in builds}
    for _ in range(args.rounds):
        for name, path in builds:
            code = (f"import sys; sys.path.insert(0, {path!r}); sys.argv = {sys.argv[:1] + ['--child', '--cells', str(args.cells), '--pace', str(args.pace)]!r}; "
                    f"exec(open({__file__!r}).read())")
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                 check=True).stdout.strip().splitlines()[-1]
            results[name].append(json.loads(out))
    print(f"| build | new session, first cell (ms) | crash + next cell (ms) |")
    print("|---|--:|--:|")
    for name, _ in builds:
        rows = results[name]
        print(f"| {name} | {statistics.median(r['new_session_ms'] for r in rows):.2f} | "
              f"{statistics.median(r['crash_cycle_ms'] for r in rows):.2f} |")


if __name__ == "__main__":
    main()
