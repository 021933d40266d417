"""What an idle session's snapshot refresh costs its next cell (issue #39):
a runner that hears nothing for a second after its cells forks a new
snapshot that shares its pages, and takes no pages ahead after it
(session_process.cc's RefreshWhenIdle), so the first cell after the pause
takes the copy-on-write faults its warm-up would have taken.

One session of a `Repl()` as it ships (MemoryStore, rollback on) that
imported json; each round runs a small cell, pauses (`--short` seconds, less
than the refresh's second, or `--long`, more), then times `1 + 1`. Pauses
are shuffled so background load hits both alike; medians per pause.

Run: PYTHONPATH=<build>/python python bench/repl/bench_idle_refresh.py [--rounds 12]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12, help="cells timed after each pause")
    parser.add_argument("--short", type=float, default=0.9, help="a pause shorter than the refresh's")
    parser.add_argument("--long", type=float, default=1.5, help="a pause past it")
    args = parser.parse_args()

    import dolsot
    from dolsot.store import MemoryStore

    repl = dolsot.Repl(store=MemoryStore(), typecheck=False)
    try:
        assert repl.run("s", "import json\nx = [1, 2, 3]").ok
        pauses = [args.short, args.long] * args.rounds
        random.Random(1).shuffle(pauses)
        times: dict[float, list[float]] = {args.short: [], args.long: []}
        for pause in pauses:
            assert repl.run("s", "x.append(1); y = json.dumps(x[:3])").ok
            time.sleep(pause)  # the idle time under test (a benchmark, not a test)
            start = time.perf_counter()
            result = repl.run("s", "1 + 1")
            times[pause].append(time.perf_counter() - start)
            assert result.value == "2", result
    finally:
        repl.close()
    print(f"{args.rounds} rounds, load (1 min) {os.getloadavg()[0]:.2f}")
    print("| pause before `1 + 1` | p50 |")
    print("|---|--:|")
    for pause, values in times.items():
        print(f"| {pause:.1f} s | {statistics.median(values) * 1e3:.3f} ms |")


if __name__ == "__main__":
    main()
