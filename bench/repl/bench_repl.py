"""Repl benchmarks: medians and ratios against peers measured in the same run.

Run: PYTHONPATH=<build>/python python bench/repl/bench_repl.py \
       --pipe-floor <build>/bench/repl/bench_repl_pipe_floor \
       --pyconsole ../shared/seeds/pyconsole.py.txt [--write docs/bench/repl.md]
(or `cmake --build <build> --target bench_repl`). Measurements of different
configurations are interleaved in rounds so background load hits them alike.
"""

from __future__ import annotations

import argparse
import atexit
import importlib.machinery
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from dolsot.repl import Repl
from dolsot.store import MemoryStore


def pct(values, p):
    values = sorted(values)
    return values[min(len(values) - 1, int(len(values) * p / 100))]


def us(seconds):
    return f"{seconds * 1e6:,.0f} µs" if seconds < 0.01 else f"{seconds * 1e3:,.1f} ms"


def load_pyconsole(path):
    # The seed starts with a title line before the module's docstring: run the
    # module from a temporary file that starts at the docstring.
    with open(path, encoding="utf-8") as f:
        text = f.read()
    folder = tempfile.mkdtemp(prefix="pyconsole-peer-")
    # The kernel runs this file in its own process: kept until we exit.
    atexit.register(shutil.rmtree, folder, True)
    runnable = os.path.join(folder, "pyconsole.py")
    with open(runnable, "w", encoding="utf-8") as f:
        f.write(text[text.index('"""'):])
    loader = importlib.machinery.SourceFileLoader("pyconsole_peer", runnable)
    spec = importlib.util.spec_from_loader("pyconsole_peer", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


# The naive rollback floor: a kernel that forks, runs the cell in the child
# (so a death cannot hurt the parent's state), replies, and is reaped.
NAIVE_FORK_KERNEL = r"""
import os, sys
ns = {}
exec(sys.argv[1], ns)
rd, wr = sys.stdin.buffer, sys.stdout.buffer
while True:
    n = rd.readline()
    if not n:
        break
    code = rd.read(int(n)).decode()
    pid = os.fork()
    if pid == 0:
        value = repr(eval(code, ns))
        out = value.encode()
        wr.write(b"%d\n" % len(out) + out)
        wr.flush()
        os._exit(0)
    os.waitpid(pid, 0)
"""


class NaiveForkKernel:
    def __init__(self, setup="pass"):
        self.proc = subprocess.Popen([sys.executable, "-c", NAIVE_FORK_KERNEL, setup],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def run(self, code):
        data = code.encode()
        self.proc.stdin.write(b"%d\n" % len(data) + data)
        self.proc.stdin.flush()
        n = int(self.proc.stdout.readline())
        return self.proc.stdout.read(n)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def timed(call):
    t0 = time.perf_counter()
    call()
    return time.perf_counter() - t0


def trivial_cells(args, report):
    peers = {}
    if args.pyconsole:
        kernel = load_pyconsole(args.pyconsole)._PyKernel()
        kernel.run("x = 1", 20)
        peers["pyconsole kernel"] = lambda: kernel.run("1+1", 20)
    configs = {
        "Repl snapshots=False checkpoint=off": dict(snapshots=False, checkpoint="off"),
        "Repl snapshots=False checkpoint=sync": dict(snapshots=False, checkpoint="sync"),
        "Repl snapshots=True checkpoint=off": dict(snapshots=True, checkpoint="off"),
        "Repl snapshots=True checkpoint=async": dict(snapshots=True, checkpoint="async"),
    }
    repls = {}
    for name, kw in configs.items():
        r = Repl(store=MemoryStore(), typecheck=False, **kw)
        r.run("s", "x = 1")
        repls[name] = r
        peers[name] = (lambda r=r: r.run("s", "1+1"))
    samples = {name: [] for name in peers}
    for _ in range(args.rounds):
        for name, call in peers.items():
            for _ in range(args.cells // args.rounds):
                samples[name].append(timed(call))
    floor = None
    if args.pipe_floor:
        floor = json.loads(subprocess.check_output([args.pipe_floor]))
    report.append("## Trivial cell (`1+1`) back to back, host in Python\n")
    report.append("| configuration | p50 | p99 | p50 vs pyconsole | p50 vs pipe floor |")
    report.append("|---|---|---|---|---|")
    base = statistics.median(samples["pyconsole kernel"]) if "pyconsole kernel" in samples else None
    if floor:
        report.append(f"| 64-byte pipe round trip (floor, C++) | {floor['p50_us']:.0f} µs | "
                      f"{floor['p99_us']:.0f} µs | | 1.00x |")
    for name, values in samples.items():
        p50 = statistics.median(values)
        vs_peer = f"{p50 / base:.2f}x" if base else ""
        vs_floor = f"{p50 * 1e6 / floor['p50_us']:.1f}x" if floor else ""
        report.append(f"| {name} | {us(p50)} | {us(pct(values, 99))} | {vs_peer} | {vs_floor} |")
    for r in repls.values():
        r.close()


def paced_rollback(args, report):
    naive = NaiveForkKernel()
    rollback = Repl(store=MemoryStore(), typecheck=False, snapshots=True, checkpoint="off")
    rollback_async = Repl(store=MemoryStore(), typecheck=False, snapshots=True)
    plain = Repl(store=MemoryStore(), typecheck=False, snapshots=False, checkpoint="off")
    for r in (rollback, rollback_async, plain):
        r.run("s", "x = 1")
    # --paced-env: the default Repl again, its worker started with these
    # variables set (an A/B of a switch in the same rounds).
    variants = {}
    for spec in args.paced_env:
        settings = dict(item.split("=", 1) for item in spec.split(","))
        saved = {name: os.environ.get(name) for name in settings}
        os.environ.update(settings)
        try:
            variant = Repl(store=MemoryStore(), typecheck=False, snapshots=True)
            variant.run("s", "x = 1")
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value
        variants[f"Repl snapshots=True checkpoint=async, {spec}"] = variant
    calls = {
        "naive fork-then-run kernel (floor)": lambda: naive.run("1+1"),
        "Repl snapshots=True checkpoint=off": lambda: rollback.run("s", "1+1"),
        "Repl snapshots=True checkpoint=async": lambda: rollback_async.run("s", "1+1"),
        "Repl snapshots=False checkpoint=off (no rollback)": lambda: plain.run("s", "1+1"),
    }
    if args.paced_peer and args.pyconsole:
        # Context, off by default (a fifth configuration makes every round
        # longer and busier): the long-lived peer kernel at the same pace.
        kernel = load_pyconsole(args.pyconsole)._PyKernel()
        kernel.run("x = 1", 20)
        calls["pyconsole kernel (no rollback, peer)"] = lambda: kernel.run("1+1", 20)
    for name, variant in variants.items():
        calls[name] = lambda variant=variant: variant.run("s", "1+1")
    samples = {name: [] for name in calls}
    for _ in range(args.paced):
        for name, call in calls.items():
            time.sleep(0.05)  # the agent thinking
            samples[name].append(timed(call))
    floor = statistics.median(samples["naive fork-then-run kernel (floor)"])
    peer = samples.get("pyconsole kernel (no rollback, peer)")
    peer = statistics.median(peer) if peer else None
    report.append("\n## Rollback on, cells 50 ms apart\n")
    report.append("| configuration | p50 | p90 | p50 vs naive fork floor |" + (" p50 vs peer |" if peer else ""))
    report.append("|---|---|---|---|" + ("---|" if peer else ""))
    for name, values in samples.items():
        p50 = statistics.median(values)
        report.append(f"| {name} | {us(p50)} | {us(pct(values, 90))} | {p50 / floor:.2f}x |" +
                      (f" {p50 / peer:.2f}x |" if peer else ""))
    naive.close()
    for r in (rollback, rollback_async, plain, *variants.values()):
        r.close()


def held_names(args, report):
    # A long session accumulates names; a read-only cell's cost should not
    # grow with them. Each count its own default Repl, interleaved, 50 ms apart.
    counts = [int(x) for x in args.names.split(",")]
    repls = {}
    for n in counts:
        r = Repl(store=MemoryStore(), typecheck=False)
        r.run("s", "; ".join(f"v{i} = {i}" for i in range(n)) or "pass")
        repls[n] = r
    samples = {n: [] for n in counts}
    for _ in range(args.paced):
        for n, r in repls.items():
            time.sleep(0.05)
            samples[n].append(timed(lambda: r.run("s", "1+1")))
    for r in repls.values():
        r.close()
    base = statistics.median(samples[counts[0]])
    report.append("\n## Paced `1+1` against the names a session holds (default Repl, 50 ms apart)\n")
    report.append(f"| names held | p50 | p90 | vs {counts[0]} names |")
    report.append("|---|---|---|---|")
    for n, values in samples.items():
        p50 = statistics.median(values)
        report.append(f"| {n} | {us(p50)} | {us(pct(values, 90))} | {p50 / base:.2f}x |")


def state_sizes(args, report):
    sizes = [int(x) for x in args.sizes.split(",")] + ([1024] if args.gigabyte else [])
    modes = [tuple(m.split(":")) for m in args.state_modes.split(",")]
    report.append("\n## Per-cell cost with live state (cell `len(state)`, 50 ms apart)\n")
    report.append("| state | " + " | ".join(f"rollback {s}, {c}" for s, c in modes) + " |")
    report.append("|---" * (len(modes) + 1) + "|")
    baseline = {}
    for mb in sizes:
        row = []
        for snap, ck in modes:
            r = Repl(store=MemoryStore(), typecheck=False, snapshots=(snap == "on"), checkpoint=ck,
                     timeout=120)
            r.run("s", f"state = [bytearray(1024) for _ in range({mb} * 1024)]")
            values = []
            for _ in range(args.state_cells):
                time.sleep(0.05)
                values.append(timed(lambda: r.run("s", "len(state)")))
            r.close()
            p50 = statistics.median(values)
            baseline.setdefault((snap, ck), p50)
            row.append(f"{us(p50)} ({p50 / baseline[(snap, ck)]:.1f}x)")
        report.append(f"| {mb} MB | " + " | ".join(row) + " |")


def deadline_to_result(args, report):
    cases = {
        "Python loop": "while True: pass",
        "C code (regex backtracking)": "import re\nre.match(r'(a|aa)*c', 'a' * 60)",
        "blocking sleep": "import time\ntime.sleep(60)",
    }
    timeout = 0.5
    report.append("\n## Deadline to Result for a runaway cell (timeout 0.5 s)\n")
    report.append("| runaway | median overshoot past the deadline | max |")
    report.append("|---|---|---|")
    with Repl(store=MemoryStore(), typecheck=False) as r:
        r.run("s", "x = 1")
        for name, code in cases.items():
            over = []
            for _ in range(args.runaways):
                elapsed = timed(lambda: r.run("s", code, timeout=timeout))
                over.append(elapsed - timeout)
            report.append(f"| {name} | {us(statistics.median(over))} | {us(max(over))} |")


# The design before this one, as published: dolsot 0.4.2 from PyPI (a worker
# process per cell, the session round-tripped through dill). Run in its own venv.
LEGACY_SCRIPT = r"""
import atexit, json, shutil, statistics, sys, tempfile, time, os
os.environ["DOLSOT_CACHE_DIR"] = tempfile.mkdtemp(prefix="dolsot042-")
atexit.register(shutil.rmtree, os.environ["DOLSOT_CACHE_DIR"], True)
from dolsot import Repl
r = Repl({}, typecheck=False, timeout=600)
out = {}
for mb, cells in ((0, 20), (10, 5), (100, 3)):
    sid = f"s{mb}"
    r.run(sid, f"state = [bytearray(1024) for _ in range({mb} * 1024)]")
    times = []
    for _ in range(cells):
        t0 = time.perf_counter()
        r.run(sid, "len(state)")
        times.append(time.perf_counter() - t0)
    out[mb] = statistics.median(times)
print(json.dumps(out))
"""


def legacy_peer(args, report):
    if not args.legacy_python:
        return
    legacy = json.loads(subprocess.check_output([args.legacy_python, "-c", LEGACY_SCRIPT],
                                                cwd=tempfile.gettempdir()))
    report.append("\n## Against dolsot 0.4.2 from PyPI (same run, cell `len(state)`)\n")
    report.append("| state | dolsot 0.4.2 | this Repl (defaults: rollback on, async) | ratio |")
    report.append("|---|---|---|---|")
    for mb in ("0", "10", "100"):
        r = Repl(store=MemoryStore(), typecheck=False, timeout=120)
        r.run("s", f"state = [bytearray(1024) for _ in range({mb} * 1024)]")
        values = []
        for _ in range(args.state_cells):
            time.sleep(0.05)
            values.append(timed(lambda: r.run("s", "len(state)")))
        r.close()
        ours = statistics.median(values)
        report.append(f"| {mb} MB | {us(legacy[mb])} | {us(ours)} | {ours / legacy[mb]:.3f}x |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--pipe-floor")
    parser.add_argument("--pyconsole")
    parser.add_argument("--cells", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--paced", type=int, default=40)
    parser.add_argument("--paced-env", action="append", default=[], metavar="NAME=VALUE[,NAME=VALUE]",
                        help="also time the default Repl started with these variables in the paced section")
    parser.add_argument("--paced-peer", action="store_true",
                        help="also time the pyconsole kernel (--pyconsole) in the paced section")
    parser.add_argument("--state-cells", type=int, default=12)
    parser.add_argument("--runaways", type=int, default=5)
    parser.add_argument("--gigabyte", action="store_true", help="also measure 1 GB of state")
    parser.add_argument("--write", help="also write the report to this Markdown file")
    parser.add_argument("--legacy-python",
                        help="python of a venv with dolsot==0.4.2 installed (the old design)")
    parser.add_argument("--only", action="append",
                        choices=["trivial", "paced", "names", "state", "deadline", "legacy"],
                        help="run only these sections (repeatable)")
    parser.add_argument("--state-modes", default="on:async,on:sync,off:async,off:sync",
                        help="rollback:checkpoint pairs for the state section")
    parser.add_argument("--names", default="0,300,3000",
                        help="name counts for the names section (comma-separated)")
    parser.add_argument("--sizes", default="0,10,100",
                        help="state sizes in MB for the state section (comma-separated)")
    args = parser.parse_args()
    load = os.getloadavg()
    report = ["# Repl benchmarks\n",
              f"One run on {os.cpu_count()} cores, load average {load[0]:.1f} at start; "
              f"Python {sys.version.split()[0]}; typecheck off. Medians unless stated.\n"]
    sections = {"trivial": trivial_cells, "paced": paced_rollback, "names": held_names,
                "state": state_sizes,
                "deadline": deadline_to_result, "legacy": legacy_peer}
    for name, section in sections.items():
        if not args.only or name in args.only:
            section(args, report)
    report.append(f"\nLoad average at the end: {os.getloadavg()[0]:.1f}.")
    print("\n".join(report), flush=True)
    text = "\n".join(report) + "\n"
    if args.write:
        with open(args.write, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
