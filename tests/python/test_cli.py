"""The dolsot command end to end: drives the binary as a subprocess and
checks every line of its contract (docs/cli.md) and every bad input.

The binary is $DOLSOT_CLI, else the installed `dolsot` beside this Python
(what `pip install .` put on PATH; scripts/test.sh runs that), else
<builddir>/cli/dolsot with builddir from $DOLSOT_BUILD_DIR or <repo>/build.
Each test gets its own DOLSOT_CACHE_DIR.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from process_tree import alive, descendants

REPO = pathlib.Path(__file__).resolve().parents[2]


def _find_cli() -> pathlib.Path | None:
    if os.environ.get("DOLSOT_CLI"):
        return pathlib.Path(os.environ["DOLSOT_CLI"])
    installed = pathlib.Path(sys.executable).parent / "dolsot"  # pip install . put it here
    if installed.exists():
        return installed
    build = pathlib.Path(os.environ.get("DOLSOT_BUILD_DIR", REPO / "build"))
    candidate = build / "cli" / "dolsot"
    return candidate if candidate.exists() else None


CLI = _find_cli()
pytestmark = [
    pytest.mark.timeout(120),
]


@pytest.fixture(autouse=True)
def _cli_is_built():
    # The CLI is ours: not finding it is a failure, never a skip.
    if CLI is None:
        pytest.fail("the dolsot CLI was not found: set DOLSOT_CLI or DOLSOT_BUILD_DIR, "
                    "or pip install the package", pytrace=False)

TOOLBOX = textwrap.dedent('''
    __all__ = ["add", "scale", "ToolError", "help"]

    class ToolError(Exception):
        exit_code = 3

    def add(a: int, b: int) -> int:
        return a + b

    def fail(message: str) -> None:
        raise ToolError(message)

    def help(topic=None):
        return "mytools cheat-sheet"
''')


class Dolsot:
    """Runs the CLI with a private cache dir and a toolbox directory on PYTHONPATH,
    through the server (serve=True) or directly (DOLSOT_SERVE=0)."""

    def __init__(self, tmp_path: pathlib.Path, serve: bool = False):
        self.serve = serve
        self.cache_dir = tmp_path / "cache"
        self.toolbox_dir = tmp_path / "toolboxes"
        self.toolbox_dir.mkdir()
        (self.toolbox_dir / "mytools.py").write_text(TOOLBOX)
        (self.toolbox_dir / "otherlib.py").write_text("def scale(x):\n    return 10 * x\n")
        (self.toolbox_dir / "broken_tools.py").write_text("raise RuntimeError('broken on import')\n")
        (self.toolbox_dir / "exiting_tools.py").write_text("import os\nos._exit(7)\n")
        (self.toolbox_dir / "crashing_tools.py").write_text(
            "import ctypes\nctypes.string_at(0)\n")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("DOLSOT_")}
        self.env.update(DOLSOT_CACHE_DIR=str(self.cache_dir), DOLSOT_TYPECHECK="0",
                        DOLSOT_SERVE="1" if serve else "0")
        self.env.pop("PYTHONPATH", None)
        self.cache_dirs = {str(self.cache_dir)}  # every one a server may have started for

    def __call__(self, *args, stdin: bytes | str | None = None, env: dict | None = None,
                 timeout: float = 60) -> subprocess.CompletedProcess:
        if isinstance(stdin, str):
            stdin = stdin.encode()
        if env and env.get("DOLSOT_CACHE_DIR"):
            self.cache_dirs.add(env["DOLSOT_CACHE_DIR"])
        # The toolboxes are importable from the working directory, which the
        # worker puts first on sys.path (as `python -c` does).
        return subprocess.run([str(CLI), *args], input=stdin if stdin is not None else b"",
                              capture_output=True, env={**self.env, **(env or {})},
                              cwd=self.toolbox_dir, timeout=timeout)


    def server_status(self, cache_dir: str | None = None, must: bool = True) -> dict | None:
        proc = subprocess.run([str(CLI), "serve", "--status", "--json"], capture_output=True,
                              env={**self.env, "DOLSOT_CACHE_DIR": cache_dir or str(self.cache_dir)},
                              timeout=60)
        if not must and proc.returncode == 2:
            return None  # a cache dir the CLI refuses (a test's hostile one): no server there
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    def stop_servers(self):
        """Stops the server of every cache dir this helper used; asserts that
        nothing of it (server, workers, sessions) is left running."""
        for cache_dir in sorted(self.cache_dirs):
            if not pathlib.Path(cache_dir).is_dir() or pathlib.Path(cache_dir).is_symlink():
                continue
            status = self.server_status(cache_dir, must=False)
            if status is None:
                continue
            tree = [status["pid"], *descendants(status["pid"])] if status["running"] else []
            proc = subprocess.run([str(CLI), "serve", "--stop"], capture_output=True, timeout=180,
                                  env={**self.env, "DOLSOT_CACHE_DIR": cache_dir})
            assert proc.returncode == 0, proc.stderr
            assert_gone(tree)


def assert_gone(pids, seconds: float = 10):
    """Every pid has exited (bounded poll of /proc: they are not our children)."""
    deadline = time.monotonic() + seconds
    while any(alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not [p for p in pids if alive(p)], [p for p in pids if alive(p)]


@pytest.fixture(params=["direct", "serve"])
def dolsot(tmp_path, request):
    helper = Dolsot(tmp_path, serve=request.param == "serve")
    yield helper
    helper.stop_servers()


def out(proc) -> str:
    return proc.stdout.decode()


def err(proc) -> str:
    return proc.stderr.decode()


def assert_cli_error(proc, code: int, *phrases: str):
    """A failure before any code ran: the exit code, one `dolsot: error:` line, no stdout."""
    assert proc.returncode == code, (proc.returncode, err(proc))
    assert err(proc).startswith("dolsot: error: "), err(proc)
    for phrase in phrases:
        assert phrase in err(proc), err(proc)
    assert proc.stdout == b""


def assert_session_holds(dolsot, session: str, expression: str, expected: str):
    proc = dolsot("--session", session, expression)
    assert proc.returncode == 0, err(proc)
    assert out(proc) == expected + "\n"


# --- the contract -----------------------------------------------------------

def test_state_persists_between_invocations(dolsot):
    first = dolsot("--session", "s", "x = 1")
    assert first.returncode == 0, err(first)
    assert out(first) == ""
    assert "session now holds: x" in err(first)
    second = dolsot("--session", "s", "x + 1")
    assert (second.returncode, out(second)) == (0, "2\n")


def test_stdout_then_value_on_stdout_and_banner_on_stderr(dolsot):
    proc = dolsot("--session", "s", "print('hello')\ny = 6 * 7\ny")
    assert proc.returncode == 0, err(proc)
    assert out(proc) == "hello\n42\n"
    assert err(proc).strip().splitlines()[-1] == "session now holds: y"


def test_code_on_stdin(dolsot):
    proc = dolsot("--session", "s", stdin="2 ** 10\n")
    assert (proc.returncode, out(proc)) == (0, "1024\n"), err(proc)


def test_a_session_needs_no_toolbox(dolsot):
    proc = dolsot("--session", "scratch", "1 + 1")
    assert (proc.returncode, out(proc)) == (0, "2\n")


def test_toolboxes_are_injected_under_their_aliases(dolsot):
    proc = dolsot("--toolbox", "mytools:mt", "--toolbox", "otherlib:ol", "--session", "work",
                  "mt.add(1, ol.scale(2))")
    assert (proc.returncode, out(proc)) == (0, "21\n"), err(proc)


def test_pythonpath_reaches_the_worker(dolsot, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "faraway.py").write_text("ANSWER = 42\n")
    proc = dolsot("--toolbox", "faraway:fa", "--session", "s", "fa.ANSWER",
                  env={"PYTHONPATH": str(elsewhere)})
    assert (proc.returncode, out(proc)) == (0, "42\n"), err(proc)


def test_toolbox_exception_exit_code_is_the_process_exit_code(dolsot):
    proc = dolsot("--toolbox", "mytools:mt", "--session", "work", "mt.fail('not found')")
    assert proc.returncode == 3, err(proc)
    assert "not found" in err(proc)
    assert out(proc) == ""


def test_unhandled_exception_exits_1_with_the_error_on_stderr(dolsot):
    proc = dolsot("--session", "s", "print('before')\n1 / 0")
    assert proc.returncode == 1
    assert out(proc) == "before\n"
    assert "ZeroDivisionError" in err(proc)
    assert "session now holds" in err(proc)


def test_timeout_exits_124_and_keeps_the_session(dolsot):
    assert dolsot("--session", "s", "x = 5").returncode == 0
    proc = dolsot("--session", "s", "--timeout", "1", "while True:\n    pass")
    assert proc.returncode == 124, err(proc)
    assert_session_holds(dolsot, "s", "x", "5")


def test_a_timeout_too_short_to_start_the_worker_is_still_a_timeout(dolsot):
    # The deadline passed while the worker started: that is the cell's
    # timeout (124), not a worker failure (1).
    proc = dolsot("--session", "s", "--timeout", "1e-9", "--json", "1 + 1")
    assert proc.returncode == 124, err(proc)
    assert json.loads(out(proc))["outcome"] == "timeout"


def test_a_cell_whose_state_cannot_be_saved_exits_75_and_says_why(dolsot):
    # A full disk, as the kernel reports it to a writer over its file-size
    # limit (EFBIG); SIGXFSZ ignored so the write fails instead of killing.
    assert dolsot("--session", "s", "x = 1").returncode == 0
    def full_disk():
        import resource
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    server = None
    if dolsot.serve:
        # The server writes the checkpoint: it is the one whose disk is full.
        socket_path = pathlib.Path(dolsot.server_status()["socket"])
        dolsot.stop_servers()
        server = subprocess.Popen([str(CLI), "serve"], env=dolsot.env, preexec_fn=full_disk,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not socket_path.exists():  # it listens once the socket is there
            assert time.monotonic() < deadline and server.poll() is None
            time.sleep(0.01)
    proc = subprocess.run([str(CLI), "--session", "s", "--json", "y = 2"], capture_output=True,
                          env=dolsot.env, cwd=dolsot.toolbox_dir, timeout=60,
                          preexec_fn=None if server else full_disk)
    if server:
        dolsot.stop_servers()
        assert server.wait(timeout=60) == 0
    assert proc.returncode == 75, err(proc)
    result = json.loads(out(proc))
    assert result["ok"] is True and result["save_error"], result
    assert "checkpoint not saved" in result["error"]
    assert_session_holds(dolsot, "s", "'y' in globals(), x", "(False, 1)")


def test_timeout_flag_overrides_the_environment(dolsot):
    proc = dolsot("--session", "s", "--timeout", "30", "import time; time.sleep(1.5); 'done'",
                  env={"DOLSOT_TIMEOUT": "0.5"})
    assert (proc.returncode, out(proc)) == (0, "'done'\n"), err(proc)


def test_environment_timeout_applies_without_the_flag(dolsot):
    proc = dolsot("--session", "s", "import time; time.sleep(30)", env={"DOLSOT_TIMEOUT": "1"})
    assert proc.returncode == 124, err(proc)


@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_stops_the_cell_and_rolls_the_session_back(dolsot, tmp_path, signal_number):
    assert dolsot("--session", "s", "x = 1").returncode == 0
    marker = tmp_path / "cell-started"
    code = f"x = 2\nopen({str(marker)!r}, 'w').close()\nimport time\ntime.sleep(60)"
    proc = subprocess.Popen([str(CLI), "--session", "s", code], env=dolsot.env,
                            cwd=dolsot.toolbox_dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not marker.exists():  # the cell is running once the marker exists
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
            time.sleep(0.01)
        proc.send_signal(signal_number)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr.decode()
    assert "interrupted" in stderr.decode()
    assert_session_holds(dolsot, "s", "x", "1")


def test_missing_session_is_a_usage_error_explaining_sessions(dolsot):
    proc = dolsot("1 + 1")
    assert_cli_error(proc, 2, "--session is required", "persists per session id")


@pytest.mark.parametrize("spec", ["mytools", ":mt", "mytools:", "my tools:mt", "mytools:m-t"])
def test_malformed_toolbox_is_a_usage_error(dolsot, spec):
    assert_cli_error(dolsot("--toolbox", spec, "--session", "s", "1"), 2, "--toolbox")


# --- beyond the contract ----------------------------------------------------

def test_json_is_the_whole_result(dolsot):
    proc = dolsot("--session", "s", "--json", "print('hi')\nz = 2\nz + 1")
    assert proc.returncode == 0
    assert proc.stderr == b""
    result = json.loads(proc.stdout)
    assert list(result) == ["ok", "value", "stdout", "error", "exit_code", "outcome",
                            "error_type", "held", "dropped", "save_error", "text", "images"]
    assert result["images"] == []
    assert result["error_type"] is None
    assert result["ok"] is True and result["value"] == "3" and result["stdout"] == "hi\n"
    assert result["error"] is None and result["exit_code"] == 0 and result["outcome"] == "ok"
    assert result["held"] == ["z"] and result["dropped"] == []
    assert result["text"].endswith("session now holds: z")


def _matplotlib_path() -> str:
    matplotlib = pytest.importorskip("matplotlib")
    return str(pathlib.Path(matplotlib.__file__).parents[1])


PLOT = ("import matplotlib.pyplot as plt\n"
        "plt.plot([1, 2, 3]); plt.show()\n"
        "plt.figure(); plt.bar([1], [2])\n"
        "'plotted'")


def test_figures_are_written_to_the_working_directory_and_named(dolsot):
    env = {"PYTHONPATH": _matplotlib_path()}
    proc = dolsot("--session", "fig", PLOT, env=env)
    assert proc.returncode == 0, err(proc)
    assert out(proc) == "'plotted'\n"
    lines = err(proc).splitlines()
    assert lines[-2:] == ["figure: dolsot-fig-1.png", "figure: dolsot-fig-2.png"], err(proc)
    for name in ("dolsot-fig-1.png", "dolsot-fig-2.png"):
        assert (dolsot.toolbox_dir / name).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    again = dolsot("--session", "fig", "--json", "plt.plot([1]); plt.show()", env=env)
    result = json.loads(again.stdout)
    assert result["images"] == ["dolsot-fig-3.png"], "an earlier figure is never overwritten"
    assert "[1 figure: PNG in Result.images]" in result["text"]


def test_max_repr_and_max_text_flags(dolsot):
    proc = dolsot("--session", "s", "--max-repr", "120", "--json", "list(range(10**5))")
    value = json.loads(proc.stdout)["value"]
    assert len(value) <= 120 and value.endswith("# list of 100000 items, shortened"), value
    proc = dolsot("--session", "s", "--max-text", "600", "--json", "print('z' * 9000)")
    assert len(json.loads(proc.stdout)["text"]) <= 600
    env_bound = dolsot("--session", "s", "list(range(10**5))", env={"DOLSOT_MAX_REPR": "90"})
    assert len(out(env_bound)) <= 91
    assert_cli_error(dolsot("--session", "s", "--max-repr", "-3", "1"), 2, "--max-repr")


def test_json_failure_and_control_characters(dolsot):
    proc = dolsot("--session", "s", "--json", "print('\\x00\\x1b[31m\\u2028')\nraise ValueError('bad')")
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    assert result["ok"] is False and result["exit_code"] == 1
    assert result["stdout"] == "\x00\x1b[31m\u2028\n"
    assert "ValueError: bad" in result["error"]


def test_list_sessions_table_and_json(dolsot):
    assert dolsot("--session", "alpha", "a = 1").returncode == 0
    assert dolsot("--session", "beta", "b = list(range(1000))").returncode == 0
    table = dolsot("--list-sessions")
    assert table.returncode == 0, err(table)
    lines = out(table).splitlines()
    assert lines[0].split() == ["SESSION", "SIZE", "LAST", "USED"]
    assert {line.split()[0] for line in lines[1:]} == {"alpha", "beta"}
    assert all(line.rstrip() == line for line in lines)
    listed = json.loads(out(dolsot("--list-sessions", "--json")))
    assert {s["id"] for s in listed} == {"alpha", "beta"}
    assert all(s["size_bytes"] > 0 and s["last_used"] > 0 for s in listed)


def test_list_sessions_when_there_are_none(dolsot):
    proc = dolsot("--list-sessions")
    assert (proc.returncode, out(proc)) == (0, "no sessions\n")
    assert json.loads(out(dolsot("--list-sessions", "--json"))) == []


def test_reset_one_and_all(dolsot):
    for sid in ("a", "b", "c"):
        assert dolsot("--session", sid, "v = 1").returncode == 0
    proc = dolsot("--reset", "a")
    assert (proc.returncode, out(proc)) == (0, "removed session a\n")
    gone = dolsot("--session", "a", "v")
    assert gone.returncode == 1 and "NameError" in err(gone)
    assert_session_holds(dolsot, "b", "v", "1")
    everything = dolsot("--reset", "all", "--json")
    assert everything.returncode == 0
    assert json.loads(everything.stdout)["reset"] == "all"
    assert json.loads(dolsot("--list-sessions", "--json").stdout) == []


def test_reset_of_an_unknown_session_removes_nothing(dolsot):
    proc = dolsot("--reset", "never-used")
    assert proc.returncode == 0
    assert "nothing removed" in out(proc)


def test_version_and_help(dolsot):
    version = dolsot("--version")
    assert version.returncode == 0 and out(version).startswith("dolsot ")
    helped = dolsot("--help")
    assert helped.returncode == 0
    for text in ("--session", "--toolbox", "--list-sessions", "--reset", "--timeout", "--json",
                 "--gate", "Examples:", "dolsot --toolbox mytools:mt --session work", "Exit codes"):
        assert text in out(helped)
    assert "--cache-dir" not in out(helped)


# --- bad input: a clear error, a documented exit code, the session untouched --

@pytest.fixture
def held_session(dolsot):
    assert dolsot("--session", "keep", "x = 41").returncode == 0
    yield "keep"
    assert_session_holds(dolsot, "keep", "x + 1", "42")


def test_invalid_utf8_code(dolsot, held_session):
    proc = dolsot("--session", held_session, b"x = '\xff'")
    assert_cli_error(proc, 2, "not valid UTF-8", "0xff")


def test_a_function_from_an_earlier_call_shows_its_own_cell(dolsot):
    # Each call restores the session; cell numbers go on from the checkpoint,
    # and the checkpoint keeps the source of the cell that defined f.
    dolsot("--session", "tb", "def f():\n    return 1 / 0  # f's own line\n")
    dolsot("--session", "tb", "y = 1\nz = 2  # a later cell's second line\n")
    proc = dolsot("--session", "tb", "f()")
    assert proc.returncode == 1
    text = err(proc) + out(proc)
    assert 'File "<cell 3>", line 1, in <module>' in text, text
    assert 'File "<cell 1>", line 2, in f' in text, text
    assert "f's own line" in text and "later cell" not in text, text


def test_nul_byte_in_code(dolsot, held_session):
    assert_cli_error(dolsot("--session", held_session, stdin=b"x = 1\x00"), 2, "NUL byte")


def test_ten_megabyte_cell(dolsot, held_session):
    proc = dolsot("--session", held_session, stdin=b"x = 0\n" + b"#" * (10 << 20))
    assert_cli_error(proc, 2, "larger than")


def test_empty_code(dolsot, held_session):
    assert_cli_error(dolsot("--session", held_session, stdin=b""), 2, "empty")


def test_bad_session_id(dolsot):
    assert_cli_error(dolsot("--session", "../escape", "1"), 2, "session")


def test_unknown_flag(dolsot, held_session):
    assert_cli_error(dolsot("--session", held_session, "--cache-dir", "/tmp", "x = 0"), 2,
                     "--cache-dir")


def test_json_refusal_keeps_stdout_empty(dolsot, held_session):
    assert_cli_error(dolsot("--session", held_session, "--json", stdin=b"x = '\xff'"), 2, "UTF-8")


@pytest.mark.parametrize("args", [
    ["--session"],
    ["--reset"],
    ["--list-sessions", "--reset", "all"],
    ["--list-sessions", "--session", "keep"],
    ["--reset", "keep", "--session", "keep", "x = 0"],
])
def test_conflicting_or_incomplete_flags(dolsot, held_session, args):
    assert_cli_error(dolsot(*args), 2, "dolsot --help")


def test_code_starting_with_a_dash_after_double_dash(dolsot):
    proc = dolsot("--session", "s", "--", "-1 + 3")
    assert (proc.returncode, out(proc)) == (0, "2\n"), err(proc)


def test_bad_timeout_flag(dolsot, held_session):
    assert_cli_error(dolsot("--session", held_session, "--timeout", "-1", "x = 0"), 2, "--timeout")


@pytest.mark.parametrize("variable,value", [
    ("DOLSOT_TIMEOUT", "soon"),
    ("DOLSOT_SESSION_TTL_DAYS", "-3"),
    ("DOLSOT_MAX_OUTPUT", "lots"),
    ("DOLSOT_TYPECHECK", "maybe"),
])
def test_malformed_environment_variable(dolsot, held_session, variable, value):
    assert_cli_error(dolsot("--session", held_session, "x = 0", env={variable: value}), 2, variable)


@pytest.mark.parametrize("variables,named", [
    ({"DOLSOT_SERVE": "maybe"}, "DOLSOT_SERVE"),
    ({"DOLSOT_SERVE": "1", "DOLSOT_SERVE_IDLE": "abc"}, "DOLSOT_SERVE_IDLE"),
    ({"DOLSOT_SERVE": "1", "DOLSOT_SERVE_IDLE": "-5"}, "DOLSOT_SERVE_IDLE"),
    ({"DOLSOT_SERVE": "1", "DOLSOT_SERVE_PROFILES": "none"}, "DOLSOT_SERVE_PROFILES"),
    ({"DOLSOT_SANDBOX": "maybe"}, "DOLSOT_SANDBOX"),
])
def test_malformed_server_or_sandbox_variable_is_an_error_not_a_fallback(dolsot, variables,
                                                                       named):
    # Once: a silent fall back to direct mode, the default idle time, or a
    # sandbox silently on. Nothing runs and no server starts.
    proc = dolsot("--session", "s", "print('ran')", env=variables)
    assert_cli_error(proc, 2, named, variables[named])
    status = dolsot.server_status(must=False)
    assert status is None or not status["running"], status


def test_toolbox_module_that_does_not_exist(dolsot, held_session):
    proc = dolsot("--toolbox", "no_such_module_xyz:nm", "--session", held_session, "x = 0")
    assert_cli_error(proc, 2, "toolbox 'nm'", "No module named 'no_such_module_xyz'")


def test_toolbox_that_raises_on_import(dolsot, held_session):
    proc = dolsot("--toolbox", "broken_tools:bt", "--session", held_session, "x = 0")
    assert_cli_error(proc, 2, "toolbox 'bt'", "RuntimeError: broken on import")


@pytest.mark.parametrize("module, how", [("exiting_tools", "exited with status 7"),
                                         ("crashing_tools", "killed by signal 11")])
def test_toolbox_that_kills_the_worker_on_import_is_named(dolsot, held_session, module, how):
    # os._exit or a crash at import once gave exit 1 and a vague WorkerError.
    proc = dolsot("--toolbox", "mytools:mt", "--toolbox", f"{module}:bad", "--session",
                  held_session, "x = 0")
    assert_cli_error(proc, 2, f"toolbox 'bad' (module '{module}') did not import", how)


def test_symlinked_cache_dir_is_refused(dolsot, tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    link = tmp_path / "link"
    link.symlink_to(real)
    proc = dolsot("--session", "s", "x = 1", env={"DOLSOT_CACHE_DIR": str(link)})
    assert_cli_error(proc, 2, str(link))
    assert list(real.iterdir()) == []


def test_world_writable_cache_dir_is_refused(dolsot, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    proc = dolsot("--session", "s", "x = 1", env={"DOLSOT_CACHE_DIR": str(shared)})
    assert_cli_error(proc, 2, str(shared), "writable by other users")
    assert list(shared.iterdir()) == []


def test_unusable_cache_dir_is_an_error(dolsot, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    proc = dolsot("--session", "s", "x = 1", env={"DOLSOT_CACHE_DIR": str(blocker / "sessions")})
    assert_cli_error(proc, 2, str(blocker / "sessions"))


@pytest.mark.parametrize("args", [["--list-sessions"], ["--reset", "all"]])
def test_housekeeping_refuses_a_hostile_cache_dir_too(dolsot, tmp_path, args):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    assert_cli_error(dolsot(*args, env={"DOLSOT_CACHE_DIR": str(shared)}), 2, str(shared))


# --- the AST gate -------------------------------------------------------------

def test_gate_rejects_a_cell_before_it_runs(dolsot, held_session):
    proc = dolsot("--session", held_session, "--gate", "import os\nx = 0")
    assert proc.returncode == 1, err(proc)
    assert "import-denied" in err(proc) and "line 1" in err(proc)
    assert out(proc) == ""


def test_gate_lets_a_harmless_cell_run(dolsot):
    proc = dolsot("--session", "g", "--gate", "sum(range(10))")
    assert (proc.returncode, out(proc)) == (0, "45\n"), err(proc)


def test_the_gate_reads_the_cell_with_the_workers_cpython_too(dolsot, held_session):
    # The CLI embeds no CPython: the worker's own interpreter (a python -I -S
    # child) tells the gate where the cell's statements start. tree-sitter
    # reads `type X = int` on every version; CPython only from 3.12 on.
    proc = dolsot("--session", "v", "import sys\nsys.version_info[:2]")
    version = tuple(int(n) for n in out(proc).strip("()\n").split(","))
    proc = dolsot("--session", held_session, "--gate", "type X = int\nprint('ran')")
    if version < (3, 12):
        assert proc.returncode == 1, err(proc)
        assert "[syntax-error] CPython cannot parse the cell: SyntaxError" in err(proc), err(proc)
        assert out(proc) == ""  # rejected before anything ran
    else:
        assert (proc.returncode, out(proc)) == (0, "ran\n"), err(proc)


SEALED = ("class A:\n    def __init__(self):\n        self._n = 0\n"
          "    def m(self):\n        self._n += 1\n        return self._n\n")


def test_the_gate_remembers_sealed_classes_across_calls_and_restores(dolsot):
    # #23 §5: `self._x` in a plain method is allowed; the gate's memory of
    # the sealed class rides in the session's checkpoint, so a later call
    # (a new process restoring it, or the server after a restart) still
    # refuses `A.m(obj)` and allows normal use.
    proc = dolsot("--session", "sealed", "--gate", SEALED)
    assert proc.returncode == 0, err(proc)
    dolsot.stop_servers()  # serve: the next call restores from the checkpoint too
    proc = dolsot("--session", "sealed", "--gate", "import json\nA.m(json)")
    assert proc.returncode == 1, err(proc)
    assert "private-attribute" in err(proc), err(proc)
    assert out(proc) == ""
    proc = dolsot("--session", "sealed", "--gate", "a = A()\nprint(a.m(), a.m())")
    assert (proc.returncode, out(proc)) == (0, "1 2\n"), err(proc)
    # reset frees the name
    assert dolsot("--reset", "sealed").returncode == 0
    proc = dolsot("--session", "sealed", "--gate", "A = [1]\nx = A\nprint(x)")
    assert (proc.returncode, out(proc)) == (0, "[1]\n"), err(proc)


def test_without_the_gate_the_same_cell_runs(dolsot):
    proc = dolsot("--session", "g", "import os\nos.sep")
    assert (proc.returncode, out(proc)) == (0, "'/'\n"), err(proc)


def test_a_timed_out_cell_reports_what_the_session_still_holds(tmp_path):
    env = dict(os.environ, DOLSOT_CACHE_DIR=str(tmp_path / "cache"), DOLSOT_TYPECHECK="0",
               DOLSOT_SERVE="0")
    cli = str(CLI)
    subprocess.run([cli, "--session", "s", "kept = 1"], env=env, capture_output=True, timeout=60, check=True)
    out = subprocess.run([cli, "--session", "s", "--timeout", "1", "while True: pass"],
                         env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 124
    assert "session now holds: kept" in out.stderr
