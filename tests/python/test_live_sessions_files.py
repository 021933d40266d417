"""A Repl's host holds two descriptors per live session (its runner's and its
snapshot's sockets): at a low `ulimit -n` more sessions than it has files
for are evicted to the store, least recently used first, as past
max_live_sessions, instead of failing cells (bench/repl/bench_thousand.py
found cells failing at the limit, and existing sessions killed)."""

from __future__ import annotations

import subprocess
import sys

# Run in a child: RLIMIT_NOFILE is the whole process's.
SCRIPT = r"""
import os, resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
LIMIT = 160
resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, hard))
from dolsot import Repl
from dolsot.store import MemoryStore

repl = Repl(store=MemoryStore(), typecheck=False, max_live_sessions=200)
n = 80  # 160 descriptors for their sockets alone: more than the limit leaves
for i in range(n):
    r = repl.run(f"s{i}", f"items = [{i}]\nitems.append({i} * 2)\n")
    assert r.ok, (i, r.error)
for i in range(n):
    r = repl.run(f"s{i}", "items")
    assert r.ok and r.value == repr([i, 2 * i]), (i, r.value, r.error)
held = len(os.listdir("/proc/self/fd"))  # two per live session: fewer are live than ran
assert held < 2 * n, held
repl.close()
print("ok", held, flush=True)
"""


def test_sessions_past_the_hosts_file_limit_are_evicted_not_failed():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("ok "), done.stdout
