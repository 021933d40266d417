"""The CLI through the dolsot server against `python3 -c pass`, measured in
the same run, interleaved (issue 19: a call on a live session at most 0.3x
`python3 -c pass`).

    python bench/serve/bench_serve.py --cli build/cli/dolsot [--rounds 40] \
        [--markdown docs/bench/serve.md] [--base-cli <another build>/cli/dolsot]

Rows: `python3 -c pass` (the floor); `dolsot --session s "1+1"` on a live
session through a running server; the same in direct mode (DOLSOT_SERVE=0:
a worker per call, the session restored from its checkpoint); and the first
call, which starts the server (and its worker) on a cache directory that
has none; and the live call with the cache directory on tmpfs, where an
fsync is free: the server answers once a checkpoint is in the kernel and
fsyncs it right after (docs/cli.md, "Durability"), so the two should match. Each round runs every row once (order rotated); figures are
medians over rounds, ratios of medians against the floor.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time


def timed(argv: list[str], env: dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv} failed ({proc.returncode}): {proc.stderr.decode()}")
    return elapsed


def stop(cli: str, env: dict[str, str], cwd: str) -> None:
    subprocess.run([cli, "serve", "--stop"], env=env, cwd=cwd, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cli", required=True)
    parser.add_argument("--python", default="/usr/bin/python3" if os.path.exists("/usr/bin/python3")
                        else os.path.realpath(sys.executable))
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--markdown")
    parser.add_argument("--base-cli", help="another build's dolsot (the design before a change): "
                        "its live call is a row of the same rounds, on a cache dir of its own")
    args = parser.parse_args()
    cli = str(pathlib.Path(args.cli).resolve())
    work = pathlib.Path(tempfile.mkdtemp(prefix="dolsot-bench-serve-"))
    base = {k: v for k, v in os.environ.items() if not k.startswith("DOLSOT_")}
    base["DOLSOT_TYPECHECK"] = "0"
    served = {**base, "DOLSOT_CACHE_DIR": str(work / "served"), "DOLSOT_SERVE": "1"}
    direct = {**base, "DOLSOT_CACHE_DIR": str(work / "direct"), "DOLSOT_SERVE": "0"}
    first = {**base, "DOLSOT_CACHE_DIR": str(work / "first"), "DOLSOT_SERVE": "1"}
    # The same on tmpfs, where a checkpoint's two fsyncs cost nothing: what
    # the server's path costs apart from the disk's flush.
    shm = pathlib.Path(tempfile.mkdtemp(prefix="dolsot-bench-serve-", dir="/dev/shm")) \
        if os.path.isdir("/dev/shm") else None
    served_shm = {**served, "DOLSOT_CACHE_DIR": str(shm / "served")} if shm else None
    rows = {
        "python3 -c pass": lambda: timed([args.python, "-c", "pass"], base, str(work)),
        "dolsot \"1+1\", live session (server)":
            lambda: timed([cli, "--session", "s", "1+1"], served, str(work)),
        "dolsot \"1+1\", direct mode (DOLSOT_SERVE=0)":
            lambda: timed([cli, "--session", "s", "1+1"], direct, str(work)),
    }

    base_cli = str(pathlib.Path(args.base_cli).resolve()) if args.base_cli else None
    served_base = {**served, "DOLSOT_CACHE_DIR": str(work / "served-base")}
    if base_cli:
        rows["base build: dolsot \"1+1\", live session (server)"] = \
            lambda: timed([base_cli, "--session", "s", "1+1"], served_base, str(work))

    if served_shm:
        rows["dolsot \"1+1\", live session (server), cache dir on tmpfs"] = \
            lambda: timed([cli, "--session", "s", "1+1"], served_shm, str(work))

    def first_call() -> float:
        elapsed = timed([cli, "--session", "s", "1+1"], first, str(work))
        stop(cli, first, str(work))  # the next round starts one again
        return elapsed

    rows["dolsot \"1+1\", first call (starts the server)"] = first_call
    try:
        for name in rows:  # sessions created, server up, caches warm
            rows[name]()
        samples: dict[str, list[float]] = {name: [] for name in rows}
        names = list(rows)
        for r in range(args.rounds):
            for name in names[r % len(names):] + names[:r % len(names)]:
                samples[name].append(rows[name]())
    finally:
        stop(cli, served, str(work))
        stop(cli, first, str(work))
        if base_cli:
            stop(base_cli, served_base, str(work))
        if served_shm:
            stop(cli, served_shm, str(work))
            shutil.rmtree(shm, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    floor = statistics.median(samples["python3 -c pass"])
    lines = [f"Machine: {platform.machine()}, {os.cpu_count()} cores, {platform.platform()}; "
             f"{args.rounds} rounds, medians.", "",
             "| command | median ms | ratio to `python3 -c pass` |", "|---|---:|---:|"]
    for name, values in samples.items():
        median = statistics.median(values)
        lines.append(f"| {name} | {median * 1000:.2f} | {median / floor:.2f}x |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.markdown:
        pathlib.Path(args.markdown).write_text(
            "# The CLI through the server (bench/serve/bench_serve.py)\n\n" + text)


if __name__ == "__main__":
    main()
