"""The toolbox contract through both backends, with examples/toolbox/mytools:
toolbox exit codes, wrong-argument hints, and the ty type gate (with ty, and
failing open without it).

Run: PYTHONPATH=<builddir>/python pytest tests/python/test_toolbox.py
(examples/toolbox is added to sys.path and PYTHONPATH here; DOLSOT_TY_BIN or
`ty` on PATH enables the with-ty tests: pip install "ty==0.0.104"; the backends
get the binary through DOLSOT_TY_BIN).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

import dolsot

TOOLBOX_DIR = str(Path(__file__).resolve().parents[2] / "examples" / "toolbox")
if TOOLBOX_DIR not in sys.path:
    sys.path.insert(0, TOOLBOX_DIR)
# A Repl worker that starts a fresh interpreter finds the toolbox this way.
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (TOOLBOX_DIR, os.environ.get("PYTHONPATH", "")) if p
)

import mytools  # noqa: E402

BACKENDS = ["Repl", "InProcessSession"]


def find_ty() -> str | None:
    """The ty binary the with-ty tests use, or None."""
    named = os.environ.get("DOLSOT_TY_BIN")
    if named:
        return named if os.access(named, os.X_OK) else None
    return shutil.which("ty")


TY = find_ty()
needs_ty = pytest.mark.skipif(
    TY is None, reason='ty is not installed: pip install "ty==0.0.104" or set DOLSOT_TY_BIN'
)


@pytest.fixture(params=BACKENDS)
def make(request, tmp_path, monkeypatch):
    """Builds the parametrized backend with mytools injected as `mt`."""
    name = request.param
    monkeypatch.setenv("DOLSOT_CACHE_DIR", str(tmp_path / "sessions"))
    monkeypatch.delenv("DOLSOT_TYPECHECK", raising=False)
    # The binary comes through DOLSOT_TY_BIN, which both backends honour.
    monkeypatch.setenv("DOLSOT_TY_BIN", TY or "/nonexistent/dir/ty")
    made = []

    def build(**kwargs):
        kwargs.setdefault("inject", {"mt": mytools})
        backend = getattr(dolsot, name)(**kwargs)
        made.append(backend)
        return backend

    yield build
    for backend in made:
        backend.close()


# ------------------------------------------------------------- exit codes ----

def test_toolbox_exception_sets_its_exit_code(make):
    session = make(typecheck=False)
    r = session.run("t1", "mt.load('nope')")
    assert not r.ok
    assert r.exit_code == 4
    assert "NotFound" in r.error and "known tables: customers, orders" in r.error
    r = session.run("t1", "mt.top(mt.load('orders'), -1)")
    assert (r.ok, r.exit_code) == (False, 3)
    assert "ToolError" in r.error


def test_other_exceptions_exit_1_and_success_exits_0(make):
    session = make(typecheck=False)
    assert session.run("t1", "1 / 0").exit_code == 1
    r = session.run("t1", "mt.add(1, 2)")
    assert (r.ok, r.value, r.exit_code) == (True, "3", 0)


# ------------------------------------------------------------------ hints ----

def test_wrong_argument_count_points_at_signature_and_help(make):
    session = make(typecheck=False)
    r = session.run("t1", "mt.add(1)")
    assert not r.ok and r.exit_code == 1
    assert "missing 1 required positional argument: 'b'" in r.error
    assert 'hint: mt.add(a: int, b: int) -> int; see mt.help("add")' in r.error


def test_unexpected_keyword_gets_the_hint_and_help_works(make):
    session = make(typecheck=False)
    r = session.run("t1", "mt.load(table='orders')")
    assert 'hint: mt.load(name: str)' in r.error
    r = session.run("t1", "print(mt.help('load'))")
    assert r.ok and "load(name: str)" in r.stdout


def test_errors_that_are_not_toolbox_calls_get_no_hint(make):
    session = make(typecheck=False)
    r = session.run("t1", "def own(a):\n    return a\nown()")
    assert not r.ok and "hint:" not in r.error


# -------------------------------------------------------------- type gate ----

@needs_ty
def test_type_gate_rejects_a_wrong_argument_type_before_running(make):
    session = make()
    r = session.run("t1", "print('ran')\nx = mt.add(1, '2')")
    assert not r.ok and r.exit_code == 1
    assert "type gate: line 2, col 15:" in r.error
    assert "invalid-argument-type" in r.error
    assert "ran" not in r.stdout  # the cell did not run
    assert "x" not in r.held


@needs_ty
def test_type_gate_rejects_wrong_counts_and_unknown_attributes(make):
    session = make()
    assert "missing-argument" in session.run("t1", "mt.add(1)").error
    assert "too-many-positional-arguments" in session.run("t1", "mt.add(1, 2, 3)").error
    assert "missing-attribute" in session.run("t1", "mt.nosuch()").error


@needs_ty
def test_names_from_earlier_cells_cause_no_false_rejection(make):
    session = make()
    assert session.run("t1", "rows = mt.load('orders')\nn = 2").ok
    r = session.run("t1", "[row['id'] for row in mt.top(rows, n)]")
    assert r.ok, r.error
    assert r.value == "[3, 4]"


@needs_ty
def test_typecheck_off_lets_the_cell_run(make):
    session = make(typecheck=False)
    r = session.run("t1", "print('ran')\nmt.add(1, '2')")
    assert "ran" in r.stdout
    assert "type gate" not in r.error


@needs_ty
def test_dolsot_typecheck_0_turns_the_gate_off(make, monkeypatch):
    monkeypatch.setenv("DOLSOT_TYPECHECK", "0")
    session = make()
    r = session.run("t1", "print('ran')\nmt.add(1, '2')")
    assert "ran" in r.stdout and "type gate" not in r.error


def test_missing_ty_fails_open(make, monkeypatch):
    monkeypatch.setenv("DOLSOT_TY_BIN", "/nonexistent/dir/ty")
    session = make()
    r = session.run("t1", "print('ran')\nmt.add(1, '2')")
    assert "ran" in r.stdout  # the gate was a no-op; the runtime TypeError stands
    assert not r.ok and "type gate" not in r.error
