"""End-to-end tests of what the CLI skips or overlaps to start fast (issue 6).

Each behaviour the start-up work changed, checked as a host sees it: a killed
cell in a just-restored session still reports what the session holds (no
snapshot is forked per call); the type gate does not start ty for a cell
that cannot reach a toolbox, and finds toolboxes where the worker does (the
cwd, PYTHONPATH); nothing the cell started outlives the call.
"""
from __future__ import annotations

import os
import pathlib
import shutil
import time

import pytest

from process_tree import alive
from test_cli import CLI, Dolsot, _cli_is_built, err, out  # noqa: F401 (autouse)

pytestmark = [
    pytest.mark.timeout(120),
]


@pytest.fixture(params=["direct", "serve"])
def dolsot(tmp_path, request):
    helper = Dolsot(tmp_path, serve=request.param == "serve")
    yield helper
    helper.stop_servers()


def _ty() -> str | None:
    configured = os.environ.get("DOLSOT_TY_BIN")
    if configured:
        return configured if os.access(configured, os.X_OK) else None
    return shutil.which("ty")


@pytest.mark.parametrize("code, how", [
    ("kept = 2\nwhile True: pass", "TimeoutError"),
    ("kept = 2\nimport os\nos._exit(3)", "WorkerError"),
])
def test_a_killed_cell_says_what_the_restored_session_still_holds(dolsot, code, how):
    assert dolsot("--session", "s", "kept = 1").returncode == 0
    proc = dolsot("--session", "s", "--timeout", "1", code)
    assert proc.returncode in (1, 124), err(proc)
    assert how in err(proc)
    assert "rolled back to its state before this cell" in err(proc)
    assert "session now holds: kept" in err(proc)
    proc = dolsot("--session", "s", "kept")
    assert (proc.returncode, out(proc)) == (0, "1\n"), err(proc)


def test_a_killed_first_cell_of_a_new_session_holds_nothing(dolsot):
    proc = dolsot("--session", "new", "--timeout", "1", "--json", "x = 1\nwhile True: pass")
    assert proc.returncode == 124, err(proc)
    assert '"held":[]' in out(proc).replace(" ", "")


@pytest.fixture
def fake_ty(tmp_path):
    """A `ty` that leaves a marker when started, then fails (the gate fails open)."""
    marker = tmp_path / "ty-started"
    script = tmp_path / "fake-ty"
    script.write_text(f"#!/bin/sh\necho started >> {marker}\nexit 3\n")
    script.chmod(0o755)
    return script, marker


@pytest.mark.parametrize("code, expected", [("1+1", "2\n"), ("x = 3\nx * mtx if False else x", "3\n")])
def test_the_gate_does_not_start_ty_for_a_cell_that_cannot_reach_a_toolbox(dolsot, fake_ty,
                                                                           code, expected):
    script, marker = fake_ty
    env = {"DOLSOT_TYPECHECK": "1", "DOLSOT_TY_BIN": str(script)}
    proc = dolsot("--toolbox", "mytools:mt", "--session", "s", code, env=env)
    assert (proc.returncode, out(proc)) == (0, expected), err(proc)
    assert not marker.exists()


@pytest.mark.parametrize("code", ["mt.add(1, 2)", "import mytools\nmytools.add(1, 2)"])
def test_the_gate_starts_ty_for_a_cell_that_reaches_a_toolbox(dolsot, fake_ty, code):
    script, marker = fake_ty
    env = {"DOLSOT_TYPECHECK": "1", "DOLSOT_TY_BIN": str(script)}
    proc = dolsot("--toolbox", "mytools:mt", "--session", "s", code, env=env)
    assert (proc.returncode, out(proc)) == (0, "3\n"), err(proc)  # ty failed: the gate failed open
    assert marker.exists()


@pytest.mark.skipif(_ty() is None, reason="ty is not installed (pip install ty==0.0.104)")
def test_the_gate_finds_a_toolbox_in_the_working_directory(dolsot):
    env = {"DOLSOT_TYPECHECK": "1"}
    assert dolsot("--toolbox", "mytools:mt", "--session", "s", "y = 1", env=env).returncode == 0
    proc = dolsot("--toolbox", "mytools:mt", "--session", "s", "y = 2\nmt.add(1, 'x')", env=env)
    assert proc.returncode == 1, err(proc)
    assert "type gate: line 2" in err(proc), err(proc)
    assert "session now holds: y" in err(proc)
    proc = dolsot("--toolbox", "mytools:mt", "--session", "s", "y", env=env)
    assert (proc.returncode, out(proc)) == (0, "1\n"), err(proc)


@pytest.mark.skipif(_ty() is None, reason="ty is not installed (pip install ty==0.0.104)")
def test_the_gate_finds_a_toolbox_on_pythonpath(dolsot, tmp_path):
    elsewhere = tmp_path / "lib"
    elsewhere.mkdir()
    (elsewhere / "farlib.py").write_text("def twice(n: int) -> int:\n    return 2 * n\n")
    env = {"DOLSOT_TYPECHECK": "1", "PYTHONPATH": str(elsewhere)}
    proc = dolsot("--toolbox", "farlib:fl", "--session", "s", "fl.twice('x')", env=env)
    assert proc.returncode == 1, err(proc)
    assert "type gate: line 1" in err(proc), err(proc)
    proc = dolsot("--toolbox", "farlib:fl", "--session", "s", "fl.twice(4)", env=env)
    assert (proc.returncode, out(proc)) == (0, "8\n"), err(proc)


def test_nothing_a_cell_started_outlives_the_call(dolsot, tmp_path):
    pid_file = tmp_path / "pids"
    code = ("import subprocess\n"
            "procs = [subprocess.Popen(['sleep', '60'], start_new_session=True),\n"
            "         subprocess.Popen(['sleep', '60'])]\n"
            f"open({str(pid_file)!r}, 'w').write(' '.join(str(p.pid) for p in procs))\n")
    proc = dolsot("--session", "s", code)
    assert proc.returncode == 0, err(proc)
    pids = [int(p) for p in pid_file.read_text().split()]
    assert len(pids) == 2
    if dolsot.serve:
        # Live with the session between calls; gone (reaped) with the server.
        assert all(alive(pid) for pid in pids)
        dolsot.stop_servers()
        deadline = time.monotonic() + 10
        while any(pathlib.Path(f"/proc/{pid}").exists() for pid in pids):
            assert time.monotonic() < deadline, pids
            time.sleep(0.02)
        return
    for pid in pids:
        # Killed and reaped before the CLI exited: no process, not even a zombie.
        assert not pathlib.Path(f"/proc/{pid}").exists(), pid


def test_functools_is_whole_after_a_restore(dolsot):
    # The worker loads _pickle with a stand-in functools that it takes back.
    assert dolsot("--session", "s", "x = [1]").returncode == 0
    proc = dolsot("--session", "s", "import functools, sys\n"
                  "(functools.reduce(lambda a, b: a + b, x + [2]), functools.partial(max, 0)(5),\n"
                  " sys.modules['functools'] is functools, hasattr(functools, 'lru_cache'))")
    assert (proc.returncode, out(proc)) == (0, "(3, 5, True, True)\n"), err(proc)
