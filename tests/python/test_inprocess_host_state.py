"""What an InProcessSession cell can leave on the interpreter (#38) is as it
was after the cell: sys's streams (a redirect kept entered through an
ExitStack), display and except hooks, the recursion limit, the switch
interval, trace and profile functions, threading's hooks; and a reset runs
the session's finalizers on a cell thread, under the session's timeout, not
on the host's thread. Each case runs in a child process that checks the
host's state after the cell."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(120)

PRELUDE = """
import sys, threading
from dolsot.inprocess import InProcessSession
from dolsot.sandbox import AstGate, Policy

def make(gated, **kw):
    return InProcessSession(gate=AstGate(Policy()), **kw) if gated else InProcessSession(**kw)

def run(s, sid, code):
    r = s.run(sid, code)
    assert r.ok, (code, r.error)
    return r
"""

SINK = """class Sink:
    def __init__(self):
        self.parts = []
    def write(self, text):
        self.parts.append(text)
        return len(text)
    def flush(self):
        pass
"""


SYS_CELL = 'import sys\nsys.displayhook = print\nsys.excepthook = print\nsys.unraisablehook = print\nsys.breakpointhook = print\nsys.__stdout__ = None\nsys.setrecursionlimit(50)\nsys.setswitchinterval(1.0)'
TRACE_CELL = 'import sys, threading\ndef tracer(*args):\n    return tracer\nsys.settrace(tracer)\nsys.setprofile(tracer)\nthreading.settrace(tracer)\nthreading.setprofile(tracer)\nthreading.excepthook = print'
FINALLY_RECORD_CELL = 'import threading\ndef g():\n    try:\n        yield 1\n    finally:\n        record.append(threading.get_ident())\nit = g()\nnext(it)'
FINALLY_LOOP_CELL = 'def g():\n    try:\n        yield 1\n    finally:\n        while True:\n            pass\nit = g()\nnext(it)'
FINALLY_LOOP_AGAIN = FINALLY_LOOP_CELL


def run_child(body: str) -> subprocess.CompletedProcess:
    code = PRELUDE + textwrap.dedent(body) + "\nprint('child ok', flush=True)\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "child ok" in done.stdout, done.stdout + done.stderr
    return done


@pytest.mark.parametrize("gated", [True, False])
def test_a_redirect_kept_entered_does_not_capture_the_host(gated):
    cell = SINK + textwrap.dedent("""
        import contextlib
        sink = Sink()
        stack = contextlib.ExitStack()
        stack.enter_context(contextlib.redirect_stdout(sink))
        stack.enter_context(contextlib.redirect_stderr(None))
        print('inside')
    """)
    done = run_child(f"""
        s = make({gated})
        out, err = sys.stdout, sys.stderr
        r = run(s, "a", {cell!r})
        assert sys.stdout is out and sys.stderr is err
        print("host line after the cell", flush=True)
        print("host error line after the cell", file=sys.stderr, flush=True)
        assert s.namespace("a")["sink"].parts == ["inside", "\\n"]
        # The session's next cell is captured as usual; another session too.
        assert run(s, "a", "print('next')").stdout == "next\\n"
        assert run(s, "b", "print('other')").stdout == "other\\n"
        # Closing the kept stack later puts back what it saw: the routing.
        run(s, "a", "stack.close()")
        assert sys.stdout is out and sys.stderr is err
        s.close()
    """)
    assert "host line after the cell" in done.stdout
    assert "host error line after the cell" in done.stderr


def test_sys_hooks_and_settings_are_put_back_in_ungated_sessions():
    run_child(f"""
        s = make(False)
        before = (sys.displayhook, sys.excepthook, sys.unraisablehook, sys.breakpointhook,
                  sys.__stdout__, sys.getrecursionlimit(), sys.getswitchinterval())
        run(s, "a", {SYS_CELL!r})
        after = (sys.displayhook, sys.excepthook, sys.unraisablehook, sys.breakpointhook,
                 sys.__stdout__, sys.getrecursionlimit(), sys.getswitchinterval())
        assert after == before, (after, before)
        assert all(a is b for a, b in zip(after[:5], before[:5]))
        # A host change between cells is kept.
        sys.setrecursionlimit(2000)
        run(s, "a", "sys.setrecursionlimit(60)")
        assert sys.getrecursionlimit() == 2000
        s.close()
    """)


def test_what_the_host_changes_between_cells_is_kept_and_becomes_the_baseline():
    # The baseline is re-read when sys's, threading's or decimal's dict
    # changed since the last cell: a host's own change between cells is not
    # undone by the next cell, and a cell's change is put back to it.
    run_child("""
        import decimal
        s = make(False)
        run(s, "a", "1")
        def host_hook(value):
            pass
        sys.displayhook = host_hook
        threading.excepthook = host_hook
        decimal.BasicContext = decimal.Context(prec=5)
        mine = decimal.BasicContext
        run(s, "a", "2")
        assert sys.displayhook is host_hook and threading.excepthook is host_hook
        assert decimal.BasicContext is mine and mine.prec == 5
        run(s, "a", "import sys, threading, decimal\\nsys.displayhook = print\\nthreading.excepthook = print\\ndecimal.BasicContext = decimal.Context()\\nx = 1")
        assert sys.displayhook is host_hook and threading.excepthook is host_hook
        assert decimal.BasicContext is mine and mine.prec == 5
        run(s, "a", "decimal.BasicContext.prec = 2")
        assert decimal.BasicContext is mine and mine.prec == 5
        s.close()
    """)


def test_a_leaked_cell_does_not_freeze_the_baseline():
    # A cell stuck in C past its deadline is a leaked thread, not a cell the
    # baseline waits for: the host's own change after it is kept by the next
    # cells (before, it was put back after every cell for the process's life).
    run_child("""
        s = make(False, timeout=0.5)
        r = s.run("stuck", "import time\\ntime.sleep(3600)")
        assert r.exit_code == 124 and s.leaked_threads == 1, r
        def host_hook(value):
            pass
        sys.displayhook = host_hook
        run(s, "a", "1")
        assert sys.displayhook is host_hook
        run(s, "a", "import sys\\nsys.displayhook = print")
        assert sys.displayhook is host_hook
        s.close()
        print("child ok", flush=True)
        import os
        os._exit(0)  # the stuck thread sleeps on
    """)


def test_trace_and_profile_functions_are_put_back():
    run_child(f"""
        s = make(False)
        run(s, "a", {TRACE_CELL!r})
        assert threading._trace_hook is None and threading._profile_hook is None
        assert threading.excepthook is threading.__excepthook__
        # The session's thread runs its next cell untraced.
        assert run(s, "a", "(sys.gettrace(), sys.getprofile())").value == "(None, None)"
        seen = []
        t = threading.Thread(target=lambda: seen.append((sys.gettrace(), sys.getprofile())))
        t.start(); t.join()
        assert seen == [(None, None)]
        s.close()
    """)


def test_reset_runs_the_sessions_finalizers_off_the_host_thread():
    run_child(f"""
        record = []
        s = make(False, inject={{"record": record}})
        run(s, "a", {FINALLY_RECORD_CELL!r})
        assert s.reset("a") == 1
        assert len(record) == 1 and record[0] != threading.get_ident(), record
        s.close()
    """)


def test_a_finalizer_that_never_ends_does_not_hold_reset_or_close():
    done = run_child(f"""
        s = make(False, timeout=0.5)
        run(s, "a", {FINALLY_LOOP_CELL!r})
        assert s.reset("a") == 1, "reset returned at the session's timeout"
        run(s, "a", {FINALLY_LOOP_AGAIN!r})
        s.close()
        print("closed", flush=True)
    """)
    assert "closed" in done.stdout


# A finalizer that swallows KeyboardInterrupt for 1.5 s, writing to the
# host's stderr all the while: still running Python when the host exits.
LATE_FINALIZER_CELL = '''import sys, time
def g():
    try:
        yield 1
    finally:
        end = time.monotonic() + 1.5
        while True:
            try:
                while True:
                    sys.stderr.write("")
            except KeyboardInterrupt:
                if time.monotonic() > end:
                    raise
it = g()
next(it)'''
# A cell that does the same past its deadline.
LATE_CELL = '''import sys, time
end = time.monotonic() + 1.5
while True:
    try:
        while True:
            sys.stderr.write("")
    except KeyboardInterrupt:
        if time.monotonic() > end:
            raise'''


@pytest.mark.parametrize("late", ["finalizer", "cell"])
def test_the_host_exits_cleanly_while_a_cell_thread_still_runs_python(late):
    # The exit hook interrupts the thread until it leaves Python, before the
    # interpreter finalizes: CPython ends a thread that takes the GIL during
    # finalization mid-call, unwinding C++ frames without the GIL (a SIGSEGV
    # in 3 of 8 runs before the hook).
    if late == "finalizer":
        body = f"""
            s = make(False, timeout=0.3)
            run(s, "a", {LATE_FINALIZER_CELL!r})
            assert s.reset("a") == 1
        """
    else:
        body = f"""
            s = make(False, timeout=0.3)
            r = s.run("a", {LATE_CELL!r})
            assert r.exit_code == 124 and s.leaked_threads == 1, r
        """
    for _ in range(4):
        done = run_child(body)
        assert "still running at exit" not in done.stderr, done.stderr
