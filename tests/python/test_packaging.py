"""The installed package: everything the engine needs ships in it (nothing
relies on the source tree), its type stubs accept the examples, and the
examples run on both backends with one call shape."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import dolsot

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = Path(dolsot.__file__).resolve().parent
TOOLBOX = ROOT / "examples" / "toolbox"


def installed() -> bool:
    return ROOT / "bindings" not in PACKAGE.parents


needs_install = pytest.mark.skipif(not installed(), reason="dolsot is imported from the source tree, not installed")


@needs_install
def test_package_carries_its_runtime_stubs_and_marker():
    names = {p.name for p in PACKAGE.iterdir()}
    assert "py.typed" in names and "_dolsot.pyi" in names
    assert any(n.startswith("_dolsot") and n.endswith(".so") for n in names)
    for module in ("repl", "inprocess", "sandbox", "store", "errors", "_worker", "_backend",
                   "redis_store", "ray", "ray_pool", "ray_channel",
                   "kernel", "_kernel_cell", "_kernel_spec"):
        assert f"{module}.py" in names
    assert "smolagents.py" in names  # the extra dolsot[smolagents]'s module ships too


@needs_install
def test_cli_and_worker_are_on_path_beside_the_interpreter():
    bindir = Path(sys.executable).parent
    assert (bindir / "dolsot").exists() and (bindir / "dolsot-worker").exists()
    out = subprocess.run([str(bindir / "dolsot"), "--version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and dolsot.__version__ in out.stdout


@needs_install
def test_installed_cli_runs_cells_in_the_interpreter_it_was_built_against(tmp_path):
    # The installed worker must load its own libpython, not the first one the
    # system's loader finds (a Debian libpython of another patch release).
    bindir = Path(sys.executable).parent
    env = dict(os.environ, DOLSOT_CACHE_DIR=str(tmp_path / "cache"), DOLSOT_TYPECHECK="0",
               DOLSOT_SERVE="0")  # about the install: direct mode, no server left behind
    out = subprocess.run([str(bindir / "dolsot"), "--session", "v", "import sys; print(sys.version)"],
                         capture_output=True, text=True, timeout=60, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == sys.version


def test_public_surface():
    for name in ("Repl", "InProcessSession", "Result", "SessionInfo", "DolsotError",
                 "InvalidSession", "InvalidToolbox", "Backend"):
        assert hasattr(dolsot, name), name
    assert hasattr(dolsot.store, "FileStore") and hasattr(dolsot.store, "MemoryStore")
    assert callable(dolsot.sandbox.check_ast)


@pytest.mark.parametrize("kind", ["repl", "inprocess"])
def test_python_host_example_runs_on_both_backends(kind, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(TOOLBOX), DOLSOT_CACHE_DIR=str(tmp_path / "cache"),
               DOLSOT_TYPECHECK="0")
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "python_host.py"), kind],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "exit=4" in out.stdout and "async value=5" in out.stdout


@needs_install
@pytest.mark.skipif(shutil.which("ty", path=str(Path(sys.executable).parent)) is None,
                    reason="ty (dolsot[typecheck]) is not installed")
def test_a_type_checker_accepts_the_examples():
    ty = shutil.which("ty", path=str(Path(sys.executable).parent))
    out = subprocess.run(
        [ty, "check", "--python", sys.prefix, "--extra-search-path", str(TOOLBOX),
         "--output-format", "concise", str(ROOT / "examples" / "python_host.py"),
         str(TOOLBOX / "mytools")],
        capture_output=True, text=True, timeout=120, cwd=ROOT / "examples")
    assert out.returncode == 0, out.stdout + out.stderr


@needs_install
@pytest.mark.skipif(shutil.which("ty", path=str(Path(sys.executable).parent)) is None,
                    reason="ty (dolsot[typecheck]) is not installed")
def test_the_type_checker_catches_a_misuse_through_the_stubs(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import dolsot\nr = dolsot.Repl()\nr.run(42, 'x')\nn: int = r.run('s', '1').value\n")
    ty = shutil.which("ty", path=str(Path(sys.executable).parent))
    out = subprocess.run([ty, "check", "--python", sys.prefix, "--output-format", "concise", str(bad)],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode != 0
    assert "bad.py:3" in out.stdout and "bad.py:4" in out.stdout, out.stdout
