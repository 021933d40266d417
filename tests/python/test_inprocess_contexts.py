"""A contextvars.Context per InProcessSession session (#38): what a cell sets
in a ContextVar (decimal's context, a toolbox's variable) stays with its
session, and decimal.DefaultContext is as it was after every cell. Each case
runs in a child process that checks the host's and another session's state."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(120)

PRELUDE = """
import contextvars, sys, threading, types
from dolsot.inprocess import InProcessSession
from dolsot.sandbox import AstGate, Policy

def make(gated, **kw):
    return InProcessSession(gate=AstGate(Policy()), **kw) if gated else InProcessSession(**kw)

def run(s, sid, code):
    r = s.run(sid, code)
    assert r.ok, (code, r.error)
    return r.value

def in_new_thread(fn):
    out = []
    t = threading.Thread(target=lambda: out.append(fn()))
    t.start(); t.join()
    return out[0]
"""


def run_child(body: str) -> None:
    code = PRELUDE + textwrap.dedent(body) + "\nprint('child ok')\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "child ok" in done.stdout, done.stdout + done.stderr


@pytest.mark.parametrize("gated", [True, False])
def test_decimal_precision_stays_in_its_session(gated):
    run_child(f"""
        import decimal
        s = make({gated})
        assert run(s, "a", "import decimal\\nc = decimal.getcontext()\\nc.prec = 3\\ndecimal.Decimal(2) / decimal.Decimal(3)") == "Decimal('0.667')"
        # The session's next cell keeps its own setting.
        assert run(s, "a", "decimal.getcontext().prec") == "3"
        # Another session, the host's thread and a new host thread do not see it.
        assert run(s, "b", "import decimal\\ndecimal.Decimal(2) / decimal.Decimal(3)") == "Decimal('0.6666666666666666666666666667')"
        assert decimal.getcontext().prec == 28
        assert in_new_thread(lambda: decimal.getcontext().prec) == 28
        # The host's own setting does not reach a session either.
        decimal.getcontext().prec = 5
        assert run(s, "c", "import decimal\\ndecimal.getcontext().prec") == "28"
        s.close()
    """)


@pytest.mark.parametrize("gated", [True, False])
def test_a_toolbox_contextvar_stays_in_its_session(gated, tmp_path):
    (tmp_path / "ctxtool.py").write_text(textwrap.dedent("""
        import contextvars
        user = contextvars.ContextVar("user", default="nobody")
        def login(name):
            user.set(name)
        def whoami():
            return user.get()
    """))
    run_child(f"""
        sys.path.insert(0, {str(tmp_path)!r})
        import ctxtool
        s = make({gated}, inject={{"tb": "ctxtool"}})
        run(s, "a", "tb.login('mallory')")
        assert run(s, "a", "tb.whoami()") == "'mallory'"
        assert run(s, "b", "tb.whoami()") == "'nobody'"
        assert ctxtool.whoami() == "nobody"
        assert in_new_thread(ctxtool.whoami) == "nobody"
        s.reset("a")
        assert run(s, "a", "tb.whoami()") == "'nobody'", "reset forgets the context"
        s.close()
    """)


@pytest.mark.parametrize("gated", [True, False])
def test_decimal_default_context_is_put_back_after_the_cell(gated):
    run_child(f"""
        import decimal
        s = make({gated})
        cell = ("import decimal\\nD = decimal.DefaultContext\\nD.prec = 3\\n"
                "D.traps[decimal.Inexact] = True\\nD.flags[decimal.Rounded] = True\\nD.Emax = 10\\n"
                "B = decimal.BasicContext\\nB.prec = 2\\nE = decimal.ExtendedContext\\n"
                "E.traps[decimal.DivisionByZero] = True\\nD.prec")
        assert run(s, "a", cell) == "3"
        D = decimal.DefaultContext
        assert (D.prec, D.Emax, D.traps[decimal.Inexact], D.flags[decimal.Rounded]) == (28, 999999, False, False)
        assert decimal.BasicContext.prec == 9
        assert decimal.ExtendedContext.traps[decimal.DivisionByZero] is False
        assert in_new_thread(lambda: decimal.getcontext().prec) == 28
        assert run(s, "b", "import decimal\\ndecimal.getcontext().prec") == "28"
        # Now decimal was imported before the cell: the state before is kept.
        D.prec = 40
        assert run(s, "a", "D.prec = 4\\nD.clamp = 1\\nD.prec") == "4"
        assert (D.prec, D.clamp) == (40, 0)
        assert run(s, "c", "import decimal\\ndecimal.getcontext().prec") == "40"
        s.close()
    """)


def test_a_session_cannot_make_another_sessions_end_keep_its_change():
    # Session a changes DefaultContext; session b's cell starts while a's
    # runs and ends after it: b's end must not put back a's change as "the
    # state before b". Ordered with events, no sleeps.
    run_child("""
        import decimal
        events = {name: threading.Event() for name in ("a_changed", "b_started", "a_done")}
        s = make(False, inject=events)
        results = {}
        def cell_a():
            results["a"] = s.run("a", "import decimal\\ndecimal.DefaultContext.prec = 3\\na_changed.set()\\nb_started.wait(30)")
        def cell_b():
            assert events["a_changed"].wait(30)
            results["b"] = s.run("b", "b_started.set()\\na_done.wait(30)")
        threads = [threading.Thread(target=cell_a), threading.Thread(target=cell_b)]
        for t in threads: t.start()
        threads[0].join()
        assert decimal.DefaultContext.prec == 28, "a's end put it back"
        events["a_done"].set()
        threads[1].join()
        assert results["a"].ok and results["b"].ok, results
        assert decimal.DefaultContext.prec == 28, "b's end kept it"
        s.close()
    """)


@pytest.mark.parametrize("gated", [True, False])
def test_decimal_templates_are_reset_when_a_cell_imports_decimal_first(gated):
    run_child(f"""
        assert "decimal" not in sys.modules
        s = make({gated})
        run(s, "a", "import decimal\\nD = decimal.DefaultContext\\nD.prec = 3\\nE = decimal.ExtendedContext\\nE.prec = 2")
        import decimal
        assert (decimal.DefaultContext.prec, decimal.ExtendedContext.prec, decimal.BasicContext.prec) == (28, 9, 9)
        assert repr(decimal.DefaultContext) == repr(decimal.Context(prec=28, rounding=decimal.ROUND_HALF_EVEN, Emin=-999999, Emax=999999, capitals=1, clamp=0, flags=[], traps=[decimal.InvalidOperation, decimal.DivisionByZero, decimal.Overflow]))
        assert in_new_thread(lambda: decimal.getcontext().prec) == 28
        s.close()
    """)
