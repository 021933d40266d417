"""Whole-process time of the dolsot CLI against `python3 -c pass` and the
dolsot 0.4.2 CLI from PyPI, all measured in the same run, interleaved.

    python bench/cli/bench_cli.py --cli build/cli/dolsot \
        [--peer /tmp/peer-venv/bin/dolsot] [--numpy-site /tmp/venv/lib/python3.11/site-packages] \
        [--ty /tmp/peer-venv/bin/ty] [--rounds 30] [--markdown docs/bench/cli.md]

Every round runs each command once (order rotated per round); the figures are
medians over rounds and ratios of medians against `python3 -c pass`. Each
session is created (and the toolbox imported once) before timing starts, so
"1+1" runs on an existing session, as an agent host's calls do.

Rows beyond the issue's: a session holding three names (restore cost), and,
with --ty, the type gate on (DOLSOT_TYPECHECK=1) with a small annotated
toolbox: a cell that cannot reach the toolbox (ty is skipped) and one that
calls it (ty runs). With --large-mb N: a cell on the general path (`import
math`, which gets a checkpoint) in a session holding N MB of 1 KiB
bytearrays, in direct mode (each call restores the session, runs the cell
and saves it before it exits) and through `dolsot serve` (the session stays
live; the call returns once the checkpoint is durable), for --compare-cli too.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """Wall time, and CPU time (user + system) of the whole process tree:
    every process the command started was reaped by the time it exits, so the
    children's rusage grows by exactly that (and is less sensitive to load)."""
    cpu_before = children_cpu()
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv} failed ({proc.returncode}): {proc.stderr.decode()}")
    return elapsed, children_cpu() - cpu_before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cli", required=True, help="the dolsot binary under test")
    parser.add_argument("--peer", help="dolsot 0.4.2's CLI (its own venv)")
    parser.add_argument("--numpy-site", help="a site-packages holding numpy for the worker's Python")
    parser.add_argument("--python", default="/usr/bin/python3" if os.path.exists("/usr/bin/python3")
                        else os.path.realpath(sys.executable),
                        help="the python3 of the baseline (default: the system's /usr/bin/python3)")
    parser.add_argument("--also-python", action="append", default=[],
                        help="another interpreter to time with -c pass, for context (repeatable)")
    parser.add_argument("--compare-cli", help="another dolsot binary (e.g. main's build), for an A/B row")
    parser.add_argument("--ty", help="the ty binary for the type-gate rows (DOLSOT_TY_BIN)")
    parser.add_argument("--large-mb", type=int, default=0,
                        help="also time `import math` in a session holding this many MB")
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--markdown", help="also write the table to this file")
    args = parser.parse_args()
    args.cli = str(pathlib.Path(args.cli).resolve())
    if args.peer:
        args.peer = str(pathlib.Path(args.peer).resolve())

    work = pathlib.Path(tempfile.mkdtemp(prefix="dolsot-bench-cli-"))
    (work / "npbox.py").write_text("import numpy\n\ndef mean(xs):\n    return float(numpy.mean(xs))\n")
    (work / "tbox.py").write_text("def twice(n: int) -> int:\n    return 2 * n\n")
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("DOLSOT_")}
    base_env["DOLSOT_TYPECHECK"] = "0"
    base_env["DOLSOT_SERVE"] = "0"  # direct mode (bench/serve measures the server)
    ours_env = {**base_env, "DOLSOT_CACHE_DIR": str(work / "ours")}
    peer_env = {**base_env, "DOLSOT_CACHE_DIR": str(work / "peer")}
    if args.numpy_site:
        # The worker also finds npbox in its working directory.
        for env in (ours_env, peer_env):
            env["PYTHONPATH"] = os.pathsep.join([str(work), args.numpy_site])

    commands: dict[str, tuple[list[str], dict[str, str]]] = {
        "python3 -c pass": ([args.python, "-c", "pass"], base_env),
        **{f"{python} -c pass": ([python, "-c", "pass"], base_env) for python in args.also_python},
        "dolsot --version (no worker)": ([args.cli, "--version"], ours_env),
        "dolsot --session s \"1+1\"": ([args.cli, "--session", "s", "1+1"], ours_env),
        "dolsot --session h \"1+1\" (holds 3 names)": ([args.cli, "--session", "h", "1+1"], ours_env),
    }
    if args.compare_cli:
        compare_env = {**base_env, "DOLSOT_CACHE_DIR": str(work / "compare")}
        commands["compared dolsot --session s \"1+1\""] = (
            [str(pathlib.Path(args.compare_cli).resolve()), "--session", "s", "1+1"], compare_env)
    if args.ty:
        gate_env = {**ours_env, "DOLSOT_TYPECHECK": "1", "DOLSOT_TY_BIN": args.ty}
        commands["dolsot --toolbox tbox:tb, gate on, \"1+1\" (ty skipped)"] = (
            [args.cli, "--toolbox", "tbox:tb", "--session", "g", "1+1"], gate_env)
        commands["dolsot --toolbox tbox:tb, gate on, \"tb.twice(2)\" (ty runs)"] = (
            [args.cli, "--toolbox", "tbox:tb", "--session", "g", "tb.twice(2)"], gate_env)
        if args.compare_cli:
            commands["compared dolsot --toolbox tbox:tb, gate on, \"1+1\""] = (
                [str(pathlib.Path(args.compare_cli).resolve()), "--toolbox", "tbox:tb", "--session",
                 "g", "1+1"], {**gate_env, "DOLSOT_CACHE_DIR": str(work / "compare")})
    if args.peer:
        commands["dolsot 0.4.2 --session s \"1+1\""] = ([args.peer, "--session", "s", "1+1"], peer_env)
    if args.numpy_site:
        commands["dolsot --toolbox npbox:nb (numpy) \"1+1\""] = (
            [args.cli, "--toolbox", "npbox:nb", "--session", "n", "1+1"], ours_env)
        if args.peer:
            commands["dolsot 0.4.2 --toolbox npbox:nb (numpy) \"1+1\""] = (
                [args.peer, "--toolbox", "npbox:nb", "--session", "n", "1+1"], peer_env)

    servers: list[tuple[str, dict[str, str]]] = []  # stopped at the end
    if args.large_mb:
        fill = f"import os\nstate = [bytearray(1024) for _ in range({args.large_mb} * 1024)]"
        clis = {"": args.cli}
        if args.compare_cli:
            clis["compared "] = str(pathlib.Path(args.compare_cli).resolve())
        for label, cli in clis.items():
            for mode, serve in (("direct", "0"), ("server", "1")):
                env = {**base_env, "DOLSOT_SERVE": serve,
                       "DOLSOT_CACHE_DIR": str(work / f"large-{label.strip() or 'ours'}-{mode}")}
                timed([cli, "--session", "big", fill], env, str(work))
                commands[f"{label}dolsot --session big \"import math\" ({args.large_mb} MB, "
                         f"{mode})"] = ([cli, "--session", "big", "import math"], env)
                if serve == "1":
                    servers.append((cli, env))
    timed([args.cli, "--session", "h", "a = list(range(100))\nb = {'k': 'v'}\nc = 'text'"],
          ours_env, str(work))
    for argv, env in commands.values():  # create sessions, warm caches
        timed(argv, env, str(work))
    load_before = os.getloadavg()[0]

    names = list(commands)
    samples: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(args.rounds):
        shift = round_index % len(names)
        for name in names[shift:] + names[:shift]:
            argv, env = commands[name]
            wall, used = timed(argv, env, str(work))
            samples[name].append(wall)
            cpu[name].append(used)

    load_after = os.getloadavg()[0]
    baseline = statistics.median(samples["python3 -c pass"])
    cpu_baseline = statistics.median(cpu["python3 -c pass"])
    lines = [
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}; "
        f"baseline `python3 -c pass` is {args.python}; "
        f"{args.rounds} rounds, interleaved; load average {load_before:.1f} before, "
        f"{load_after:.1f} after.",
        "",
        "| command | median ms | p90 ms | x python3 -c pass | CPU ms (tree) | CPU x |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name in names:
        values = sorted(samples[name])
        median = statistics.median(values)
        p90 = values[min(len(values) - 1, int(0.9 * len(values)))]
        used = statistics.median(cpu[name])
        lines.append(f"| `{name}` | {median * 1000:.1f} | {p90 * 1000:.1f} | {median / baseline:.2f} "
                     f"| {used * 1000:.1f} | {used / cpu_baseline:.2f} |")
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        pathlib.Path(args.markdown).write_text(table + "\n")
    for cli, env in servers:
        subprocess.run([cli, "serve", "--stop"], env=env, cwd=str(work), stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
