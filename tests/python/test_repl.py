"""Repl, the forked-worker backend, through Python: state between cells,
rollback on timeouts and crashes, dropped names, checkpoints and restore,
threads, branches, gates, Ctrl-C, and no process or fd left behind."""

from __future__ import annotations

import asyncio
import json
import os
import select
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

import dolsot
from dolsot.repl import Repl
from dolsot.store import FileStore, MemoryStore
from counting_store import CountingStore
from process_tree import alive


@pytest.fixture
def repl():
    r = Repl(store=MemoryStore(), typecheck=False, checkpoint="sync")
    yield r
    r.close()


def test_state_value_stdout_and_held(repl):
    r = repl.run("s", "x = 20\nprint('hi')\nx + 1")
    assert (r.ok, r.value, r.stdout, r.exit_code) == (True, "21", "hi\n", 0)
    r = repl.run("s", "def double(v):\n    return 2 * v\ndouble(x)")
    assert r.value == "40"
    assert r.held == ["x", "double"]


def test_errors_are_results_not_exceptions(repl):
    r = repl.run("s", "1/0")
    assert not r.ok and r.exit_code == 1
    assert "ZeroDivisionError" in r.error
    assert repl.run("s", "raise SystemExit(3)").exit_code != 0
    assert repl.run("s", "input()").error.count("EOFError") == 1
    assert repl.run("s", "'alive'").value == "'alive'"


def test_toolbox_from_host_sys_path_and_its_exit_code(tmp_path, monkeypatch):
    (tmp_path / "mytools_for_repl.py").write_text(textwrap.dedent("""
        __all__ = ["add", "ToolError"]
        class ToolError(Exception):
            exit_code = 3
        def add(a, b):
            return a + b
        def fail():
            raise ToolError("not found")
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    import mytools_for_repl

    with Repl({"mt": mytools_for_repl, "js": "json"}, store=MemoryStore(), typecheck=False) as r:
        res = r.run("t", "mt.add(1, 2), js.dumps(None)")
        assert res.value == "(3, 'null')"
        assert res.held == []
        res = r.run("t", "mt.fail()")
        assert res.exit_code == 3 and "not found" in res.error


def test_caller_mistakes_raise_before_any_code_runs():
    with Repl(store=MemoryStore(), typecheck=False) as r:
        with pytest.raises(dolsot.InvalidSession):
            r.run("bad id!", "1")
        with pytest.raises(dolsot.InvalidSession):
            r.run("ok", "  ")
        assert r.worker_pid == -1
    with pytest.raises(dolsot.InvalidToolbox):
        Repl({"x": 42})
    with Repl({"nope": "dolsot_no_such_module_xyz"}, store=MemoryStore(), typecheck=False) as r:
        with pytest.raises(dolsot.InvalidToolbox, match="dolsot_no_such_module_xyz"):
            r.run("s", "1")
    with pytest.raises(ValueError):
        Repl(checkpoint="sometimes")


@pytest.mark.timeout(60)
@pytest.mark.parametrize("runaway", ["while True: pass", "import time\ntime.sleep(60)"])
def test_timeout_returns_124_with_partial_output_and_rolls_back(repl, runaway):
    repl.run("s", "state = [1, 2, 3]")
    r = repl.run("s", "print('before', flush=True)\nstate.append(4)\n" + runaway, timeout=1)
    assert (r.ok, r.exit_code, r.stdout) == (False, 124, "before\n")
    assert "timeout" in r.error
    assert repl.run("s", "state").value == "[1, 2, 3]"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("crash", ["import ctypes\nctypes.string_at(0)", "import os\nos._exit(3)"])
def test_crash_leaves_session_intact(repl, crash):
    repl.run("s", "kept = {'a': 1}")
    r = repl.run("s", "kept['a'] = 2\n" + crash)
    assert not r.ok and r.exit_code == 1
    assert "rolled back" in r.error
    assert repl.run("s", "kept").value == "{'a': 1}"


def test_live_objects_are_dropped_but_stay_usable(repl):
    r = repl.run("s", "import socket, threading\ns = socket.socket()\nlock = threading.Lock()\n"
                      "g = (i for i in range(3))\nkeep = [1]")
    assert sorted(r.dropped) == ["g", "lock", "s"]
    r = repl.run("s", "s.fileno() >= 0, lock.acquire(), next(g), keep")
    assert r.value == "(True, True, 0, [1])"


@pytest.mark.timeout(60)
def test_new_repl_restores_from_store_after_async_checkpoint(tmp_path):
    store = FileStore(str(tmp_path / "sessions"))
    with Repl(store=store, typecheck=False) as r:  # checkpoint="async" by default
        r.run("keep", "def triple(n):\n    return 3 * n\nitems = [1, 2]")
    with Repl(store=store, typecheck=False) as r:
        res = r.run("keep", "triple(len(items))")
        assert res.ok, res.error
        assert res.value == "6"
        assert [s.id for s in r.sessions()] == ["keep"]
        assert r.reset("keep") == 1
        assert r.sessions() == []


@pytest.mark.timeout(60)
def test_two_sessions_run_in_parallel(repl, tmp_path):
    fifo = str(tmp_path / "rendezvous")
    os.mkfifo(fifo)
    results = {}

    def run(sid, code):
        results[sid] = repl.run(sid, code, timeout=30)

    # Each cell blocks until the other one opens the fifo: only parallel runs finish.
    a = threading.Thread(target=run, args=("a", f"open({fifo!r}).read()"))
    b = threading.Thread(target=run, args=("b", f"f = open({fifo!r}, 'w')\nf.write('x')\nf.close()"))
    a.start(), b.start()
    a.join(), b.join()
    assert results["a"].value == "'x'"
    assert results["b"].ok


@pytest.mark.timeout(60)
def test_calls_on_one_session_run_in_arrival_order(repl, tmp_path):
    fifo = str(tmp_path / "gate")
    os.mkfifo(fifo)
    repl.run("s", "log = []")
    first = threading.Thread(
        target=repl.run, args=("s", f"log.append('a-start')\nopen({fifo!r}).read()\nlog.append('a-end')"))
    first.start()
    writer = open(fifo, "w")  # returns once the first cell is running
    second = threading.Thread(target=repl.run, args=("s", "log.append('b')"))
    second.start()
    writer.write("go")
    writer.close()
    first.join(), second.join()
    assert repl.run("s", "log").value == "['a-start', 'a-end', 'b']"


def test_arun(repl):
    async def main():
        return await asyncio.gather(repl.arun("x", "1 + 1"), repl.arun("y", "2 + 2"))

    assert [r.value for r in asyncio.run(main())] == ["2", "4"]


def test_branch_copies_state(repl):
    repl.run("root", "n = 1")
    repl.branch("root", "twig")
    repl.run("twig", "n += 10")
    assert repl.run("root", "n").value == "1"
    assert repl.run("twig", "n").value == "11"
    with pytest.raises(dolsot.InvalidSession):
        repl.branch("root", "twig")


# Cells are named "<cell N>" by the session itself: the number is part of the
# session's state, so a function from an earlier cell keeps its own name and
# source in tracebacks after a restore, in a branch, and after a rollback.
@pytest.mark.timeout(60)
@pytest.mark.parametrize("checkpoint", ["sync", "async"])
def test_a_restored_function_keeps_its_cell_and_source(tmp_path, checkpoint):
    store = FileStore(str(tmp_path / "sessions"))
    with Repl(store=store, typecheck=False, checkpoint=checkpoint) as r:
        r.run("s", "x = 1")
        r.run("s", "def f():\n    return 1 / 0  # f's own line\n")
    with Repl(store=store, typecheck=False, checkpoint=checkpoint) as r:
        r.run("s", "y = 2\nz = 3  # a later cell's second line\n")
        error = r.run("s", "f()").error
    assert 'File "<cell 4>", line 1, in <module>' in error, error
    assert 'File "<cell 2>", line 2, in f' in error, error
    assert "f's own line" in error and "later cell" not in error, error


def test_a_branch_numbers_its_cells_after_its_source(repl):
    repl.run("root", "def f():\n    raise ValueError('from f')\n")
    repl.branch("root", "twig")
    repl.run("twig", "q = 1\nw = 2  # the branch's second line\n")
    error = repl.run("twig", "f()").error
    assert 'File "<cell 3>", line 1, in <module>' in error, error
    assert 'File "<cell 1>", line 2, in f' in error, error
    assert "raise ValueError('from f')" in error and "branch's" not in error, error


@pytest.mark.parametrize("snapshots", [True, False])
def test_a_cell_that_died_leaves_its_number_to_the_next(snapshots):
    with Repl(store=MemoryStore(), typecheck=False, checkpoint="sync", snapshots=snapshots) as r:
        r.run("s", "def f():\n    raise ValueError('from f')\n")
        died = r.run("s", "import os\nos._exit(3)")
        assert not died.ok
        error = r.run("s", "f()").error
    assert 'File "<cell 2>", line 1, in <module>' in error, error
    assert 'File "<cell 1>", line 2, in f' in error, error


@pytest.mark.timeout(60)
@pytest.mark.parametrize("snapshots", [True, False])
def test_a_process_a_cell_forks_never_answers_for_the_session(snapshots):
    # os.fork() in a cell, the child neither execs nor exits: it runs the rest
    # of the cell, then exits without a word to the host. Only the runner
    # answers; its stdout holds its own output, and later cells get their own
    # Results (before, the child could answer in the runner's place).
    with Repl(store=MemoryStore(), typecheck=False, checkpoint="sync", snapshots=snapshots) as r:
        children = []
        for i in range(5):
            res = r.run("s", "import os\npid = os.fork()\nprint('child' if pid == 0 else 'parent')\npid")
            assert (res.ok, res.stdout) == (True, "parent\n"), res
            children.append(int(res.value))
            assert r.run("s", f"{i} + 1").value == str(i + 1)
            assert r.run("s", "pid > 0").value == "True"
        assert _wait_gone(children, 30)


def test_gate_rejects_before_running():
    def gate(code):
        return ["line 1: no imports here"] if "import" in code else []

    with Repl(store=MemoryStore(), typecheck=False, gate=gate) as r:
        res = r.run("s", "import os")
        assert (res.ok, res.exit_code) == (False, 1)
        assert "no imports here" in res.error
        assert res.held == []  # the rejection says what the session holds
        assert r.run("s", "'os' in globals()").value == "False"  # the cell had no effect

    def broken(code):
        raise RuntimeError("gate crashed")

    with Repl(store=MemoryStore(), typecheck=False, gate=broken) as r:
        res = r.run("s", "1")
        assert not res.ok and "gate crashed" in res.error


def test_bounded_output(repl):
    with Repl(store=MemoryStore(), typecheck=False, max_output=1000) as r:
        res = r.run("s", "print('x' * 100000)\nlist(range(10**6))")
        assert len(res.stdout) < 2000
        assert len(res.value) <= 1000


def _children_of(pid):
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


@pytest.mark.parametrize("snapshots,checkpoint", [(True, "async"), (False, "async"), (False, "sync")])
def test_a_checkpoint_of_several_frames_is_saved_and_restored_whole(tmp_path, snapshots, checkpoint):
    # 40 MiB crosses the wire as MESSAGE_SIZE and three frames every way: the
    # writer's CHECKPOINT_DATA (or, sync, ahead of the Result), and the
    # host's LOAD into a new session process. Every byte must come back.
    store = FileStore(str(tmp_path / "sessions"))
    cell = ("import hashlib\n"
            "state = bytearray(range(256)) * (40 * 4096)\n"
            "state[17 << 20] = 7\n"
            "def digest():\n    return hashlib.sha256(state).hexdigest()\n"
            "first = digest()")
    with Repl(store=store, typecheck=False, snapshots=snapshots, checkpoint=checkpoint) as r:
        assert r.run("s", cell).ok
        first = r.run("s", "first").value
        assert r.run("s", "state[-1] = 1; second = digest()").ok  # the general path again
        second = r.run("s", "second").value
        assert first != second
        r.sessions()  # an async checkpoint lands first
    (info,) = store.list()
    assert info.size_bytes > 40 << 20
    with Repl(store=store, typecheck=False, snapshots=snapshots, checkpoint=checkpoint) as again:
        restored = again.run("s", "(len(state), state[17 << 20], state[-1], digest() == second)")
        assert restored.ok, restored.error
        assert restored.value == f"({40 << 20}, 7, 1, True)"


@pytest.mark.parametrize("checkpoint", ["off", "sync", "async"])
@pytest.mark.parametrize("state_mb", [0, 20])
def test_host_descriptors_stay_bounded_while_cells_run(checkpoint, state_mb):
    # Cells back to back, faster than a 20 MB checkpoint is written. The host
    # holds, beyond what it held after the first cell: retired snapshots'
    # sockets waiting to be closed in a batch (at most 7), the channel the
    # saver reads and one newer waiting checkpoint (a still newer one replaces
    # it). Never one more per cell.
    with Repl(store=MemoryStore(), typecheck=False, checkpoint=checkpoint) as r:
        r.run("s", f"v = 0\nstate = bytes({state_mb} * 1024 * 1024)")
        start = len(os.listdir("/proc/self/fd"))
        counts = []
        for i in range(60):
            assert r.run("s", f"v = {i}").ok
            counts.append(len(os.listdir("/proc/self/fd")))
    assert max(counts) <= start + 10, counts


@pytest.mark.timeout(300)
def test_no_process_or_fd_left_after_1000_cells_and_close():
    fds_before = len(os.listdir("/proc/self/fd"))
    r = Repl(store=MemoryStore(), typecheck=False)
    for i in range(1000):
        assert r.run(f"s{i % 3}", f"v = {i}").ok
    r.run("s0", "while True: pass", timeout=0.2)
    worker = r.worker_pid
    r.close()
    assert _children_of(os.getpid()) == []
    assert not os.path.exists(f"/proc/{worker}")
    assert len(os.listdir("/proc/self/fd")) == fds_before


def _wait_gone(pids, timeout):
    fds = []
    for pid in pids:
        try:
            fds.append(os.pidfd_open(pid))
        except ProcessLookupError:
            pass
    try:
        for fd in fds:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                return False
        return True
    finally:
        for fd in fds:
            os.close(fd)


HOST = """
import os, sys
sys.path.insert(0, {path!r})
from dolsot.repl import Repl
from dolsot.store import MemoryStore
r = Repl(store=MemoryStore(), typecheck=False)
res = r.run("s", "import os\\n(os.getpid(), os.getppid())")
print(r.worker_pid, *eval(res.value), flush=True)
{tail}
"""


@pytest.mark.timeout(60)
def test_killed_host_leaves_no_process_behind():
    path = os.path.dirname(os.path.dirname(dolsot.__file__))
    host = subprocess.Popen([sys.executable, "-c", HOST.format(path=path, tail="sys.stdin.read()")],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    pids = [int(p) for p in host.stdout.readline().split()]
    # The worker and the runner (the worker's child) are alive.
    assert len(pids) == 3 and all(os.path.exists(f"/proc/{p}") for p in pids[:2])
    host.kill()
    host.wait()
    assert _wait_gone(pids, 20)


def _host_running_a_runaway_cell(tmp_path):
    """A host process whose cell reports its own pid through a fifo, then
    loops: (host, [worker, first runner, its parent], the runner's pid)."""
    fifo = str(tmp_path / "runner-pid")
    os.mkfifo(fifo)
    cell = ("import os\n"
            f"fd = os.open({fifo!r}, os.O_WRONLY)\n"
            "os.write(fd, str(os.getpid()).encode())\n"
            "os.close(fd)\n"
            "while True: pass")
    path = os.path.dirname(os.path.dirname(dolsot.__file__))
    tail = f"r.run('s', {cell!r}, timeout=600)"
    host = subprocess.Popen([sys.executable, "-c", HOST.format(path=path, tail=tail)],
                            stdout=subprocess.PIPE, text=True)
    pids = [int(p) for p in host.stdout.readline().split()]
    with open(fifo) as f:
        runner = int(f.read())
    return host, pids, runner


@pytest.mark.timeout(60)
def test_killed_host_during_a_runaway_cell_leaves_no_process_behind(tmp_path):
    # The host is killed while the cell runs: the worker sees it go and kills
    # every session process.
    host, pids, runner = _host_running_a_runaway_cell(tmp_path)
    assert os.path.exists(f"/proc/{runner}")
    host.kill()
    host.wait()
    assert _wait_gone(pids + [runner], 20)


@pytest.mark.timeout(60)
def test_killed_worker_then_host_during_a_runaway_cell_leaves_no_process_behind(tmp_path):
    # With the worker killed first, the runner's snapshot watches the host (a
    # pidfd) and kills the runner, so the runaway cell still ends with the host.
    host, pids, runner = _host_running_a_runaway_cell(tmp_path)
    snapshots = [p for p in _children_of(runner) if alive(p)]
    assert snapshots, "rollback on: the runner has a snapshot"
    os.kill(pids[0], signal.SIGKILL)  # the worker
    assert _wait_gone([pids[0]], 20)
    assert alive(runner)
    host.kill()
    host.wait()
    assert _wait_gone([runner, *snapshots], 20)


@pytest.mark.timeout(60)
def test_ctrl_c_interrupts_the_cell_and_keeps_the_session():
    path = os.path.dirname(os.path.dirname(dolsot.__file__))
    # Python's own Ctrl-C handler, as an interactive host has it: a host
    # started in the background (a CI job's `cmd &`) inherits SIGINT ignored,
    # and Python then installs none.
    tail = textwrap.dedent("""
        import signal
        signal.signal(signal.SIGINT, signal.default_int_handler)
        r.run("s", "x = 1")
        try:
            r.run("s", f"import os, signal\\nx = 2\\nos.kill({os.getpid()}, signal.SIGINT)\\nwhile True: pass")
        except KeyboardInterrupt:
            print("interrupted", r.run("s", "x").value, flush=True)
        r.close()
    """)
    out = subprocess.run([sys.executable, "-c", HOST.format(path=path, tail=tail)],
                         capture_output=True, text=True, timeout=50)
    lines = out.stdout.splitlines()
    assert lines[-1] == "interrupted 1", out.stderr
    assert _wait_gone([int(p) for p in lines[0].split()], 20)


class RecordingStore:
    """A Python store (the SessionStore protocol) that signals each save."""

    def __init__(self):
        self.blobs = {}
        self.saved = threading.Event()

    def load(self, sid):
        return self.blobs.get(sid)

    def save(self, sid, blob):
        self.blobs[sid] = bytes(blob)
        self.saved.set()

    def delete(self, sid):
        if sid == "all":
            n = len(self.blobs)
            self.blobs.clear()
            return n
        return 1 if self.blobs.pop(sid, None) is not None else 0

    def list(self):
        return [dolsot.SessionInfo(sid, len(b), 0.0) for sid, b in self.blobs.items()]


@pytest.mark.timeout(60)
def test_async_checkpoint_lands_in_a_python_store_and_reports_dropped():
    store = RecordingStore()
    with Repl(store=store, typecheck=False) as r:  # checkpoint="async"
        r.run("s", "import socket\nsock = socket.socket()\nx = 1")
        assert store.saved.wait(30)  # written by a forked copy, saved off the caller's thread
        res = r.run("s", "x")
        assert res.dropped == ["sock"]
    with Repl(store=store, typecheck=False) as r:
        assert r.run("s", "x").value == "1"
        assert r.run("s", "'sock' in globals()").value == "False"


class FailingStore(RecordingStore):
    def save(self, sid, blob):
        self.saved.set()
        raise OSError("disk full")


@pytest.mark.timeout(60)
def test_a_failed_async_save_is_reported_with_the_next_result():
    store = FailingStore()
    # The saves of the last cells fail too: close says so (StoreError).
    with pytest.raises(dolsot.StoreError, match="disk full"):
        with Repl(store=store, typecheck=False) as r:  # checkpoint="async"
            assert r.run("s", "x = 1").ok
            assert store.saved.wait(30)
            res = r.run("s", "x + 1")
            # The save happens off the caller's thread; its failure is reported
            # on a later Result once it has been recorded.
            for _ in range(50):
                if res.error:
                    break
                res = r.run("s", "x + 1")
            assert res.value == "2"
            assert res.error is not None and "not saved" in res.error and "disk full" in res.error


class _FullDiskStore:
    """A Python store whose saves fail, as on a full disk."""

    def load(self, sid):
        return None

    def save(self, sid, blob):
        raise OSError(28, "No space left on device")

    def delete(self, sid):
        return 0

    def list(self):
        return []


def test_close_raises_naming_the_sessions_whose_state_was_not_saved():
    repl = Repl(store=_FullDiskStore(), typecheck=False, checkpoint="async")
    assert repl.run("unsaved", "y = 1").ok
    with pytest.raises(dolsot.StoreError, match="unsaved: .*No space left on device"):
        repl.close()
    repl.close()  # reported once; still idempotent


def test_a_host_exiting_with_unsaved_state_says_so_on_stderr(tmp_path):
    script = tmp_path / "host.py"
    script.write_text(textwrap.dedent('''
        import dolsot
        class FullDisk:
            def load(self, sid): return None
            def save(self, sid, blob): raise OSError(28, "No space left on device")
            def delete(self, sid): return 0
            def list(self): return []
        repl = dolsot.Repl(store=FullDisk(), typecheck=False, checkpoint="async")
        assert repl.run("unsaved", "y = 1").ok
    '''))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == 0, done.stderr
    assert "dolsot: warning:" in done.stderr and "unsaved" in done.stderr, done.stderr


def test_a_session_file_that_is_a_symlink_is_a_store_error_naming_it(tmp_path):
    # Refused by FileStore (a checkpoint runs code when loaded); once reported
    # as "WorkerError: ... is a symlink" in a failed Result, exit 1.
    sessions = tmp_path / "sessions"
    store = FileStore(str(sessions))
    target = tmp_path / "elsewhere"
    target.write_bytes(b"DOLSOTNS")
    store.save("linked", b"x")  # the file a session gets, replaced below by a link
    session_file = next(p for p in sessions.iterdir() if "linked" in p.name)
    session_file.unlink()
    session_file.symlink_to(target)
    with Repl(store=store, typecheck=False) as repl:
        with pytest.raises(dolsot.StoreError, match=r"'linked'.*symlink") as raised:
            repl.run("linked", "1")
        assert str(session_file) in str(raised.value)
        assert repl.run("other", "1").value == "1", "other sessions are untouched"
    assert session_file.is_symlink() and target.read_bytes() == b"DOLSOTNS"


def test_a_toolbox_that_kills_the_worker_at_import_is_an_invalid_toolbox_naming_it(tmp_path,
                                                                                   monkeypatch):
    (tmp_path / "exits_at_import.py").write_text("import os\nos._exit(9)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with Repl({"bad": "exits_at_import"}, store=MemoryStore(), typecheck=False) as repl:
        with pytest.raises(dolsot.InvalidToolbox,
                           match=r"toolbox 'bad' \(module 'exits_at_import'\) did not import: "
                                 r".*exited with status 9"):
            repl.run("s", "1")


@pytest.mark.parametrize("snapshots", [True, False])
def test_checkpoint_writers_inherit_dill_instead_of_importing_it_each_time(snapshots):
    # Issue #22: once a session held a cell-defined function, every async
    # checkpoint writer imported dill again (~50 ms of CPU per cell). The
    # session process now imports it once, before forking its writer.
    with Repl(store=MemoryStore(), typecheck=False, snapshots=snapshots) as repl:
        assert repl.run("s", "import sys\n'dill' in sys.modules").value == "False"
        # A module as a default: the general path (a def alone is a binding
        # cell, embedded/read_only_cell.h, whose checkpoint waits).
        repl.run("s", "def f(x, _sys=sys):\n    return x + 1")
        repl.run("s", "1 + 1")
        assert repl.run("s", "'dill' in sys.modules").value == "True"


@pytest.mark.parametrize("snapshots", [True, False])
def test_quick_cells_then_a_crash_lose_none_of_the_cells_that_returned(snapshots):
    # #22: rollback off, async checkpoints, quick cells while a slow writer
    # ran, then a crash: the pending checkpoints died with the session
    # process, and the restore read the store before the running writer
    # landed. Now the newest writer is forked at once (waiting for the
    # running one), and a restore waits for what is still on its way.
    store = MemoryStore()
    with Repl(store=store, typecheck=False, snapshots=snapshots) as r:
        assert r.run("s", "ballast = [bytearray(1024) for _ in range(30 * 1024)]\nx = 0").ok
        for i in range(1, 4):
            assert r.run("s", f"x = {i}").ok
        crashed = r.run("s", "import os\nos._exit(3)")
        assert crashed.exit_code == 1 and "exited with status 3" in crashed.error
        assert r.run("s", "x").value == "3"
    with Repl(store=store, typecheck=False) as again:  # and the store has it too
        assert again.run("s", "x, len(ballast)").value == "(3, 30720)"


def test_sessions_lists_a_new_session_with_the_size_of_its_checkpoint():
    # #23 section 4: with async checkpoints the first one was still being
    # written when sessions() listed the session, as 0 bytes.
    with Repl(store=MemoryStore(), typecheck=False) as r:
        assert r.run("s", "blob = bytes(5 * 1024 * 1024)").ok
        (info,) = r.sessions()
        assert info.id == "s" and info.size_bytes >= 5 * 1024 * 1024


def test_async_dropped_names_what_the_cell_itself_could_not_persist():
    # #23 section 4: with async checkpoints (the default) `dropped` reported
    # the last checkpoint that had landed, so a cell creating a lock got [].
    with Repl(store=MemoryStore(), typecheck=False) as r:
        res = r.run("s", "import threading\nlock = threading.Lock()\nn = 1")
        assert res.ok and res.dropped == ["lock"]
        assert r.run("s", "n += 1").dropped == ["lock"]  # still held, still unsaveable
        assert r.run("s", "lock = 2").dropped == []
        res = r.run("s", "gen = (i for i in range(3))\nbig = list(range(200000))\nf = lambda: 1")
        assert res.dropped == ["gen"]
        assert r.run("s", "del gen").dropped == []


def test_read_only_cells_report_what_the_last_checkpoint_could_not_save():
    # A value that cannot be saved, put into an object in place: only the
    # checkpoint written after it knows. A read-only cell after it reports
    # the name while the session holds it, and not once it is deleted.
    class HeldBackStore(CountingStore):
        """Saves wait while `open` is clear."""

        def __init__(self):
            super().__init__()
            self.open = threading.Event()
            self.open.set()

        def save(self, sid, blob):
            self.open.wait()
            super().save(sid, blob)

    store = HeldBackStore()
    with Repl(store=store, typecheck=False) as r:
        assert r.run("s", "import threading\nbox = []\nn = 1").ok
        assert r.run("s", "box.append(threading.Lock())").ok
        for _ in range(2000):  # until that cell's checkpoint has landed
            res = r.run("s", "n + 1")
            assert res.ok and res.value == "2"
            if res.dropped:
                break
        assert res.dropped == ["box"]
        assert r.run("s", "n * 3").dropped == ["box"]
        # The checkpoint after the delete is held back: the last one that
        # landed still lists box, which the session no longer holds.
        store.open.clear()
        try:
            assert r.run("s", "del box").ok
            assert r.run("s", "n + 1").dropped == []
        finally:
            store.open.set()


def test_close_saves_the_last_state_after_a_slow_checkpoint_was_superseded():
    # A writer still serializing a big checkpoint when the next cell's
    # superseded it blocked on its full, unread channel; the next writer
    # waited for it, and close gave up after its patience (20 s) without the
    # last state.
    store = MemoryStore()
    with Repl(store=store, typecheck=False) as r:
        assert r.run("s", "x = 1").ok
        assert r.run("s", "big = list(range(200000))\nf = lambda: 1").ok
        assert r.run("s", "x = 2").ok
    with Repl(store=store, typecheck=False) as again:
        assert again.run("s", "x, len(big), f()").value == "(2, 200000, 1)"


# --- huge pages under the session's objects (#22) ------------------------------

def _thp_mode():
    try:
        text = open("/sys/kernel/mm/transparent_hugepage/enabled").read()
    except OSError:
        return None
    return text[text.index("[") + 1:text.index("]")]


BUILD_ROWS = "data = [{'k': i, 'v': str(i)} for i in range(300000)]"
ANON_HUGE_KIB = ("int(next(line.split()[1] for line in open('/proc/self/smaps_rollup') "
                 "if line.startswith('AnonHugePages:')))")


@pytest.mark.skipif(_thp_mode() not in ("madvise", "always"),
                    reason="transparent huge pages are off on this kernel")
def test_a_sessions_objects_sit_in_huge_pages_unless_turned_off(monkeypatch):
    # The runner forks its rollback snapshot after every cell: with the
    # session's arenas in huge pages that fork copies 512 times fewer
    # page-table entries (embedded/huge_page_arenas.h).
    with_huge = Repl(store=MemoryStore(), typecheck=False)
    try:
        assert with_huge.run("s", BUILD_ROWS).ok
        huge_kib = int(with_huge.run("s", ANON_HUGE_KIB).value)
    finally:
        with_huge.close()
    assert huge_kib >= 16 * 1024, huge_kib  # most of ~60 MB of dicts and strs
    monkeypatch.setenv("DOLSOT_HUGE_PAGES", "0")
    without = Repl(store=MemoryStore(), typecheck=False)
    try:
        assert without.run("s", BUILD_ROWS).ok
        plain_kib = int(without.run("s", ANON_HUGE_KIB).value)
    finally:
        without.close()
    assert plain_kib < huge_kib / 4, (plain_kib, huge_kib)


def test_rollback_is_exact_for_state_in_huge_page_arenas():
    # A killed cell that rewrote every row: the snapshot (a fork sharing the
    # huge pages copy-on-write) still holds the rows as they were.
    repl = Repl(store=MemoryStore(), typecheck=False)
    try:
        assert repl.run("s", BUILD_ROWS).ok
        killed = repl.run("s", "for d in data:\n    d['k'] = -1\n    d['v'] += 'x'\nwhile True:\n    pass",
                          timeout=3)
        assert killed.exit_code == 124, killed.error
        check = repl.run("s", "sum(d['k'] for d in data), sum(len(d['v']) for d in data)")
        assert check.ok, check.error
        assert check.value == repr((sum(range(300000)), sum(len(str(i)) for i in range(300000))))
        # And the session goes on from there.
        assert repl.run("s", "data.append({'k': 1, 'v': ''}); len(data)").value == "300001"
    finally:
        repl.close()
