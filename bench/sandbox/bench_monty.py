"""Side by side with pydantic-monty (issue #16): per-cell wall time of cells
both can run, in the same run, configurations interleaved in rounds so
background load hits them alike.

- dolsot Repl with the default Sandbox (bench_sandbox.make(True));
- dolsot Repl without a sandbox (bench_sandbox.make(False));
- pydantic_monty: a MontySession checked out of a Monty() pool (one warm
  worker subprocess), `session.feed_run(cell)` per cell.

What each keeps between cells: a dolsot session keeps its whole namespace
and snapshots it before every cell (rollback on, the default), so a failed
cell rolls back; a MontySession (1.4.0) keeps its globals between feeds in
its worker, with no rollback. Each cell's source is compiled on every call
by both (dolsot: CPython's compile in the session process; monty: its parser
in the worker), and both figures count it. Both run the cell in another
process and pay a round trip per cell. Cells: trivial (`1 + 1`), a loop (a
thousand iterations of integer arithmetic), a function call (a recursive
function defined once in the session before timing).

Back to back (the default) a dolsot cell also waits for the previous cell's
snapshot and async checkpoint to be out of the way; `--pace 0.05` leaves
50 ms between cells (untimed), as an agent's model call would.

Run: PYTHONPATH=<build>/python python bench/sandbox/bench_monty.py [--rounds 5] [--pace 0.05]
pydantic-monty is pinned in requirements/bench.txt and installed from there
when missing.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

from bench_sandbox import make, ms  # noqa: E402  (the sandbox bench's harness)


def ensure_monty() -> None:
    if importlib.util.find_spec("pydantic_monty") is None:
        requirements = os.path.join(ROOT, "requirements", "bench.txt")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r", requirements], check=True)


ensure_monty()

from pydantic_monty import Monty  # noqa: E402

SETUP = "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"
CELLS = {
    "trivial": ("1 + 1", 2),
    "loop": ("t = 0\nfor i in range(1000):\n    t += i * i % 7\nt", sum(i * i % 7 for i in range(1000))),
    "function call": ("fib(15)", 610),
}


def time_dolsot(sandboxed: bool, code: str, expected, cells: int, pace: float) -> float:
    r = make(sandboxed)
    assert r.run("s", SETUP).ok
    lat = []
    for _ in range(cells):
        if pace:
            time.sleep(pace)
        t0 = time.perf_counter()
        res = r.run("s", code)
        lat.append(time.perf_counter() - t0)
        assert res.ok and res.value == repr(expected), (res.value, res.error)
    r.close()
    return statistics.median(lat)


def time_monty(pool: Monty, code: str, expected, cells: int, pace: float) -> float:
    lat = []
    with pool.checkout() as session:
        session.feed_run(SETUP)
        for _ in range(cells):
            if pace:
                time.sleep(pace)
            t0 = time.perf_counter()
            value = session.feed_run(code)
            lat.append(time.perf_counter() - t0)
            assert value == expected, value
    return statistics.median(lat)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cells", type=int, default=200)
    parser.add_argument("--pace", type=float, default=0.0,
                        help="seconds between cells, not timed (0: back to back)")
    args = parser.parse_args()
    names = ("dolsot + Sandbox", "dolsot, no sandbox", "pydantic-monty")
    rows = {cell: {n: [] for n in names} for cell in CELLS}
    load_before = os.getloadavg()
    with Monty(min_processes=1, max_processes=1) as pool:
        for _ in range(args.rounds):
            for cell, (code, expected) in CELLS.items():
                rows[cell][names[0]].append(time_dolsot(True, code, expected, args.cells, args.pace))
                rows[cell][names[1]].append(time_dolsot(False, code, expected, args.cells, args.pace))
                rows[cell][names[2]].append(time_monty(pool, code, expected, args.cells, args.pace))
    load_after = os.getloadavg()
    print(f"{args.rounds} rounds x {args.cells} cells each, {args.pace * 1e3:.0f} ms apart; medians of the per-round medians; "
          f"{os.cpu_count()} CPUs, load average (1/5/15 min) before "
          f"{'/'.join(f'{x:.2f}' for x in load_before)}, after "
          f"{'/'.join(f'{x:.2f}' for x in load_after)}")
    print("| cell | dolsot + Sandbox | dolsot, no sandbox | pydantic-monty | Sandbox vs none | "
          "monty vs dolsot + Sandbox |")
    print("|---|---|---|---|---|---|")
    for cell in CELLS:
        sbx, plain, monty = (statistics.median(rows[cell][n]) for n in names)
        print(f"| {cell} | {ms(sbx)} | {ms(plain)} | {ms(monty)} | {sbx / plain:.2f}x | "
              f"{monty / sbx:.2f}x |")
    for cell in CELLS:
        print(cell, {n: [ms(v) for v in rows[cell][n]] for n in names})


if __name__ == "__main__":
    main()
