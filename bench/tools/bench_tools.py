"""Host tool round trip: a no-op host function called from a Repl cell, against
a pipe round trip (the floor under any two-process exchange) measured in the
same run, and the same call in-process.

Run: PYTHONPATH=<build>/python python bench/tools/bench_tools.py \
       --pipe-floor <build>/bench/repl/bench_repl_pipe_floor [--rounds 5] [--calls 2000]
(or `cmake --build <build> --target bench_tools`). Rounds interleave the
configurations so background load hits them alike; each round's figure is the
p50 of its calls, the report is the median over rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess

import dolsot
from dolsot.store import MemoryStore

# Timed inside the cell: only the call, none of the cell's own round trip.
CELL = (
    "import time as _t\n"
    "_ts = []\n"
    "for _ in range({calls}):\n"
    "    _s = _t.perf_counter(); noop(); _ts.append(_t.perf_counter() - _s)\n"
    "_ts.sort()\n"
    "(_ts[len(_ts) // 2] * 1e6, _ts[len(_ts) * 99 // 100] * 1e6)"
)


def in_cell(backend, calls):
    r = backend.run("bench", CELL.format(calls=calls))
    if not r.ok:
        raise SystemExit(r.error)
    p50, p99 = eval(r.value)  # noqa: S307 - a tuple of floats our own cell printed
    backend.reset("bench")
    return p50, p99


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pipe-floor", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    tools = {"noop": lambda: None}
    repl = dolsot.Repl(store=MemoryStore(), typecheck=False, tools=tools)
    inproc = dolsot.InProcessSession(typecheck=False, tools=tools)
    rows = {"repl": [], "repl_p99": [], "inprocess": [], "pipe": [], "pipe_p99": []}
    in_cell(repl, 200)  # warm up
    load_before = os.getloadavg()[0]
    for _ in range(args.rounds):
        p50, p99 = in_cell(repl, args.calls)
        rows["repl"].append(p50)
        rows["repl_p99"].append(p99)
        floor = json.loads(subprocess.check_output([args.pipe_floor, str(args.calls)]))
        rows["pipe"].append(floor["p50_us"])
        rows["pipe_p99"].append(floor["p99_us"])
        rows["inprocess"].append(in_cell(inproc, args.calls)[0])
    repl.close()
    inproc.close()
    med = {k: statistics.median(v) for k, v in rows.items()}
    ratios = [a / b for a, b in zip(rows["repl"], rows["pipe"])]
    print(f"Repl tool round trip p50 {med['repl']:.1f} µs (p99 {med['repl_p99']:.1f}); "
          f"pipe round trip p50 {med['pipe']:.1f} µs (p99 {med['pipe_p99']:.1f}); "
          f"ratio median {statistics.median(ratios):.2f}x "
          f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)}); "
          f"in-process call p50 {med['inprocess']:.2f} µs")
    print("per round, tool / floor p50 µs: "
          + ", ".join(f"{a:.1f}/{b:.1f}" for a, b in zip(rows["repl"], rows["pipe"]))
          + f"; load average (1 min) {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")


if __name__ == "__main__":
    main()
