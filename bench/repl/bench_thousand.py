"""A thousand live sessions in one Repl (issue #39's "A thousand live
sessions" target): nothing lost, none evicted, and what it costs.

One `Repl(max_live_sessions=N, store=MemoryStore(), typecheck=False)` (or a
FileStore in a temporary directory, `--store file`) opens `--sessions` N
sessions one after another, each with the ordinary first cell of
bench_new_session.py (an import, a def, a list) plus its own index. Then
`--cells` rounds, each a pass over every session of three kinds of cell:

  binding  `b = <a constant of its own>`            (a binding cell)
  general  `items.append(f(idx + r))` and a total   (forks a rollback point)
  read     `(idx, b, len(items), total)`            (checked as it returns)

Every session's state is distinct (it follows from its index). At the end
each session is asked the pid of its keeper (a session restored from the
store has a new one: it was evicted), then a read cell returns its whole
state, compared with what it must be: a wrong value, a failed cell or an
evicted session is a failure, named, and the exit status is 1. The keepers
in the worker tree are counted as well (one per live session, plus the
sessions opened ahead).

Reported: the sessions; the wall time to open them all; p50/p99/max per
cell of each kind (first cell, binding, general, read; one thread, back to
back); processes in the worker tree (total, per session, by role); PSS of
the worker tree (from /proc/PID/smaps_rollup, read once its process count
has settled) in total and per session; the host's RSS and how long
`sessions()` takes; threads and open fds of the host (settled and the most
seen) and of the worker, against the limits that bound them (`ulimit -n`,
`ulimit -u`, pid_max, threads-max); the machine's load before and after,
and its runnable tasks in each phase. After
`close()` no process of the worker tree may be left (checked: exit 1 if
one is).

Run: PYTHONPATH=<build>/python python bench/repl/bench_thousand.py \
        [--sessions 1000] [--cells 3] [--store memory|file]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from bench_new_session import DOLSOT_CELL, pss_kb, settled_tree  # noqa: E402

KEEPER = "__import__('os').getppid()"  # untimed probe: the pid of the session's keeper


def first_cell(i: int) -> str:
    return DOLSOT_CELL + f"idx = {i}\n"


def binding_cell(i: int, r: int) -> str:
    return f"b = {i * 1000 + r}\n"


def general_cell(i: int, r: int) -> str:
    return f"items.append(f(idx + {r}))\ntotal = sum(items)\n"


READ_CELL = "(idx, b, len(items), total)"
FINAL_CELL = "(idx, b, len(items), items[-3:], total)"


def expected_items(i: int, rounds_done: int) -> list[int]:
    return [x * 2 for x in range(100)] + [(i + r) * 2 for r in range(rounds_done)]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[k]


def count_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def count_threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return -1


def rss_kb(pid: int) -> int:
    with contextlib.suppress(OSError), open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def read_int(path: str) -> int:
    with open(path) as f:
        return int(f.read().split()[0])


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def limits() -> dict[str, str]:
    def fmt(v: int) -> str:
        return "unlimited" if v == resource.RLIM_INFINITY else str(v)

    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)
    nproc = resource.getrlimit(resource.RLIMIT_NPROC)
    return {"open files (soft/hard)": f"{fmt(nofile[0])}/{fmt(nofile[1])}",
            "processes (soft/hard)": f"{fmt(nproc[0])}/{fmt(nproc[1])}",
            "pid_max": str(read_int("/proc/sys/kernel/pid_max")),
            "threads-max": str(read_int("/proc/sys/kernel/threads-max"))}


def user_tasks() -> int:
    """Threads of this user on the machine (what RLIMIT_NPROC counts)."""
    uid, count = os.getuid(), 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError):
            if os.stat(f"/proc/{entry}").st_uid == uid:
                count += count_threads(int(entry))
    return count


def procs_running() -> int:
    """Tasks runnable on the machine right now (/proc/stat)."""
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("procs_running"):
                return int(line.split()[1])
    return 0


class Watcher:
    """Every 20 ms: the most descriptors this process held, and the tasks
    runnable on the machine (all of it: the other sessions' too)."""

    def __init__(self) -> None:
        self.peak = count_fds(os.getpid())
        self.running: list[int] = []
        self.marks: dict[str, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, count_fds(os.getpid()))
            self.running.append(procs_running())

    def mark(self, phase: str) -> None:
        """Samples from here on belong to `phase`."""
        self.marks[phase] = len(self.running)

    def phases(self) -> dict[str, list[int]]:
        names = list(self.marks)
        ends = [self.marks[k] for k in names[1:]] + [len(self.running)]
        return {k: self.running[self.marks[k]:e] or [0] for k, e in zip(names, ends)}

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


class Failures:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, what: str) -> None:
        self.items.append(what)
        if len(self.items) <= 20:
            print(f"FAIL: {what}", file=sys.stderr, flush=True)


def timed_run(repl, sid: str, code: str, lat: list[float], failures: Failures, kind: str):
    t0 = time.perf_counter()
    r = repl.run(sid, code)
    lat.append(time.perf_counter() - t0)
    if not r.ok:
        failures.add(f"{kind} cell in {sid} failed: {r.error!r}")
    return r


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--cells", type=int, default=3,
                        help="rounds over every session, each a binding, a general and a read cell")
    parser.add_argument("--store", choices=("memory", "file"), default="memory")
    args = parser.parse_args()
    if args.sessions < 1 or args.cells < 1:
        parser.error("--sessions and --cells must be at least 1")
    n = args.sessions

    from dolsot import Repl
    from dolsot.store import FileStore, MemoryStore

    # A Repl holds its live sessions to what the host's open-files limit
    # leaves room for (four descriptors each after 64: docs/architecture.md).
    soft_files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if soft_files != resource.RLIM_INFINITY and (soft_files - 64) // 4 < n:
        print(f"warning: ulimit -n is {soft_files}: room for {(soft_files - 64) // 4} live "
              f"sessions, so the rest are evicted to the store (raise it to {4 * n + 64} "
              f"to keep {n} live)", flush=True)

    tmp = None
    if args.store == "file":
        tmp = tempfile.TemporaryDirectory(prefix="dolsot-thousand-")
        store = FileStore(tmp.name)
    else:
        store = MemoryStore()

    load_before = os.getloadavg()
    host = os.getpid()
    fds_before = count_fds(host)
    host_rss_mb_before = rss_kb(host) / 1024
    failures = Failures()
    lat: dict[str, list[float]] = {"first": [], "binding": [], "general": [], "read": []}
    sids = [f"t{i}" for i in range(n)]
    keeper: dict[str, int] = {}

    running_before = []
    for _ in range(25):
        running_before.append(procs_running())
        time.sleep(0.02)  # a look at the machine before, not a wait for a result
    fd_peak = Watcher()
    repl = Repl(store=store, typecheck=False, max_live_sessions=n)
    # A warm engine, as in bench_new_session: once idle a moment the worker
    # shares its pages ahead (dill imported, gc.freeze()) for every session.
    assert repl.run("warm", "1").ok
    time.sleep(0.5)  # a bench waits for quiet, not a result
    repl.reset("warm")
    fd_peak.mark("open")
    t_open = time.perf_counter()
    for i, sid in enumerate(sids):
        timed_run(repl, sid, first_cell(i), lat["first"], failures, "first")
        probe = repl.run(sid, KEEPER)  # untimed
        if probe.ok:
            keeper[sid] = int(probe.value)
        else:
            failures.add(f"keeper probe in {sid} failed: {probe.error!r}")
        if (i + 1) % 100 == 0:
            print(f"  opened {i + 1}: host fds {count_fds(host)}, threads "
                  f"{count_threads(host)}, worker fds {count_fds(repl.worker_pid)}", flush=True)
    open_wall = time.perf_counter() - t_open
    worker = repl.worker_pid

    fd_peak.mark("rounds")
    t_rounds = time.perf_counter()
    for r in range(args.cells):
        for i, sid in enumerate(sids):
            timed_run(repl, sid, binding_cell(i, r), lat["binding"], failures, "binding")
        for i, sid in enumerate(sids):
            timed_run(repl, sid, general_cell(i, r), lat["general"], failures, "general")
        for i, sid in enumerate(sids):
            res = timed_run(repl, sid, READ_CELL, lat["read"], failures, "read")
            items = expected_items(i, r + 1)
            want = repr((i, i * 1000 + r, len(items), sum(items)))
            if res.ok and res.value != want:
                failures.add(f"{sid} after round {r}: read {res.value}, expected {want}")
    rounds_wall = time.perf_counter() - t_rounds

    # The tree once quiet (async checkpoint writers done), then each session's whole state.
    fd_peak.mark("settle, check, close")
    procs = settled_tree(worker)
    roles = {0: "worker", 1: "keepers", 2: "runners", 3: "snapshots and writers"}
    by_role: dict[str, list[int]] = {}
    fds_by_role: dict[str, list[int]] = {}
    for pid, depth in procs:
        by_role.setdefault(roles.get(depth, "deeper"), []).append(pss_kb(pid))
        fds_by_role.setdefault(roles.get(depth, "deeper"), []).append(count_fds(pid))
    pss_total_mb = sum(sum(v) for v in by_role.values()) / 1024
    keepers = len(by_role.get("keepers", []))
    host_fds, host_threads = count_fds(host), count_threads(host)
    worker_fds, worker_threads = count_fds(worker), count_threads(worker)
    tree_fds = sum(max(0, count_fds(pid)) for pid, _ in procs)
    tasks = user_tasks()
    host_rss_mb = rss_kb(host) / 1024
    t_list = time.perf_counter()
    listed = len(repl.sessions())
    list_ms = (time.perf_counter() - t_list) * 1e3

    # First each session's keeper (a restored session has a new one: it was
    # evicted), then its whole state (a wrong one is lost, evicted or not).
    evicted = 0
    for sid in sids:
        probe = repl.run(sid, KEEPER)
        if probe.ok and sid in keeper and int(probe.value) != keeper[sid]:
            evicted += 1
    rounds = args.cells
    wrong = 0
    for i, sid in enumerate(sids):
        res = repl.run(sid, FINAL_CELL)
        items = expected_items(i, rounds)
        want = repr((i, i * 1000 + rounds - 1, len(items), items[-3:], sum(items)))
        if not res.ok or res.value != want:
            wrong += 1
            failures.add(f"{sid}: state {res.value if res.ok else res.error!r}, expected {want}")
    if keepers < n:
        failures.add(f"{keepers} keepers in the worker tree for {n} live sessions")
    if evicted:
        failures.add(f"{evicted} sessions evicted (their keeper changed)")

    tree_pids = [pid for pid, _ in procs]
    t_close = time.perf_counter()
    repl.close()
    close_wall = time.perf_counter() - t_close
    left = [pid for pid in tree_pids if alive(pid)]
    if left:
        failures.add(f"{len(left)} processes of the worker tree still run after close(): "
                     f"{left[:10]}")
    host_fd_peak = fd_peak.stop()
    fds_after = count_fds(host)
    if tmp is not None:
        tmp.cleanup()
    load_after = os.getloadavg()

    print(f"\n{n} live sessions in one Repl (max_live_sessions={n}, "
          f"{args.store} store, typecheck off), {args.cells} rounds of binding/general/read "
          f"cells over all of them, one thread; {os.cpu_count()} CPUs, load (1/5/15 min) "
          f"before {'/'.join(f'{x:.2f}' for x in load_before)}, after "
          f"{'/'.join(f'{x:.2f}' for x in load_after)}")
    print(f"runnable tasks on the machine (/proc/stat procs_running, every 20 ms; the "
          f"other sessions' too): before the Repl mean {statistics.mean(running_before):.1f}; "
          + "; ".join(f"{phase} mean {statistics.mean(v):.1f}, p99 {percentile(v, 0.99)}"
                      for phase, v in fd_peak.phases().items()))
    print(f"open all {n} (first cell each, + an untimed probe): {open_wall:.1f} s; "
          f"the rounds: {rounds_wall:.1f} s; close(): {close_wall:.2f} s")
    print("| cell | count | p50 | p99 | max |")
    print("|---|--:|--:|--:|--:|")
    for kind, values in lat.items():
        if values:
            print(f"| {kind} | {len(values)} | {statistics.median(values) * 1e3:.3f} ms | "
                  f"{percentile(values, 0.99) * 1e3:.3f} ms | {max(values) * 1e3:.3f} ms |")
    print(f"worker tree: {len(procs)} processes ({len(procs) / n:.2f} per session), "
          f"PSS {pss_total_mb:.0f} MB ({pss_total_mb / n:.2f} MB per session)")
    for role, values in by_role.items():
        fds = fds_by_role[role]
        print(f"  {role}: {len(values)} processes, {sum(values) / 1024:.1f} MB PSS, "
              f"fds each {min(fds)}-{max(fds)} (median {statistics.median(fds):.0f})")
    print(f"keepers {keepers} (sessions {n} + those opened ahead); sessions evicted "
          f"{evicted}, with a wrong or lost state {wrong}")
    print(f"host: RSS {host_rss_mb:.0f} MB ({host_rss_mb_before:.0f} MB before the Repl); "
          f"sessions() listed {listed} in {list_ms:.1f} ms")
    print(f"host: {host_fds} fds ({fds_before} before the Repl, {fds_after} after close; "
          f"{(host_fds - fds_before) / n:.2f} per session; at most {host_fd_peak}), {host_threads} threads; "
          f"worker: {worker_fds} fds, {worker_threads} threads; "
          f"fds in the whole tree {tree_fds}; this user's tasks {tasks}")
    print("limits: " + ", ".join(f"{k} {v}" for k, v in limits().items()))
    if failures.items:
        print(f"FAILED: {len(failures.items)} failures; first: {failures.items[0]}")
        return 1
    print("nothing lost, none evicted, nothing left after close()")
    return 0


if __name__ == "__main__":
    sys.exit(main())
