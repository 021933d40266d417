"""The general path against pydantic-monty (issue #39): cells that define a
function, call one, loop or build a comprehension, back to back (or paced),
per-cell wall time in the same run, configurations interleaved in rounds so
background load hits them alike.

- dolsot: a `Repl()` as it ships (rollback on, async checkpoints to a
  MemoryStore, no sandbox): cells the binding proof accepts (read_only_cell.h)
  fork no rollback point and write no checkpoint at once;
- dolsot, proofs off: the same build with `DOLSOT_READ_ONLY_CELLS=0` (every
  cell forks its rollback point and its checkpoint writer: the design before);
- pydantic-monty 1.4.0: a MontySession checked out of a Monty() pool (one
  warm worker), `session.feed_run(cell)` per cell, no rollback.

Each cell runs `--cells` times in a row in one session after a setup cell;
the figure is the median. The issue's target: dolsot within 4x Monty's time
p50, back to back.

Run: PYTHONPATH=<build>/python python bench/repl/bench_general_path.py [--rounds 5] [--cells 200] [--pace 0]
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

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SETUP = "def f(x):\n    return x * 2\n"
LOOP = ("total = 0\nevens = []\nfor i in range(50):\n    if i % 2 == 0:\n        evens.append(i)\n"
        "        total += i\n    else:\n        total -= 1\ncount = len(evens)\ntotal")
CELLS = {
    "def f(x): ...": ("def f(x):\n    return x * 2", None),
    "f(20)": ("f(20)", 40),
    "10-line loop": (LOOP, 575),
    "comprehension": ("squares = [i * i for i in range(100) if i % 3]\nlen(squares)", 66),
}


def ensure_monty() -> None:
    if importlib.util.find_spec("pydantic_monty") is None:
        requirements = os.path.join(ROOT, "requirements", "bench.txt")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r", requirements], check=True)


def time_dolsot_here(code: str, expected, cells: int, pace: float) -> float:
    from dolsot import Repl
    from dolsot.store import MemoryStore

    repl = Repl(store=MemoryStore(), typecheck=False)
    try:
        assert repl.run("s", SETUP).ok
        lat = []
        for _ in range(cells):
            if pace:
                time.sleep(pace)
            t0 = time.perf_counter()
            result = repl.run("s", code)
            lat.append(time.perf_counter() - t0)
            want = None if expected is None else repr(expected)
            assert result.ok and result.value == want, (result.value, result.error)
        return statistics.median(lat)
    finally:
        repl.close()


def time_dolsot(proofs: bool, cell: str, cells: int, pace: float) -> float:
    """In a child process: DOLSOT_READ_ONLY_CELLS is read once, by the engine
    a process starts."""
    env = dict(os.environ, DOLSOT_READ_ONLY_CELLS="1" if proofs else "0")
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", cell,
                          "--cells", str(cells), "--pace", str(pace)],
                         env=env, check=True, capture_output=True, text=True).stdout
    return float(out.strip().splitlines()[-1])


def time_monty(pool, code: str, expected, cells: int, pace: float) -> float:
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


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3f} ms"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cells", type=int, default=200)
    parser.add_argument("--pace", type=float, default=0.0,
                        help="seconds between cells, not timed (0: back to back)")
    parser.add_argument("--child", help=argparse.SUPPRESS)  # one dolsot measurement
    args = parser.parse_args()
    if args.child:
        code, expected = CELLS[args.child]
        print(time_dolsot_here(code, expected, args.cells, args.pace))
        return
    ensure_monty()
    from pydantic_monty import Monty

    names = ("dolsot", "dolsot, proofs off", "pydantic-monty")
    rows = {cell: {n: [] for n in names} for cell in CELLS}
    load_before = os.getloadavg()
    with Monty(min_processes=1, max_processes=1) as pool:
        for _ in range(args.rounds):
            for cell, (code, expected) in CELLS.items():
                rows[cell][names[0]].append(time_dolsot(True, cell, args.cells, args.pace))
                rows[cell][names[1]].append(time_dolsot(False, cell, args.cells, args.pace))
                rows[cell][names[2]].append(time_monty(pool, code, expected, args.cells, args.pace))
    load_after = os.getloadavg()
    print(f"{args.rounds} rounds x {args.cells} cells each, {args.pace * 1e3:.0f} ms apart; medians of "
          f"the per-round medians; {os.cpu_count()} CPUs, load average (1/5/15 min) before "
          f"{'/'.join(f'{x:.2f}' for x in load_before)}, after {'/'.join(f'{x:.2f}' for x in load_after)}")
    print("| cell | dolsot | dolsot, proofs off | pydantic-monty | dolsot / monty | proofs off / monty |")
    print("|---|---|---|---|---|---|")
    for cell in CELLS:
        on, off, monty = (statistics.median(rows[cell][n]) for n in names)
        print(f"| `{cell}` | {ms(on)} | {ms(off)} | {ms(monty)} | {on / monty:.2f}x | {off / monty:.2f}x |")
    for cell in CELLS:
        print(cell, {n: [ms(v) for v in rows[cell][n]] for n in names})


if __name__ == "__main__":
    main()
