"""Host tool round trip: a no-op host function called from a Repl cell, against
a pipe round trip (the floor under any two-process exchange) measured in the
same run, and the same call in-process; also a call that sends arguments and
gets them back (the no-op call pickles nothing: see docs/benchmarks.md), and
the same 64-byte round trip over a unix socket pair (the transport before
the cell's tool pipes; informational).

Run: PYTHONPATH=<build>/python python bench/tools/bench_tools.py \
       --pipe-floor <build>/bench/repl/bench_repl_pipe_floor [--rounds 5] [--calls 2000] \
       [--base <other build>/python]
(or `cmake --build <build> --target bench_tools`). Rounds interleave the
configurations so background load hits them alike; each round's figure is the
p50 of its calls, the report is the median over rounds. With --base, each
round also times the Repl calls of another build (in a child process whose
PYTHONPATH is that directory), for an A/B in the same rounds.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

# Timed inside the cell: only the call, none of the cell's own round trip.
CELL = (
    "import time as _t\n"
    "_ts = []\n"
    "_arg = (1, 'text', 2.5)\n"
    "for _ in range({calls}):\n"
    "    _s = _t.perf_counter(); {call}; _ts.append(_t.perf_counter() - _s)\n"
    "_ts.sort()\n"
    "(_ts[len(_ts) // 2] * 1e6, _ts[len(_ts) * 99 // 100] * 1e6)"
)
CALLS = {"noop": "noop()", "args": "echo(_arg, key=3)"}
TOOLS = {"noop": lambda: None, "echo": lambda value, key=None: value}


def in_cell(backend, calls, call="noop"):
    r = backend.run("bench", CELL.format(calls=calls, call=CALLS[call]))
    if not r.ok:
        raise SystemExit(r.error)
    p50, p99 = eval(r.value)  # noqa: S307 - a tuple of floats our own cell printed
    backend.reset("bench")
    return p50, p99


def repl_rounds(calls: int, rounds: int):
    """Yields, per round, {call: (p50, p99)} from one Repl of this interpreter's dolsot."""
    import dolsot
    from dolsot.store import MemoryStore

    repl = dolsot.Repl(store=MemoryStore(), typecheck=False, tools=TOOLS)
    try:
        in_cell(repl, 200)  # warm up
        for _ in range(rounds):
            yield {name: in_cell(repl, calls, name) for name in CALLS}
    finally:
        repl.close()


def child(calls: int) -> None:
    """--child: one round per line read from stdin, its figures as a JSON line."""
    rounds = repl_rounds(calls, 1 << 30)
    for _ in sys.stdin:
        print(json.dumps(next(rounds)), flush=True)
    rounds.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pipe-floor")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--base", help="another build's python/ directory, timed in the same rounds")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.calls)
        return
    if not args.pipe_floor:
        parser.error("--pipe-floor is required")
    import dolsot

    base = None
    if args.base:
        env = dict(os.environ, PYTHONPATH=args.base, PYTHONDONTWRITEBYTECODE="1")
        base = subprocess.Popen([sys.executable, __file__, "--child", "--calls", str(args.calls)],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    inproc = dolsot.InProcessSession(typecheck=False, tools=TOOLS)
    rows: dict[str, list[float]] = {k: [] for k in (
        "repl", "repl_p99", "args", "base", "base_args", "inprocess", "pipe", "pipe_p99",
        "socket")}
    load_before = os.getloadavg()[0]
    ours = repl_rounds(args.calls, args.rounds)
    try:
        for _ in range(args.rounds):
            got = next(ours)
            rows["repl"].append(got["noop"][0])
            rows["repl_p99"].append(got["noop"][1])
            rows["args"].append(got["args"][0])
            floor = json.loads(subprocess.check_output([args.pipe_floor, str(args.calls)]))
            rows["pipe"].append(floor["p50_us"])
            rows["pipe_p99"].append(floor["p99_us"])
            # The same over a unix socket pair (the tool calls' transport
            # before their pipes): informational.
            sock = json.loads(subprocess.check_output([args.pipe_floor, str(args.calls), "socket"]))
            rows["socket"].append(sock["p50_us"])
            if base is not None:
                base.stdin.write("round\n")
                base.stdin.flush()
                theirs = json.loads(base.stdout.readline())
                rows["base"].append(theirs["noop"][0])
                rows["base_args"].append(theirs["args"][0])
            rows["inprocess"].append(in_cell(inproc, args.calls)[0])
    finally:
        ours.close()
        inproc.close()
        if base is not None:
            base.stdin.close()
            base.wait(timeout=60)
    med = {k: statistics.median(v) for k, v in rows.items() if v}
    ratios = [a / b for a, b in zip(rows["repl"], rows["pipe"])]
    print(f"Repl tool round trip p50 {med['repl']:.1f} µs (p99 {med['repl_p99']:.1f}); "
          f"pipe round trip p50 {med['pipe']:.1f} µs (p99 {med['pipe_p99']:.1f}); "
          f"ratio median {statistics.median(ratios):.2f}x "
          f"(rounds: {', '.join(f'{r:.2f}' for r in ratios)}); "
          f"in-process call p50 {med['inprocess']:.2f} µs; "
          f"with arguments (echo((1, 'text', 2.5), key=3)) p50 {med['args']:.1f} µs; "
          f"socket pair round trip p50 {med['socket']:.1f} µs (tool / socket "
          f"{statistics.median(a / b for a, b in zip(rows['repl'], rows['socket'])):.2f}x)")
    print("per round, tool / floor p50 µs: "
          + ", ".join(f"{a:.1f}/{b:.1f}" for a, b in zip(rows["repl"], rows["pipe"]))
          + f"; load average (1 min) {load_before:.2f} before, {os.getloadavg()[0]:.2f} after")
    if base is not None:
        base_ratios = [a / b for a, b in zip(rows["base"], rows["pipe"])]
        print(f"base build ({args.base}): tool p50 {med['base']:.1f} µs, ratio median "
              f"{statistics.median(base_ratios):.2f}x (rounds: "
              + ", ".join(f"{a:.1f}" for a in rows["base"])
              + f"); with arguments {med['base_args']:.1f} µs")


if __name__ == "__main__":
    main()
