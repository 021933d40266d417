"""Live output (issue #40) benchmarks: what on_output costs, medians and
ratios measured in the same run, both backends, arms interleaved in rounds.

Run: PYTHONPATH=<build>/python python bench/live/bench_live.py [--rounds 5]

- lines: a cell printing 10,000 short lines (`print(i)`, ~49 KB, and
  `print('line', i)`, ~109 KB: past the 64 KiB a Repl's session process
  sends before it batches a cell's output), wall time with a no-op on_output
  against the same cell without one; and 100,000 x `print(i)` (~590 KB)
  with max_output=0 (no cap: every character goes through the stream),
  where the cell runs long enough for the load's noise to matter less.
- first chunk: the cell stamps time.perf_counter_ns() and prints it with
  flush=True, 50 ms apart (each line the first after a pause: while output
  flows, the stream gathers it for up to 20 ms, LiveOutputStream::kGather);
  on_output reads the stamp and notes how long after it the host saw the
  chunk (CLOCK_MONOTONIC, the same clock in both processes). p50 / p99.
- paced: `1+1` 50 ms apart with and without on_output (no output, so what
  is measured is the call's own cost), median latency.
"""

from __future__ import annotations

import argparse
import statistics
import time

import dolsot
from dolsot.store import MemoryStore


def make(kind, **config):
    if kind == "repl":
        return dolsot.Repl(store=MemoryStore(), typecheck=False, **config)
    return dolsot.InProcessSession(typecheck=False, **config)


def noop(_text):
    pass


def wall(backend, sid, code, **kwargs):
    start = time.perf_counter()
    r = backend.run(sid, code, **kwargs)
    elapsed = time.perf_counter() - start
    assert r.ok, r.error
    return elapsed


def bench_lines(backend, rounds, code):
    plain, live = [], []
    wall(backend, "lines", code)  # warm
    for _ in range(rounds):
        for _ in range(3):
            plain.append(wall(backend, "lines", code))
            live.append(wall(backend, "lines", code, on_output=noop))
    return statistics.median(plain), statistics.median(live)


def bench_first_chunk(backend, samples):
    delays = []

    def on_output(text):
        now = time.perf_counter_ns()
        for line in text.split():
            delays.append((now - int(line)) / 1e6)

    code = (f"import time\nfor _ in range({samples}):\n"
            "    print(time.perf_counter_ns(), flush=True)\n    time.sleep(0.05)")
    r = backend.run("first", code, on_output=on_output, timeout=120)
    assert r.ok, r.error
    delays.sort()
    return delays[len(delays) // 2], delays[min(len(delays) - 1, int(len(delays) * 0.99))]


def bench_paced(backend, rounds, cells):
    plain, live = [], []
    backend.run("paced", "1+1")
    for _ in range(rounds):
        for arm, out in ((None, plain), (noop, live)):
            for _ in range(cells):
                time.sleep(0.05)  # the agent's think time: this is a paced benchmark
                kwargs = {"on_output": arm} if arm else {}
                out.append(wall(backend, "paced", "1+1", **kwargs))
    return statistics.median(plain), statistics.median(live)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--paced-cells", type=int, default=40)
    parser.add_argument("--backends", default="inprocess,repl")
    parser.add_argument("--only", default="lines,first,paced")
    args = parser.parse_args()
    only = args.only.split(",")
    for kind in args.backends.split(","):
        backend = make(kind)
        try:
            for label, code in (("print(i)", "for i in range(10000):\n    print(i)"),
                                ("print('line', i)",
                                 "for i in range(10000):\n    print('line', i)")):
                if "lines" not in only:
                    break
                plain, live = bench_lines(backend, args.rounds, code)
                print(f"{kind:9} 10,000 x {label:17} without {plain * 1e3:7.2f} ms, "
                      f"no-op on_output {live * 1e3:7.2f} ms: {live / plain:.3f}x")
            if "lines" in only:
                uncapped = make(kind, max_output=0)
                try:
                    plain, live = bench_lines(uncapped, args.rounds,
                                              "for i in range(100000):\n    print(i)")
                finally:
                    uncapped.close()
                print(f"{kind:9} 100,000 x print(i), no cap: without {plain * 1e3:7.2f} ms, "
                      f"no-op on_output {live * 1e3:7.2f} ms: {live / plain:.3f}x")
            p50, p99 = bench_first_chunk(backend, args.samples) if "first" in only else (0, 0)
            print(f"{kind:9} first chunk after print+flush: p50 {p50:.3f} ms, p99 {p99:.3f} ms")
            if "paced" not in only:
                continue
            plain, live = bench_paced(backend, args.rounds, args.paced_cells)
            print(f"{kind:9} paced 1+1 without {plain * 1e6:7.1f} µs, with on_output "
                  f"{live * 1e6:7.1f} µs: {live / plain:.3f}x")
        finally:
            backend.close()


if __name__ == "__main__":
    main()
