"""A Repl cell's own tool pipes (backend_subprocess/tool_pipes.h) against a
cell that read the code: it finds the pipes' ends in its own process and
writes garbage, half a frame, calls whose replies it never reads, closes or
dup2's over them, writes after its cell ended, or calls from many threads
with frames larger than PIPE_BUF. Each ends as a clear error in the cell (or
the cell completing), never a hung host; the backend keeps serving tools,
and closing it leaves no serving thread and no descriptor behind."""

from __future__ import annotations

import os
import threading
import time

import pytest
from process_tree import open_fds, open_fds_left_over

import dolsot
from dolsot.store import MemoryStore

# Defines, in the cell, the tool pipes' ends the channel opened on its first
# call: CALLS (the call pipe's write end) and REPLIES (the reply pipe's read end).
FIND_PIPES = """
import fcntl, os, stat, struct, time
def _pipes():
    found = {}
    for name in os.listdir('/proc/self/fd'):
        try:
            fd = int(name)
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                found[fd] = fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE
        except OSError:
            pass
    return found
_before = _pipes()
assert one() == 1
_new = {fd: mode for fd, mode in _pipes().items() if fd not in _before}
CALLS = [fd for fd, mode in _new.items() if mode == os.O_WRONLY]
REPLIES = [fd for fd, mode in _new.items() if mode == os.O_RDONLY]
assert len(CALLS) == 1 and len(REPLIES) == 1, _new
CALLS, REPLIES = CALLS[0], REPLIES[0]
def frame(tag, payload):
    return struct.pack('<II', tag, len(payload)) + payload
def try_one():
    try:
        one()
        return 'answered'
    except ConnectionError as error:
        return 'ConnectionError: ' + str(error)
def call_frame(call_id, name, arguments):
    name = name.encode()
    return frame(28, struct.pack('<Q', call_id) + struct.pack('<I', len(name)) + name
                 + struct.pack('<I', len(arguments)) + arguments + struct.pack('<Q', 0))
"""

NO_ARGUMENTS = "b'\\x80\\x05)}\\x86.'"


def server_threads(earlier):
    return [t for t in threading.enumerate()
            if t.name.startswith("dolsot-tool-pipes") and t not in earlier]


@pytest.fixture
def repl():
    earlier = set(threading.enumerate())
    fds = open_fds()
    servers = []
    big = "x" * (1 << 20)
    with dolsot.Repl(store=MemoryStore(), typecheck=False,
                     tools={"one": lambda: 1, "big": lambda: big,
                            "echo": lambda value: value}) as b:
        yield b
        servers = server_threads(earlier)
        assert servers  # the cells' calls went over their own pipes
    for thread in servers:
        thread.join(30)
        assert not thread.is_alive(), thread.name  # none left waiting on a cell's pipes
    # No pipe end nor stop eventfd of the host's outlives the Repl.
    assert open_fds_left_over(fds) == {}


def run_ok(b, code, session="s"):
    """The cell's value: it must complete."""
    r = b.run(session, code, timeout=60)
    assert r.ok, r.error
    return r.value


def still_serves(b, session="s"):
    r = b.run(session, "one() + one()")
    assert r.ok, r.error
    assert r.value == "2"


def test_garbage_on_the_call_pipe_fails_the_call_clearly_and_later_calls_still_work(repl):
    code = FIND_PIPES + (
        "os.write(CALLS, b'garbage, not a frame: ' * 10)\n"
        "try_one(), one()\n"
    )
    outcome, later = eval(run_ok(repl, code))
    # The host read the garbage and stopped serving these pipes: a call
    # waiting there fails naming them, one sent after goes on the runner's
    # socket (which of the two the cell meets is a race), as later ones do.
    assert outcome == "answered" or "tool pipes" in outcome, outcome
    assert later == 1
    still_serves(repl)


def test_half_a_frame_left_behind_with_a_writer_kept_open_holds_nothing(repl):
    # The cell keeps a copy of the call pipe's write end past its end, so the
    # host sees no end of file: only the stop at the cell's end frees it.
    code = FIND_PIPES + (
        "KEPT = os.dup(CALLS)\n"
        "os.write(CALLS, call_frame(7, 'one', b'\\x80\\x05' + b'.' * 500)[:100])\n"
        "'left'\n"
    )
    for _ in range(3):
        assert run_ok(repl, code) == "'left'"
    still_serves(repl)


def test_a_huge_claimed_length_is_refused(repl):
    code = FIND_PIPES + (
        "os.write(CALLS, struct.pack('<II', 28, 0xfffffff0))\n"
        "try_one()\n"
    )
    value = run_ok(repl, code)
    assert value == "'answered'" or "tool pipes" in value, value
    still_serves(repl)


def test_calls_whose_replies_are_never_read_hold_the_host_only_until_the_cell_ends(repl):
    # Raw calls of a tool whose reply (1 MiB) is far over a pipe's room, and
    # the cell never reads the reply pipe: the host's write waits, and the
    # cell's end stops it.
    code = FIND_PIPES + (
        f"for i in range(4): os.write(CALLS, call_frame(100 + i, 'big', {NO_ARGUMENTS}))\n"
        "'sent'\n"
    )
    assert run_ok(repl, code) == "'sent'"
    still_serves(repl)


def test_a_cell_that_never_reads_its_replies_times_out_and_the_host_is_free(repl):
    # The same, but the cell then waits: its own timeout ends it.
    code = FIND_PIPES + (
        f"for i in range(4): os.write(CALLS, call_frame(100 + i, 'big', {NO_ARGUMENTS}))\n"
        "threading_event = __import__('threading').Event()\n"
        "threading_event.wait()\n"
    )
    r = repl.run("t", code, timeout=3)
    assert not r.ok
    assert r.error_type == "TimeoutError"
    still_serves(repl, "t")


@pytest.mark.parametrize("how", ["close", "dup2"])
def test_closing_or_replacing_the_pipes_is_survived_or_fails_the_call_clearly(repl, how):
    replace = ("os.close(CALLS); os.close(REPLIES)\n" if how == "close" else
               "_null = os.open(os.devnull, os.O_RDWR)\n"
               "os.dup2(_null, CALLS); os.dup2(_null, REPLIES); os.close(_null)\n")
    code = FIND_PIPES + replace + "try_one()\n"
    value = run_ok(repl, code)
    if how == "close":
        # Nothing can be written there: the call takes the runner's socket.
        assert value == "'answered'"
    else:
        # Written into /dev/null, and /dev/null answers end of file.
        assert eval(value) == ("ConnectionError: tool one(): the host stopped serving the "
                                 "cell's tool pipes")
    still_serves(repl)


def test_writing_on_the_pipes_after_the_cell_ended_reaches_nobody(repl):
    assert run_ok(repl, FIND_PIPES + "KEPT = os.dup(CALLS)\n'kept'") == "'kept'"
    # The host stopped serving them when that cell ended: nobody reads there.
    code = (
        f"try:\n"
        f"    os.write(KEPT, call_frame(1, 'one', {NO_ARGUMENTS}))\n"
        f"    outcome = 'written'\n"
        f"except BrokenPipeError:\n"
        f"    outcome = 'broken'\n"
        f"outcome, one()\n"
    )
    assert run_ok(repl, code) == "('broken', 1)"


def test_frames_over_pipe_buf_from_many_threads_never_interleave(repl):
    # Every frame is written under the channel's lock: 8 threads sending
    # 100 KB each (a pipe writes at most 4096 bytes atomically) all get
    # their own value back.
    code = (
        "import threading\n"
        "bad = []\n"
        "def work(i):\n"
        "    for j in range(10):\n"
        "        value = (str(i) * 100_000, j)\n"
        "        if echo(value) != value:\n"
        "            bad.append((i, j))\n"
        "ts = [threading.Thread(target=work, args=(i,)) for i in range(8)]\n"
        "[t.start() for t in ts]; [t.join() for t in ts]\n"
        "len(bad)"
    )
    r = repl.run("s", code, timeout=120)
    assert r.ok, r.error
    assert r.value == "0"
