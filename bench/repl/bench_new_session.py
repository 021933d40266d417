"""New sessions and memory per session against pydantic-monty, in the same run
(issue #39's "New sessions" and "Memory" targets).

New sessions: the first cell of a new session on a warm engine, timed from
the call to its Result, against Monty's pooled checkout + first cell
(`pool.checkout()` then `feed_run`), paced (`--pace` seconds apart,
untimed, as an agent's model call would leave them) and back to back.
dolsot: one `Repl` (default options: rollback on, async checkpoints to a
MemoryStore), a new session id per cell, each session reset after its cell
(outside the first cell's time), as a Monty checkout goes back to its pool;
the whole turn (open, cell, reset; checkout, cell, exit) is reported too. Rounds interleave the
engines so background load hits them alike; medians of the per-round
medians.

Memory: `--sessions` live idle sessions after one ordinary cell each (an
import, a def, a list), the proportional set size (PSS, from
/proc/PID/smaps_rollup) of the worker tree summed and divided by the
sessions: dolsot's worker and every process below it; Monty's worker
processes, one checked-out session each (its pool sized to hold them). The
dolsot tree is read once its process count has stopped changing (checkpoint
writers done). Also printed: the processes per session and dolsot's PSS by
role (worker, keepers, runners, snapshots and the rest).

Run: PYTHONPATH=<build>/python python bench/repl/bench_new_session.py \
        [--rounds 5] [--cells 40] [--pace 0.03] [--sessions 40]
pydantic-monty is pinned in requirements/bench.txt and installed from there
when missing.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# The ordinary cell of the memory measure; Monty runs the same statements
# (its subset of Python has `math`, not `json`).
DOLSOT_CELL = "import json\ndef f(x):\n    return x * 2\nitems = [f(i) for i in range(100)]\n"
MONTY_CELL = "import math\ndef f(x):\n    return x * 2\nitems = [f(i) for i in range(100)]\n"
FIRST_CELL = "1 + 1"


def ensure_monty() -> None:
    if importlib.util.find_spec("pydantic_monty") is None:
        requirements = os.path.join(ROOT, "requirements", "bench.txt")
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r", requirements],
                       check=True)


def children(pid: int) -> list[int]:
    out: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{task}/children") as f:
                out.extend(int(p) for p in f.read().split())
    return out


def pss_kb(pid: int) -> int:
    with contextlib.suppress(OSError), open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("Pss:"):
                return int(line.split()[1])
    return 0


def tree(pid: int, depth: int = 0) -> list[tuple[int, int]]:
    """(pid, depth below `pid`) for `pid` and every descendant."""
    out = [(pid, depth)]
    for child in children(pid):
        out.extend(tree(child, depth + 1))
    return out


def settled_tree(pid: int) -> list[tuple[int, int]]:
    """The tree once its size has been the same for five looks 0.2 s apart
    (checkpoint writers and snapshots still forking or exiting change it)."""
    last, same = None, 0
    while same < 5:
        procs = tree(pid)
        same = same + 1 if last is not None and len(procs) == len(last) else 0
        last = procs
        time.sleep(0.2)  # a bench waits for quiet, not a result
    return last


# --- new sessions -------------------------------------------------------------

def time_dolsot_new(cells: int, pace: float, round_index: int) -> tuple[float, float]:
    """The median first cell, and the median whole turn (new session, its
    cell and its reset: what a loop of sessions pays per session)."""
    from dolsot import Repl
    from dolsot.store import MemoryStore

    repl = Repl(store=MemoryStore(), typecheck=False)
    assert repl.run("warm", FIRST_CELL).ok
    lat, turns = [], []
    for i in range(cells):
        if pace:
            time.sleep(pace)
        sid = f"r{round_index}n{i}"
        t0 = time.perf_counter()
        r = repl.run(sid, FIRST_CELL)
        lat.append(time.perf_counter() - t0)
        assert r.ok and r.value == "2", (r.value, r.error)
        repl.reset(sid)  # back to the pool, as Monty's checkout is (the turn only)
        turns.append(time.perf_counter() - t0)
    repl.close()
    return statistics.median(lat), statistics.median(turns)


def time_monty_new(pool, cells: int, pace: float) -> tuple[float, float]:
    lat, turns = [], []
    for _ in range(cells):
        if pace:
            time.sleep(pace)
        t0 = time.perf_counter()
        session = pool.checkout()
        session.__enter__()
        value = session.feed_run(FIRST_CELL)
        lat.append(time.perf_counter() - t0)
        session.__exit__(None, None, None)  # the turn only
        turns.append(time.perf_counter() - t0)
        assert value == 2, value
    return statistics.median(lat), statistics.median(turns)


# --- memory -------------------------------------------------------------------

def dolsot_memory(sessions: int) -> dict:
    from dolsot import Repl
    from dolsot.store import MemoryStore

    repl = Repl(store=MemoryStore(), typecheck=False, max_live_sessions=sessions + 8)
    # A warm engine: the worker shares its pages ahead once it has been idle
    # a moment (backend_subprocess/shared_heap.h); sessions opened in a
    # burst before that import dill themselves, as every session did before.
    assert repl.run("warm", "1").ok
    time.sleep(0.5)
    repl.reset("warm")
    for i in range(sessions):
        r = repl.run(f"m{i}", DOLSOT_CELL)
        assert r.ok, r.error
    # Idle sessions: a runner refreshes its snapshot once the host has sent
    # it nothing for a second (session_process.cc's RefreshWhenIdle).
    time.sleep(1.5)
    procs = settled_tree(repl.worker_pid)
    roles = {0: "worker", 1: "keepers", 2: "runners", 3: "snapshots and writers"}
    by_role: dict[str, list[int]] = {}
    for pid, depth in procs:
        by_role.setdefault(roles.get(depth, "deeper"), []).append(pss_kb(pid))
    total = sum(sum(v) for v in by_role.values())
    repl.close()
    return {"per_session_mb": total / 1024 / sessions, "processes": len(procs),
            "by_role": {k: (len(v), sum(v) / 1024) for k, v in by_role.items()}}


def monty_memory(sessions: int) -> dict:
    from pydantic_monty import Monty

    before = set(children(os.getpid()))
    with Monty(min_processes=sessions, max_processes=sessions) as pool:
        held = []
        for _ in range(sessions):
            session = pool.checkout()
            session.__enter__()
            session.feed_run(MONTY_CELL)
            held.append(session)
        workers = [p for p in children(os.getpid()) if p not in before]
        procs = [p for w in workers for p, _ in tree(w)]
        total = sum(pss_kb(p) for p in procs)
        for session in held:
            session.__exit__(None, None, None)
    return {"per_session_mb": total / 1024 / sessions, "processes": len(procs)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cells", type=int, default=40)
    parser.add_argument("--pace", type=float, default=0.03,
                        help="seconds between paced new sessions (untimed)")
    parser.add_argument("--sessions", type=int, default=40)
    parser.add_argument("--skip-memory", action="store_true")
    parser.add_argument("--memory-only", action="store_true",
                        help="only the memory measure (to compare builds: PYTHONPATH picks one)")
    args = parser.parse_args()
    ensure_monty()
    from pydantic_monty import Monty

    if args.memory_only:
        report_memory(args.sessions)
        return

    load_before = os.getloadavg()
    rows: dict[str, list[float]] = {k: [] for k in
                                    ("dolsot paced", "monty paced", "dolsot b2b", "monty b2b")}
    turns: dict[str, list[float]] = {k: [] for k in rows}
    with Monty(min_processes=1, max_processes=1) as pool:
        with pool.checkout() as warm:
            warm.feed_run(FIRST_CELL)
        for r in range(args.rounds):
            for key, measure in (("dolsot paced", lambda: time_dolsot_new(args.cells, args.pace, r)),
                                 ("monty paced", lambda: time_monty_new(pool, args.cells, args.pace)),
                                 ("dolsot b2b", lambda: time_dolsot_new(args.cells, 0.0, r)),
                                 ("monty b2b", lambda: time_monty_new(pool, args.cells, 0.0))):
                first, turn = measure()
                rows[key].append(first)
                turns[key].append(turn)
    load_after = os.getloadavg()
    med = {k: statistics.median(v) * 1e3 for k, v in rows.items()}
    print(f"{args.rounds} rounds x {args.cells} new sessions, paced {args.pace * 1e3:.0f} ms "
          f"apart and back to back; medians of per-round medians; {os.cpu_count()} CPUs, load "
          f"(1/5/15 min) before {'/'.join(f'{x:.2f}' for x in load_before)}, after "
          f"{'/'.join(f'{x:.2f}' for x in load_after)}")
    print("| new session + first cell | dolsot | Monty checkout + first cell | dolsot / Monty |")
    print("|---|--:|--:|--:|")
    for mode in ("paced", "b2b"):
        d, m = med[f"dolsot {mode}"], med[f"monty {mode}"]
        label = "paced" if mode == "paced" else "back to back"
        print(f"| {label} | {d:.3f} ms | {m:.3f} ms | {d / m:.2f}x |")
    turn = {k: statistics.median(v) * 1e3 for k, v in turns.items()}
    for mode in ("paced", "b2b"):
        d, m = turn[f"dolsot {mode}"], turn[f"monty {mode}"]
        label = "paced" if mode == "paced" else "back to back"
        print(f"| whole turn (open, cell, reset / checkout, cell, exit), {label} | {d:.3f} ms | "
              f"{m:.3f} ms | {d / m:.2f}x |")
    for k, v in rows.items():
        print(f"  {k} per round: {', '.join(f'{x * 1e3:.3f}' for x in v)} ms")
    if not args.skip_memory:
        report_memory(args.sessions)


def report_memory(sessions: int) -> None:
    dm = dolsot_memory(sessions)
    mm = monty_memory(sessions)
    print(f"\n{sessions} live idle sessions after one ordinary cell; PSS of the worker tree; "
          f"load (1 min) {os.getloadavg()[0]:.2f}")
    print("| | PSS per session | processes per session |")
    print("|---|--:|--:|")
    print(f"| dolsot | {dm['per_session_mb']:.2f} MB | {dm['processes'] / sessions:.2f} |")
    print(f"| Monty | {mm['per_session_mb']:.2f} MB | {mm['processes'] / sessions:.2f} |")
    print(f"dolsot / Monty: {dm['per_session_mb'] / mm['per_session_mb']:.2f}x")
    for role, (count, mb) in dm["by_role"].items():
        print(f"  dolsot {role}: {count} processes, {mb:.1f} MB PSS")


if __name__ == "__main__":
    main()
