"""dolsot installed the way its users install it (issue #18), each step a test:

1. ``pip install <clone>`` and the sdist (``python -m build --sdist``, then
   ``pip wheel <sdist>``) with pip's defaults (build isolation on); the sdist
   carries what its build needs and fetches nothing.
2. The wheel installed into a fresh venv in another directory once the clone
   and the sdist are gone (made, when the machine has one, from a different
   interpreter of the same version than the one that built it): Repl,
   InProcessSession, the CLI and the type gate work, and every process runs
   the venv's own interpreter (sys.version, sys.prefix in a CLI cell and a
   Python host's cells).
3. ``auditwheel show`` reports a manylinux tag; the CLI's worker is the
   package's console script run by the venv's python; no shipped binary
   carries a path of the build machine, a RUNPATH or a libpython.
5. ``pip install "<clone>[typecheck,dspy,smolagents,kernel]"`` resolves the extras to the pins.
6. Every other supported CPython minor version (3.10 to 3.13) that the machine
   has builds the same sdist into its own wheel, and that wheel runs Repl,
   InProcessSession and CLI cells in its venv's interpreter.
(4, the C++ install, is ctest's cpp_host_example: tests/cpp_host/.)

Slow (each build compiles the project): marked ``packaging`` (deselect with
``-m "not packaging"`` for a quick run); the clone, the sdist, the wheel and
each venv are made once per session and shared.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Building compiles the whole project: minutes on two cores.
pytestmark = [pytest.mark.packaging, pytest.mark.timeout(1800)]

TOOLBOX = textwrap.dedent('''
    def add(a: int, b: int) -> int:
        return a + b
''')
# Prints what the interpreter running the cell is; the same text in every cell.
WHO = "import sys; print(repr((sys.version, sys.prefix, sys.executable, sys.argv[0])))"


def run(args, *, cwd, env=None, timeout=1500):
    """Runs a command to completion; fails the test with its output if it fails."""
    proc = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                          text=True, stdin=subprocess.DEVNULL, timeout=timeout)
    assert proc.returncode == 0, f"{args} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    return proc


def clean_env(**extra):
    """This process's environment without any trace of the test run's own
    interpreter or build tree: no venv on PATH, no PYTHONPATH, no DOLSOT_CLI."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME") and not k.startswith("DOLSOT_")}
    own_bin = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep)
                                  if p and p != own_bin and ROOT.as_posix() not in p)
    env["DOLSOT_SERVE"] = "0"  # about installs: direct mode, no server left behind
    env.update(extra)
    return env


def base_python() -> str:
    return getattr(sys, "_base_executable", None) or sys.executable


def other_python() -> str:
    """An interpreter of this one's version but another installation (Debian's
    python3 beside a pyenv or uv one, say), when the machine has one: a wheel
    must run on the interpreter of the venv it is installed in. Else the base
    interpreter of this one."""
    mine = Path(base_python()).resolve()
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3"):
        path = Path(candidate)
        if not path.exists() or path.resolve() == mine:
            continue
        probe = subprocess.run(
            [candidate, "-c", "import sys, venv, ensurepip; print(sys.version_info[:2], sys.prefix)"],
            capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.startswith(str(sys.version_info[:2])) \
                and probe.stdout.split()[-1] != sys.base_prefix:
            return candidate
    return base_python()


def make_venv(path: Path, python: str) -> Path:
    run([python, "-m", "venv", path], cwd=path.parent)
    return path / "bin" / "python"


def who(text: str) -> tuple:
    line = next(line for line in text.splitlines() if line.startswith("("))
    return eval(line)  # noqa: S307: the repr() of a tuple of str this test printed


def venv_identity(python: Path) -> tuple[str, str]:
    out = run([python, "-c", "import sys; print(repr((sys.version, sys.prefix)))"], cwd=python.parent)
    return who(out.stdout)


# ------------------------------------------------------------------ fixtures --

@pytest.fixture(scope="session")
def packaging_root(tmp_path_factory):
    return tmp_path_factory.mktemp("packaging")


def copy_clone(destination: Path) -> Path:
    """What `git clone` of this checkout holds (tracked files, and new ones
    not ignored): no build trees, no .venv, no .deps."""
    listed = subprocess.run(["git", "-C", ROOT, "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if source.is_file():
            (destination / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / name)
    return destination


@pytest.fixture(scope="session")
def sdist_clone(packaging_root):
    return copy_clone(packaging_root / "sdist-clone")


@pytest.fixture(scope="session")
def sdist(sdist_clone, packaging_root):
    outdir = packaging_root / "dist"
    run([sys.executable, "-m", "build", "--sdist", "--outdir", outdir, sdist_clone],
        cwd=packaging_root, env=clean_env())
    (archive,) = outdir.glob("dolsot-*.tar.gz")
    # A copy elsewhere for the other Python versions' builds (wheel_venv
    # deletes the original to prove the installed wheel does not need it).
    kept = packaging_root / "sdist-kept"
    kept.mkdir()
    shutil.copy2(archive, kept / archive.name)
    return archive


@pytest.fixture(scope="session")
def kept_sdist(sdist, packaging_root):
    (archive,) = (packaging_root / "sdist-kept").glob("dolsot-*.tar.gz")
    return archive


@pytest.fixture(scope="session")
def wheel_build(sdist, packaging_root):
    """`pip wheel <sdist>` with pip's defaults: (the wheel, pip's verbose log)."""
    wheelhouse = packaging_root / "wheelhouse"
    # --no-cache-dir: never a wheel pip cached from an earlier run's sdist.
    proc = run([sys.executable, "-m", "pip", "wheel", "--no-cache-dir", "--no-deps", "-v",
                "-w", wheelhouse, sdist],
               cwd=packaging_root, env=clean_env())
    (wheel,) = wheelhouse.glob("dolsot-*.whl")
    return wheel, proc.stdout + proc.stderr


@pytest.fixture(scope="session")
def wheel(wheel_build):
    return wheel_build[0]


@pytest.fixture(scope="session")
def wheel_venv(wheel, sdist, sdist_clone, tmp_path_factory):
    """The wheel installed (with the typecheck extra) into a fresh venv in
    another directory, made by another interpreter where the machine has
    one, after the clone and the sdist are deleted."""
    shutil.rmtree(sdist_clone)
    sdist.unlink()
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    python = make_venv(elsewhere / "venv", other_python())
    run([python, "-m", "pip", "install", f"{wheel}[typecheck]"], cwd=elsewhere, env=clean_env())
    (elsewhere / "work").mkdir()
    (elsewhere / "work" / "mytools.py").write_text(TOOLBOX)
    return python


@pytest.fixture(scope="session")
def clone_venv(packaging_root):
    """`pip install <clone>` into a fresh venv, pip's defaults."""
    clone = copy_clone(packaging_root / "install-clone")
    python = make_venv(packaging_root / "clone-venv", base_python())
    run([python, "-m", "pip", "install", "--no-cache-dir", clone], cwd=packaging_root,
        env=clean_env())
    return python


# --------------------------------------------------------------------- sdist --

def pinned_sdists() -> dict[str, str]:
    """archive name -> sha256, from requirements/tree-sitter-sdists.txt."""
    pins = {}
    text = (ROOT / "requirements" / "tree-sitter-sdists.txt").read_text()
    for name, version, sha in re.findall(r"^([\w-]+)==(\S+) --hash=sha256:([0-9a-f]+)$", text, re.M):
        archive = "tree_sitter_python" if name == "tree-sitter-python" else name
        pins[f"{archive}-{version}.tar.gz"] = sha
    assert len(pins) == 2, text
    return pins


def test_the_sdist_carries_what_its_build_needs_and_no_build_output(sdist):
    import hashlib

    with tarfile.open(sdist) as tar:
        names = {m.name.split("/", 1)[1] for m in tar.getmembers() if "/" in m.name}
        for archive, sha in pinned_sdists().items():
            assert f".deps/{archive}" in names, sorted(names)
            data = tar.extractfile(f"{tar.getnames()[0].split('/')[0]}/.deps/{archive}").read()
            assert hashlib.sha256(data).hexdigest() == sha, archive
    for needed in ("pyproject.toml", "CMakeLists.txt", "requirements/build.txt",
                   "requirements/tree-sitter-sdists.txt", "cmake/TreeSitter.cmake",
                   "bindings/dolsot/_worker.py", "README.md"):
        assert needed in names, needed
    assert not [n for n in names if n.startswith(("build/", ".venv", ".git/"))]
    assert not [n for n in names if n.startswith(".deps/") and n.count("/") > 1]  # no extracted trees


def test_the_sdist_builds_a_wheel_without_fetching_anything(wheel_build):
    wheel, log = wheel_build
    assert wheel.name.startswith("dolsot-0.5.0-cp3")
    assert "Found pybind11" in log  # pip -v shows CMake's output: the check below can fail
    assert "dolsot: fetching" not in log


# --------------------------------------------------------------------- wheel --

def elf_files(wheel: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(wheel) as archive:
        return {name: archive.read(name) for name in archive.namelist()
                if archive.read(name)[:4] == b"\x7fELF"}


def test_the_wheel_ships_the_cli_the_module_and_the_worker_as_a_console_script(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        entry_points = next(archive.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    elves = elf_files(wheel)
    assert any(n.endswith("/scripts/dolsot") for n in elves), sorted(elves)
    assert any(re.search(r"dolsot/_dolsot\..*\.so$", n) for n in elves), sorted(elves)
    assert len(elves) == 2, sorted(elves)  # no dolsot-worker executable: it would link libpython
    assert re.search(r"^dolsot-worker = dolsot\._worker:main$", entry_points, re.M), entry_points


def test_no_shipped_binary_names_the_build_machine_or_links_libpython(wheel, sdist_clone):
    import io

    from elftools.elf.dynamic import DynamicSection  # pyelftools: auditwheel's dependency
    from elftools.elf.elffile import ELFFile

    machine_paths = [str(ROOT), str(sdist_clone), sys.prefix, sys.base_prefix, "/pip-", "/tmp/"]
    for name, data in elf_files(wheel).items():
        for path in machine_paths:
            assert path.encode() not in data, f"{name} carries {path}"
        elf = ELFFile(io.BytesIO(data))
        dynamic = next(s for s in elf.iter_sections() if isinstance(s, DynamicSection))
        for tag in dynamic.iter_tags():
            assert tag.entry.d_tag not in ("DT_RPATH", "DT_RUNPATH"), f"{name}: {tag.entry.d_tag}"
            if tag.entry.d_tag == "DT_NEEDED":
                assert not tag.needed.startswith("libpython"), f"{name} links {tag.needed}"


def test_auditwheel_reports_a_manylinux_tag(wheel, packaging_root):
    out = run([sys.executable, "-m", "auditwheel", "show", wheel], cwd=packaging_root)
    tags = re.findall(r"manylinux_\d+_\d+_\w+", out.stdout)
    assert tags, out.stdout
    assert "is consistent with the following platform tag" in " ".join(out.stdout.split())


def test_the_wheel_runs_repl_and_inprocess_cells_in_its_venvs_interpreter(wheel_venv):
    work = wheel_venv.parents[2] / "work"
    version, prefix = venv_identity(wheel_venv)
    assert prefix == str(wheel_venv.parents[1])
    host = textwrap.dedent(f'''
        import dolsot
        from dolsot.store import MemoryStore
        for backend in (dolsot.Repl(store=MemoryStore(), typecheck=False),
                        dolsot.InProcessSession(typecheck=False)):
            r = backend.run("s", {WHO!r})
            assert r.ok, r.error
            print(r.stdout.strip())
            backend.close()
    ''')
    out = run([wheel_venv, "-c", host], cwd=work, env=clean_env())
    cells = [who(line) for line in out.stdout.splitlines() if line.startswith("(")]
    assert len(cells) == 2, out.stdout
    for cell_version, cell_prefix, cell_executable, _ in cells:
        assert (cell_version, cell_prefix) == (version, prefix)
        assert cell_executable == str(wheel_venv)


def test_the_installed_cli_runs_cells_in_the_packages_worker_and_the_venvs_interpreter(wheel_venv):
    work = wheel_venv.parents[2] / "work"
    bindir = wheel_venv.parent
    version, prefix = venv_identity(wheel_venv)
    env = clean_env(DOLSOT_CACHE_DIR=str(work / "cache"), DOLSOT_TYPECHECK="0")
    out = run([bindir / "dolsot", "--session", "v", WHO], cwd=work, env=env)
    cell_version, cell_prefix, cell_executable, argv0 = who(out.stdout)
    assert (cell_version, cell_prefix) == (version, prefix)
    # The console script pip wrote, run by the venv's python it names.
    assert argv0 == str(bindir / "dolsot-worker")
    assert (bindir / "dolsot-worker").read_text().startswith(f"#!{cell_executable}\n")
    assert Path(cell_executable).parent == bindir
    # State persists across calls: the worker and its checkpoints work.
    run([bindir / "dolsot", "--session", "v", "x = 20"], cwd=work, env=env)
    assert run([bindir / "dolsot", "--session", "v", "x + 1"], cwd=work, env=env).stdout == "21\n"


def test_the_type_gate_works_from_the_wheel_without_an_activated_venv(wheel_venv):
    work = wheel_venv.parents[2] / "work"
    env = clean_env(DOLSOT_CACHE_DIR=str(work / "cache"), PYTHONPATH=str(work))
    # No ty on PATH: the one installed beside the venv's python must be found.
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                  if not shutil.which("ty", path=p))
    cli = subprocess.run([wheel_venv.parent / "dolsot", "--toolbox", "mytools:mt", "--session", "t",
                          "mt.add(1, 'x')"], cwd=work, env=env, capture_output=True, text=True,
                         timeout=300)
    assert cli.returncode == 1 and "type gate: line 1" in cli.stderr, cli.stderr
    host = textwrap.dedent('''
        import dolsot
        from dolsot.store import MemoryStore
        for backend in (dolsot.Repl({"mt": "mytools"}, store=MemoryStore()),
                        dolsot.InProcessSession({"mt": "mytools"})):
            r = backend.run("s", "print('ran')\\nmt.add(1, 'x')")
            print(type(backend).__name__, r.ok, "ran" in r.stdout, "type gate: line 2" in r.error)
            backend.close()
    ''')
    out = run([wheel_venv, "-c", host], cwd=work, env=env)
    assert out.stdout.split("\n")[:2] == ["Repl False False True", "InProcessSession False False True"]


# --------------------------------------------------------------------- clone --

def test_pip_install_of_a_clone_with_build_isolation_works(clone_venv, tmp_path):
    version, prefix = venv_identity(clone_venv)
    env = clean_env(DOLSOT_CACHE_DIR=str(tmp_path / "cache"), DOLSOT_TYPECHECK="0")
    out = run([clone_venv.parent / "dolsot", "--session", "v", WHO], cwd=tmp_path, env=env)
    assert who(out.stdout)[:2] == (version, prefix)
    host = "import dolsot; r = dolsot.Repl(typecheck=False).run('s', '6 * 7'); print(r.value)"
    assert run([clone_venv, "-c", host], cwd=tmp_path, env=env).stdout == "42\n"



def test_the_readme_quickstart_runs_as_pasted_after_pip_install_of_a_clone(clone_venv, tmp_path):
    # A new user's path (#41, Measures): a fresh venv, `pip install <clone>`,
    # then the README's quickstart pasted into that venv's python, in an
    # empty directory, showing what the README says it shows.
    from test_docs import read_blocks

    readme = read_blocks(ROOT / "README.md")
    text = (ROOT / "README.md").read_text().splitlines()
    heading = text.index("## Quickstart") + 1
    quickstart = next(b for b in readme if b.line > heading and b.kind == "python")
    assert not quickstart.placeholder and quickstart.expected_lines
    work = tmp_path / "work"  # the script beside what it writes, as `python` pasted into
    work.mkdir()
    (work / "quickstart.py").write_text(quickstart.body)
    env = clean_env(DOLSOT_CACHE_DIR=str(tmp_path / "cache"))
    proc = run([clone_venv, "quickstart.py"], cwd=work, env=env)
    printed = proc.stdout.splitlines()
    assert [line for line in quickstart.expected_lines if line not in printed] == [], proc.stdout


def extra_pins() -> dict[str, str]:
    """name -> version of every pin of the typecheck, dspy, smolagents and
    kernel extras (pyproject)."""
    text = (ROOT / "pyproject.toml").read_text()
    pins = {}
    for extra in ("typecheck", "dspy", "smolagents", "kernel"):
        line = re.search(rf"^{extra} = \[(.*)\]$", text, re.M).group(1)
        pins.update(re.findall(r'"([\w.-]+)==([^"]+)"', line))
    pins.update(re.findall(r'"([\w.-]+)==([^"]+)"', re.search(r"^dependencies = \[(.*)\]$", text, re.M).group(1)))
    return pins


def test_the_extras_resolve_to_their_pins(packaging_root):
    clone = copy_clone(packaging_root / "extras-clone")
    report = packaging_root / "extras-report.json"
    run([sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed", "--quiet",
         "--report", report, f"{clone}[typecheck,dspy,smolagents,kernel]"], cwd=packaging_root, env=clean_env())
    resolved = {item["metadata"]["name"].lower(): item["metadata"]["version"]
                for item in json.loads(report.read_text())["install"]}
    pins = extra_pins()
    assert {"ty", "dspy", "smolagents", "ipykernel", "dill"} <= set(pins), pins
    for name, version in pins.items():
        assert resolved.get(name.lower()) == version, (name, version, resolved.get(name.lower()))
    assert resolved["dolsot"] == "0.5.0"
    # The test environment installs the same pins (requirements/test.txt).
    test_pins = dict(re.findall(r"^([\w.-]+)==(\S+)$", (ROOT / "requirements" / "test.txt").read_text(), re.M))
    for name, version in pins.items():
        assert test_pins.get(name) == version, (name, version)


# ----------------------------------------------------- other Python versions --

SUPPORTED_MINORS = ["3.10", "3.11", "3.12", "3.13"]
OTHER_MINORS = [m for m in SUPPORTED_MINORS if m != "%d.%d" % sys.version_info[:2]]


def find_python(minor: str) -> str | None:
    """An interpreter of CPython `minor` with venv, ensurepip and its C
    headers (a build needs Python.h), or None: Debian's python3.X, a pyenv
    installation, or one on PATH."""
    candidates = [f"/usr/bin/python{minor}", f"/usr/local/bin/python{minor}"]
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates += sorted(str(p) for p in pyenv.glob(f"{minor}.*/bin/python{minor}"))
    on_path = shutil.which(f"python{minor}")
    if on_path and "/shims/" not in on_path:  # a pyenv shim may point at another version
        candidates.append(on_path)
    probe = ("import sys, sysconfig, os, venv, ensurepip; "
             "print('%d.%d' % sys.version_info[:2], "
             "os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h')))")
    for candidate in candidates:
        if not Path(candidate).exists():
            continue
        out = subprocess.run([candidate, "-c", probe], capture_output=True, text=True)
        if out.returncode == 0 and out.stdout.split() == [minor, "True"]:
            return candidate
    return None


@pytest.mark.parametrize("minor", OTHER_MINORS)
def test_each_supported_python_builds_the_sdist_and_runs_cells_in_its_venv(
        minor, kept_sdist, tmp_path_factory):
    python = find_python(minor)
    if python is None:
        pytest.skip(f"no CPython {minor} with venv and its headers on this machine "
                    f"(Debian: apt-get install python{minor}-dev python{minor}-venv)")
    root = tmp_path_factory.mktemp(f"py{minor}")
    venv_python = make_venv(root / "venv", python)
    # pip's defaults, as a user of that Python types it: an isolated build
    # environment with that Python's own build requirements.
    run([venv_python, "-m", "pip", "wheel", "--no-cache-dir", "--no-deps", "-w", root / "wheelhouse",
         kept_sdist], cwd=root, env=clean_env())
    (wheel_file,) = (root / "wheelhouse").glob("dolsot-*.whl")
    tag = "cp" + minor.replace(".", "")
    assert f"-{tag}-{tag}-" in wheel_file.name, wheel_file.name
    run([venv_python, "-m", "pip", "install", wheel_file], cwd=root, env=clean_env())

    work = root / "work"
    work.mkdir()
    (work / "mytools.py").write_text(TOOLBOX)
    env = clean_env(DOLSOT_CACHE_DIR=str(work / "cache"), DOLSOT_TYPECHECK="0",
                    PYTHONPATH=str(work))
    version, prefix = venv_identity(venv_python)
    assert version.startswith(minor + ".")
    host = textwrap.dedent(f'''
        import dolsot
        from dolsot.store import MemoryStore
        for backend in (dolsot.Repl({{"mt": "mytools"}}, store=MemoryStore()),
                        dolsot.InProcessSession({{"mt": "mytools"}})):
            assert backend.run("s", "x = mt.add(40, 2)").ok
            r = backend.run("s", {WHO!r} + "; print(x)")
            assert r.ok, r.error
            print(r.stdout.strip().replace("\\n", " "))
            backend.close()
    ''')
    out = run([venv_python, "-c", host], cwd=work, env=env)
    lines = [line for line in out.stdout.splitlines() if line.startswith("(")]
    assert len(lines) == 2, out.stdout
    for line in lines:
        cell, answer = line.rsplit(" ", 1)
        assert answer == "42", line
        assert who(cell)[:3] == (version, prefix, str(venv_python))

    cli = venv_python.parent / "dolsot"
    run([cli, "--toolbox", "mytools:mt", "--session", "v", "x = mt.add(20, 1)"], cwd=work, env=env)
    assert run([cli, "--session", "v", "x * 2"], cwd=work, env=env).stdout == "42\n"
    cell_version, cell_prefix, _, argv0 = who(run([cli, "--session", "v", WHO], cwd=work,
                                                  env=env).stdout)
    assert (cell_version, cell_prefix) == (version, prefix)
    assert argv0 == str(venv_python.parent / "dolsot-worker")
