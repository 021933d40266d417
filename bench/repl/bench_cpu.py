"""CPU per cell, including all background work, and latency, against a peer
measured in the same run (#22, #23 section 1).

Each measurement is a child process that builds a session holding `state`
(0, 10 or 100 MB), runs N trivial cells (`1+1`, or `--cell`), either 50 ms apart (`--pace`; an
agent's pace) or back to back, then closes everything. Its CPU is what the
kernel counts for the child and every process under it once all are
reaped (RUSAGE_CHILDREN of this process: the worker, the session processes,
snapshots, checkpoint writers, the peer's kernel). A child that runs no cell
measures the setup and teardown, which is subtracted:

    CPU per cell = (CPU with N cells - CPU with none) / N

Configurations are interleaved in rounds so background load hits them alike;
medians over the rounds. `--base-pythonpath` adds the same configurations run
from another build (the design before a change), in the same run.

Run: PYTHONPATH=<build>/python python bench/repl/bench_cpu.py \
       --pyconsole ../shared/seeds/pyconsole.py.txt [--base-pythonpath <old build>/python] \
       [--write docs/bench/cpu.md]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

CHILD = r"""
import json, os, statistics, sys, tempfile, time
config, mb, cells, pace, pyconsole, kind = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), sys.argv[5], sys.argv[6]
cell = sys.argv[7]
if kind == "objects":  # small objects (dicts, strs, ints): CPython's own arenas, ~200 B a row
    STATE = f"state = [{{'k': i, 'v': str(i)}} for i in range({mb} * 5000)]"
else:  # 1 KiB buffers: malloc's heap
    STATE = f"state = [bytearray(1024) for _ in range({mb} * 1024)]"
lat = []
if config == "pyconsole":
    import importlib.machinery, importlib.util
    text = open(pyconsole, encoding="utf-8").read()
    import atexit, shutil
    folder = tempfile.mkdtemp(prefix="pyconsole-peer-")
    atexit.register(shutil.rmtree, folder, True)  # the kernel runs this file: kept until we exit
    path = os.path.join(folder, "pyconsole.py")
    open(path, "w", encoding="utf-8").write(text[text.index('\"\"\"'):])
    loader = importlib.machinery.SourceFileLoader("pyconsole_peer", path)
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader("pyconsole_peer", loader))
    loader.exec_module(module)
    kernel = module._PyKernel()
    kernel.run(STATE, 600)
    kernel.run("x = 0", 20)
    run = lambda: kernel.run(cell, 20)
    def close():
        kernel.proc.stdin.close()
        kernel.proc.wait()
else:
    from dolsot.repl import Repl
    from dolsot.store import MemoryStore
    snapshots, checkpoint = config.split(":")
    r = Repl(store=MemoryStore(), typecheck=False, snapshots=snapshots == "on",
             checkpoint=checkpoint, timeout=600)
    r.run("s", STATE)
    r.run("s", "x = 0")
    def run():
        res = r.run("s", cell)
        assert res.ok and (cell != "1+1" or res.value == "2"), res.error
    close = r.close
for _ in range(cells):
    if pace:
        time.sleep(pace)
    t0 = time.perf_counter()
    run()
    lat.append(time.perf_counter() - t0)
# Every run, the one without cells too, idles as long before it closes, so
# the same background work lands in each and the subtraction removes it: a
# Repl opens its next session ahead (a worker's first 150 ms after it is
# wanted), which a run closed at once would not pay.
time.sleep(0.5)
close()
print(json.dumps({"latency": statistics.median(lat) if lat else None}))
"""

CONFIGS = {
    "dolsot default (rollback on, async checkpoint)": "on:async",
    "dolsot rollback on, no checkpoint": "on:off",
    "dolsot no rollback, no checkpoint": "off:off",
    # Only with --configs: every Result returns once durable.
    "dolsot rollback on, sync checkpoint": "on:sync",
    "dolsot no rollback, sync checkpoint (the CLI's)": "off:sync",
}
OPT_IN = {"on:sync", "off:sync"}


def measure(pythonpath, config, mb, cells, pace, pyconsole, extra_env=None, kind="bytes", cell="1+1"):
    env = dict(os.environ, PYTHONPATH=pythonpath or os.environ.get("PYTHONPATH", ""))
    env.update(extra_env or {})
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run([sys.executable, "-c", CHILD, config, str(mb), str(cells), str(pace),
                          pyconsole or "", kind, cell], env=env, check=True, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, json.loads(out.stdout.strip().splitlines()[-1])["latency"]


def ms(seconds):
    return "n/a" if seconds is None else f"{seconds * 1e3:.2f} ms"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pyconsole", required=True)
    parser.add_argument("--base-pythonpath", help="the build to compare with (its python/ dir)")
    parser.add_argument("--sizes", default="0,10,100")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--paced-cells", type=int, default=30)
    parser.add_argument("--b2b-cells", type=int, default=100)
    parser.add_argument("--compare-env", action="append", default=[], metavar="NAME=VALUE[,NAME=VALUE]",
                        help="also run the rollback-on configurations with these variables set "
                             "(an A/B of a setting in the same run); repeatable")
    parser.add_argument("--state", choices=["bytes", "objects"], default="bytes",
                        help="the session's state: 1 KiB bytearrays (malloc's heap) or small "
                             "dicts (CPython's arenas)")
    parser.add_argument("--configs", help="comma-separated subset of on:async,on:off,off:off,"
                                          "on:sync,off:sync (default: the first three); the "
                                          "build of --base-pythonpath runs them too")
    parser.add_argument("--cell", default="1+1",
                        help="the cell timed (the session holds x = 0 too), e.g. 'x += 1'")
    parser.add_argument("--pace", type=float, default=0.05,
                        help="seconds between paced cells (0.05: a fast agent; an LLM's turn "
                             "takes seconds, so every checkpoint is written on its own)")
    parser.add_argument("--write")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    runs = [("pyconsole kernel (peer)", None, "pyconsole", None)]
    wanted = set(args.configs.split(",")) if args.configs else set(CONFIGS.values()) - OPT_IN
    for name in [n for n, c in CONFIGS.items() if c not in wanted]:
        del CONFIGS[name]
    runs += [(name, None, config, None) for name, config in CONFIGS.items()]
    if args.base_pythonpath:
        runs += [(f"before: {name}", args.base_pythonpath, config, None)
                 for name, config in CONFIGS.items()
                 if config == "on:async" or args.configs]
    for spec in args.compare_env:
        extra = dict(item.split("=", 1) for item in spec.split(","))
        runs += [(f"{name}, {spec}", None, config, extra)
                 for name, config in CONFIGS.items() if config.startswith("on:")]
    phases = {"paced": (args.paced_cells, args.pace), "b2b": (args.b2b_cells, 0.0), "none": (0, 0.0)}
    samples = {}  # (name, mb, phase) -> [(cpu, latency)]
    load = os.getloadavg()[0]
    for _ in range(args.rounds):
        for mb in sizes:
            for name, path, config, extra in runs:
                for phase, (cells, pace) in phases.items():
                    samples.setdefault((name, mb, phase), []).append(
                        measure(path, config, mb, cells, pace, args.pyconsole, extra, args.state,
                                args.cell))
    report = ["# CPU per cell, including background work\n",
              f"One run on {os.cpu_count()} cores, load average {load:.1f} at start and "
              f"{os.getloadavg()[0]:.1f} at the end; Python {sys.version.split()[0]}; cell `{args.cell}`; "
              f"state of {args.state}; medians of {args.rounds} rounds; {args.paced_cells} cells "
              f"{args.pace * 1e3:.0f} ms apart, "
              f"{args.b2b_cells} back to back. CPU per cell = (CPU of the whole process tree "
              "with N cells - CPU with none) / N.\n"]

    def per_cell(name, mb, phase):
        cells = phases[phase][0]
        with_cells = statistics.median(c for c, _ in samples[(name, mb, phase)])
        without = statistics.median(c for c, _ in samples[(name, mb, "none")])
        return max(0.0, with_cells - without) / cells

    def latency(name, mb, phase):
        return statistics.median(l for _, l in samples[(name, mb, phase)])

    for phase, title in (("paced", f"cells {args.pace * 1e3:.0f} ms apart"),
                         ("b2b", "cells back to back")):
        report.append(f"\n## CPU per cell, {title}\n")
        report.append("| configuration | " + " | ".join(f"{mb} MB" for mb in sizes) + " |")
        report.append("|---" * (len(sizes) + 1) + "|")
        peer = {mb: per_cell("pyconsole kernel (peer)", mb, phase) for mb in sizes}
        for name, *_ in runs:
            cells = []
            for mb in sizes:
                cpu = per_cell(name, mb, phase)
                ratio = f" ({cpu / peer[mb]:.1f}x peer)" if peer[mb] > 0 else ""
                cells.append(ms(cpu) + ("" if name.startswith("pyconsole") else ratio))
            report.append(f"| {name} | " + " | ".join(cells) + " |")
        report.append(f"\n## Latency per cell, {title} (median)\n")
        report.append("| configuration | " + " | ".join(f"{mb} MB" for mb in sizes) + " |")
        report.append("|---" * (len(sizes) + 1) + "|")
        for name, *_ in runs:
            report.append(f"| {name} | " + " | ".join(ms(latency(name, mb, phase)) for mb in sizes)
                          + " |")
    text = "\n".join(report) + "\n"
    print(text, flush=True)
    if args.write:
        with open(args.write, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
