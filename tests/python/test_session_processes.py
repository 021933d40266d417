"""What a session's cells start and leave running (session_keeper.h): a
rolled-back cell leaves nothing running, whatever its processes did to
leave its process group (setsid, start_new_session=True, a shell's `&`); a
cell that completes keeps its processes; a closed session leaves none; one
session's rollback never touches another's processes; nothing becomes a
zombie."""

from __future__ import annotations

import os
import time

import pytest

import dolsot
from dolsot.store import MemoryStore
from process_tree import alive, children, wait_until_gone

# Starts three processes that leave the runner's process group, each its own
# way, and names them: a child in a session of its own, a shell's background
# job in a new session (its parent, the shell, exits at once), and a daemon
# made by a double fork in Python.
def start_escapers(token: str) -> str:
    """The cell, with sleeps of `token`-unique lengths (other tests on the
    machine run sleeps too)."""
    return _ESCAPERS.replace("TOKEN", token)


_ESCAPERS = """
import os, subprocess
own_session = subprocess.Popen(['sleep', '3000TOKEN'], start_new_session=True)
job = subprocess.run("setsid sleep 3001TOKEN > /dev/null 2>&1 & echo $!", shell=True,
                     capture_output=True, text=True).stdout.strip()
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.close(r)
        os.write(w, str(os.getpid()).encode())
        os.close(w)
        os.execvp('sleep', ['sleep', '3002TOKEN'])
    os._exit(0)
os.close(w)
daemon = os.read(r, 32).decode()
os.close(r)
escapers = [own_session.pid, int(job), int(daemon)]
"""


@pytest.fixture
def repl():
    r = dolsot.Repl(store=MemoryStore(), typecheck=False)
    yield r
    r.close()


def ok(repl, sid, code, **kw):
    r = repl.run(sid, code, **kw)
    assert r.ok, r.error
    return r


def token() -> str:
    return str(os.getpid()) + str(time.monotonic_ns() % 100000)


def sleepers_left(repl, sid, tok):
    """The pids of this token's sleeps still running, from a cell of `sid`."""
    # A process can end between the listing and the read (the machine's
    # others, or a killed one being reaped): it is no sleeper then.
    return ok(repl, sid, "import os\ndef _cmdline(p):\n    try:\n"
                         "        with open(f'/proc/{p}/cmdline') as f:\n            return f.read()\n"
                         "    except OSError:\n        return ''\n"
                         f"[p for p in os.listdir('/proc') if p.isdigit() and '{tok}' in _cmdline(p)]"
              ).value


def escapers(repl, sid):
    pids = [int(p) for p in ok(repl, sid, "escapers").value.strip("[]").split(",")]
    assert len(pids) == 3 and all(alive(p) for p in pids), pids
    return pids


def test_a_timed_out_cell_leaves_nothing_it_started_running(repl):
    ok(repl, "s", "kept = 1")
    tok = token()
    r = repl.run("s", start_escapers(tok) + "\nwhile True: pass", timeout=5)
    assert r.outcome == dolsot.Outcome.TIMEOUT, r.error
    # The rollback took `escapers` away: the processes are found by their
    # command lines instead.
    assert sleepers_left(repl, "s", tok) == "[]"
    assert ok(repl, "s", "kept").value == "1"


def test_a_rolled_back_cell_also_ends_what_earlier_cells_started(repl):
    # Rolling back leaves the session as its snapshot holds it: a state with
    # no process, as a pgid kill already ends the children that stayed in it.
    ok(repl, "s", start_escapers(token()))
    pids = escapers(repl, "s")
    assert not repl.run("s", "while True: pass", timeout=1).ok
    ok(repl, "s", "1")  # the promoted runner's first cell: the sweep is done
    assert [p for p in pids if alive(p)] == []


def test_a_crashed_cell_leaves_nothing_running_either(repl):
    tok = token()
    r = repl.run("s", start_escapers(tok) + "\nimport os; os._exit(9)")
    assert r.outcome == dolsot.Outcome.CRASHED, r.error
    assert sleepers_left(repl, "s", tok) == "[]"


def test_processes_of_cells_that_complete_keep_running(repl):
    ok(repl, "s", start_escapers(token()))
    pids = escapers(repl, "s")
    for i in range(3):
        ok(repl, "s", f"x = {i}")
    assert all(alive(p) for p in pids)


def test_one_sessions_rollback_spares_another_sessions_processes(repl):
    ok(repl, "a", start_escapers(token()))
    pids = escapers(repl, "a")
    assert not repl.run("b", "while True: pass", timeout=1).ok
    ok(repl, "b", "1")
    assert all(alive(p) for p in pids)


def test_a_reset_session_leaves_nothing_its_cells_started(repl):
    ok(repl, "a", start_escapers(token()))
    ok(repl, "b", start_escapers(token()))
    a, b = escapers(repl, "a"), escapers(repl, "b")
    repl.reset("a")
    for p in a:
        wait_until_gone(p)
    assert all(alive(p) for p in b)


def test_a_closed_repl_leaves_nothing_any_session_started():
    r = dolsot.Repl(store=MemoryStore(), typecheck=False)
    ok(r, "a", start_escapers(token()))
    pids = escapers(r, "a")
    worker = r.worker_pid
    r.close()
    assert not alive(worker)
    for p in pids:
        wait_until_gone(p)


def test_processes_that_exit_on_their_own_leave_no_zombie(repl):
    # Each shell's background job is reparented to the session's keeper (the
    # worker's child); it must be reaped when it exits, however many a
    # session starts. (A runner's own retired snapshot and last checkpoint
    # writer are reaped by the runner: the test below.)
    ok(repl, "s", "import subprocess\nfor _ in range(40): subprocess.run('sleep 0 &', shell=True)")
    ok(repl, "s", "1")
    worker = repl.worker_pid

    def zombies_below_keepers():
        out = []
        for keeper in children(worker):
            for p in children(keeper):
                try:
                    with open(f"/proc/{p}/stat") as f:
                        if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                            out.append(p)
                except (FileNotFoundError, ProcessLookupError):
                    continue
        return out

    # Reaping is asynchronous (SIGCHLD): bounded wait for the event.
    deadline = time.monotonic() + 20
    while zombies_below_keepers() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert zombies_below_keepers() == []


def test_an_idle_runner_leaves_no_zombie_of_its_own(repl):
    # After a cell on the general path the runner forks a checkpoint writer
    # and a new snapshot, and retires the old snapshot: the writer and the
    # retired snapshot exit while the session is idle, and are reaped then,
    # not at the next cell (an idle session is its keeper, runner, snapshot).
    ok(repl, "s", "x = [1, 2]")
    runner = int(ok(repl, "s", "import os\nos.getpid()").value)
    assert repl.run("other", "1").ok  # something else happens meanwhile

    def own_children():
        out = []
        for p in children(runner):
            try:
                with open(f"/proc/{p}/stat") as f:
                    out.append((p, f.read().rsplit(")", 1)[1].split()[0]))
            except (FileNotFoundError, ProcessLookupError):
                continue
        return out

    # Reaping follows the exits: bounded wait for the event.
    deadline = time.monotonic() + 20
    while len(own_children()) != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    left = own_children()
    assert len(left) == 1 and left[0][1] != "Z", left  # its snapshot, alive
    assert ok(repl, "s", "x").value == "[1, 2]"


def test_a_cell_that_asks_the_keeper_for_sweeps_harms_nothing(repl):
    # A cell can reach the keeper's channel (it runs in the runner, which holds
    # it) and ask for a sweep at will: the keeper then kills only its own
    # children that are no engine process of the session. The snapshot, the
    # checkpoint writers and the runner are spared: a rollback still works.
    ok(repl, "s", "kept = 1")
    ok(repl, "s", start_escapers(token()))
    pids = escapers(repl, "s")
    forged = ok(repl, "s", """
import os, socket
sent = 0
for name in os.listdir('/proc/self/fd'):
    try:
        s = socket.socket(fileno=os.dup(int(name)))
    except OSError:
        continue
    try:
        if s.type == socket.SOCK_SEQPACKET:
            s.send(b'x')
            sent += 1
    except OSError:
        pass
    finally:
        s.close()
sent
""")
    assert forged.value == "1", forged.value
    # What the keeper adopted is swept (the session's own orphans: it could
    # kill them anyway); the runner's own children are not the keeper's.
    for p in pids[1:]:
        wait_until_gone(p)
    assert alive(pids[0])
    assert not repl.run("s", "kept = 2\nwhile True: pass", timeout=1).ok
    assert ok(repl, "s", "kept").value == "1"
