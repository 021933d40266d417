"""What the tests read of the process tree, from /proc: a process's children,
all its descendants, and whether a pid still runs (a zombie does not); and a host killed with SIGKILL at a point it
names.

The kernel lists a child under the thread that started it: by default only
the main thread's children are read; every_thread=True reads every thread's
(a multi-threaded host such as `dolsot mcp` starts its worker from a
request's thread)."""

from __future__ import annotations

import os
import time
import signal
import subprocess
import sys


def children(pid: int, every_thread: bool = False) -> list[int]:
    tasks = [str(pid)]
    if every_thread:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except (FileNotFoundError, ProcessLookupError):
            return []
    out = []
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                out.extend(int(p) for p in f.read().split())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return out


def descendants(pid: int, every_thread: bool = False) -> list[int]:
    out, todo = [], children(pid, every_thread)
    while todo:
        child = todo.pop()
        out.append(child)
        todo.extend(children(child, every_thread))
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        # Gone before the open, or between the open and the read (ESRCH).
        return False


def started(pid: int) -> int:
    """When `pid` started, in clock ticks since boot (/proc's starttime):
    of two children of one process, the later one started no earlier."""
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def wait_until_gone(pid: int, seconds: float = 30.0) -> None:
    """Waits (on a pidfd, no polling loop) until `pid` has exited; fails after
    `seconds`. A pid already gone returns at once."""
    import select

    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(seconds * 1000):
            raise AssertionError(f"process {pid} still runs after {seconds} s")
    finally:
        os.close(fd)


def sigkill_once_it_says(script: str, line: str = "durable") -> None:
    """Runs `script` in a new Python process, waits until it prints `line`,
    and kills it with SIGKILL (no close, no flush), reaped. The script keeps
    running (reading its stdin, say) after it prints."""
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == line
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)


def open_fds() -> set[int]:
    """This process's open fds, without the listing's own (closed again by
    the time it is read)."""
    fds = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue
        fds.add(int(name))
    return fds


def open_fds_left_over(before: set[int]) -> dict[int, str]:
    """Fds open now that were not in `before`, waited for (bounded) to close:
    another component's fd that is only passing through (a thread of an
    earlier test's) closes again; a leak stays. fd -> what it is."""
    deadline = time.monotonic() + 10
    while True:
        extra = {}
        for fd in open_fds() - before:
            try:
                extra[fd] = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                pass
        if not extra or time.monotonic() > deadline:
            return extra
        time.sleep(0.05)
