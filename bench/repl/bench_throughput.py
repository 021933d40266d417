"""Throughput of one Repl under many sessions (#22): 64 sessions, 8 threads,
2 cores, a mix of trivial cells that read the state (`x + 1`, `len(name)`)
and cells that change it (`x += 1`), default configuration (rollback on,
async checkpoints), cells per second, and nothing lost: every session's `x`
is checked at the end, in the Repl and after a restart from the store.

Each configuration runs in its own child process (one build per
interpreter), interleaved in rounds; medians over rounds. The comparison is
the same build with read-only and binding cells turned off
(DOLSOT_READ_ONLY_CELLS=0: every cell forks its snapshot and checkpoints, as
before those changes), and with DOLSOT_CHECKPOINT_DELAY=0 (a binding cell's
checkpoint is written at once, by the timer, instead of up to 1 s later:
shared by the cells in between). Cells per second over the cells; the close
that follows (every session durable once it returns) is reported apart.

    PYTHONPATH=build/python python bench/repl/bench_throughput.py \
        [--rounds 3] [--sessions 64] [--threads 8] [--cells 16] [--read-share 0 0.5 0.9]
        [--general-share 0.2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import atexit, json, random, shutil, sys, tempfile, time
from concurrent.futures import ThreadPoolExecutor
import dolsot
from dolsot.store import FileStore
sessions, threads, cells, share, seed = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
general = float(sys.argv[6])  # of the writes: `box.append(1)` on 300 items (the general path)
cache = tempfile.mkdtemp(prefix="dolsot-throughput-")
atexit.register(shutil.rmtree, cache, True)  # also when a check below fails
store = FileStore(cache)
repl = dolsot.Repl(store=store, typecheck=False, max_live_sessions=sessions)
sids = [f"s{i}" for i in range(sessions)]
for sid in sids:
    # box holds more than a binding cell may (256 items): appending to it
    # takes the general path (a snapshot fork and a full checkpoint).
    assert repl.run(sid, "x = 0; name = 'dolsot'; box = list(range(300))").ok
rng = random.Random(seed)
CELLS = {"read": "x + len(name)", "bind": "x += 1", "general": "box.append(1)"}
def kind():
    if rng.random() < share:
        return "read"
    return "general" if rng.random() < general else "bind"
plan = {sid: [kind() for _ in range(cells)] for sid in sids}
def expected(sid):
    return f"({plan[sid].count('bind')}, {300 + plan[sid].count('general')})"
def drive(sid):
    for step in plan[sid]:
        res = repl.run(sid, CELLS[step])
        assert res.ok, res.error
start = time.perf_counter()
with ThreadPoolExecutor(threads) as pool:
    list(pool.map(drive, sids))
elapsed = time.perf_counter() - start
lost = [sid for sid in sids if repl.run(sid, "x, len(box)").value != expected(sid)]
closing = time.perf_counter()
repl.close()  # every session durable once it returns
closing = time.perf_counter() - closing
again = dolsot.Repl(store=FileStore(cache), typecheck=False, max_live_sessions=sessions)
lost += [sid + " (restored)" for sid in sids if again.run(sid, "x, len(box)").value != expected(sid)]
again.close()
print(json.dumps({"cells_per_s": sessions * cells / elapsed, "close_s": closing, "lost": lost}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sessions", type=int, default=64)
    parser.add_argument("--threads", type=int, default=8)
    parser.add_argument("--cells", type=int, default=16)
    parser.add_argument("--read-share", type=float, nargs="+", default=[0.0, 0.5, 0.9])
    parser.add_argument("--general-share", type=float, default=0.0,
                        help="share of the writes that are `box.append(1)` on a list of 300+ "
                             "items, a cell that takes the general path (fork and checkpoint), "
                             "not `x += 1`")
    args = parser.parse_args()
    configs = {"on": {}, "on, delay 0": {"DOLSOT_CHECKPOINT_DELAY": "0"},
               "off": {"DOLSOT_READ_ONLY_CELLS": "0"}}
    rows: dict[tuple[str, float], list[float]] = {}
    closes: dict[tuple[str, float], list[float]] = {}
    lost: list[str] = []
    load = [os.getloadavg()[0]]
    for round_index in range(args.rounds):
        for share in args.read_share:
            for name, extra in configs.items():
                env = {k: v for k, v in os.environ.items() if not k.startswith("DOLSOT_")}
                env.update(extra)
                out = subprocess.run(
                    [sys.executable, "-c", CHILD, str(args.sessions), str(args.threads),
                     str(args.cells), str(share), str(round_index), str(args.general_share)],
                    env=env, check=True, capture_output=True, text=True).stdout
                figures = json.loads(out.strip().splitlines()[-1])
                rows.setdefault((name, share), []).append(figures["cells_per_s"])
                closes.setdefault((name, share), []).append(figures["close_s"])
                lost += [f"{name}, share {share}: {sid}" for sid in figures["lost"]]
        load.append(os.getloadavg()[0])
    print(f"{args.sessions} sessions, {args.threads} threads, {args.cells} cells each after one "
          f"that binds the state; writes: {args.general_share:.0%} `box.append(1)`, the rest "
          f"`x += 1`; {args.rounds} rounds, medians; load average "
          f"{min(load):.1f}-{max(load):.1f}; {os.cpu_count()} CPUs")
    names = list(configs)
    print("| share of read-only cells | " + " | ".join(f"cells/s, {n}" for n in names) +
          " | " + " | ".join(f"{n} vs off" for n in names[:-1]) + " | close (s), " +
          ", ".join(names) + " |")
    print("|---:|" + "---:|" * (2 * len(names) - 1) + "---|")
    for share in args.read_share:
        rates = [statistics.median(rows[(n, share)]) for n in names]
        ratios = [f"{rate / rates[-1]:.2f}x" for rate in rates[:-1]]
        close = ", ".join(f"{statistics.median(closes[(n, share)]):.2f}" for n in names)
        print(f"| {share:.0%} | " + " | ".join(f"{rate:.0f}" for rate in rates) + " | " +
              " | ".join(ratios) + f" | {close} |")
    for (name, share), values in rows.items():
        print(name, share, [round(v) for v in values])
    print("lost:", lost or "nothing")


if __name__ == "__main__":
    main()
