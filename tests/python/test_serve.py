"""The dolsot server (issue 19): CLI calls go through a per-user server that
keeps sessions live between calls. What only the server does is tested here
(live state, its failures, its users, its concurrency, idle exit, --status,
--stop, Ctrl-C forwarding, mixing with direct mode); the whole CLI contract
runs through it too (test_cli.py and test_cli_startup.py, both modes).
"""
from __future__ import annotations

import json
import os
import pathlib
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from host_files import make_host_files
from process_tree import alive, descendants
from test_cli import CLI, Dolsot, _cli_is_built, assert_gone, err, out  # noqa: F401 (autouse)

pytestmark = [pytest.mark.timeout(180)]


@pytest.fixture
def served(tmp_path):
    helper = Dolsot(tmp_path, serve=True)
    yield helper
    helper.stop_servers()


def wait_for(path: pathlib.Path, seconds: float = 30):
    """A file the cell creates: the cell is running (bounded poll)."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def server_tree(served) -> list[int]:
    status = served.server_status()
    assert status["running"], status
    return [status["pid"], *descendants(status["pid"])]


def popen(served, *args, env=None):
    return subprocess.Popen([str(CLI), *args], env={**served.env, **(env or {})},
                            cwd=served.toolbox_dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def start_sleeping_cell(served, tmp_path):
    """x = 1 in session s, then a call setting x = 2 that is inside its
    60 s sleep when this returns."""
    assert served("--session", "s", "x = 1").returncode == 0
    marker = tmp_path / "running"
    client = popen(served, "--session", "s",
                   f"x = 2\nopen({str(marker)!r}, 'w').close()\nimport time\ntime.sleep(60)")
    wait_for(marker)
    return client


def test_live_state_survives_between_calls(served, tmp_path):
    """A thread and an open file are not checkpointable: direct mode loses them."""
    path = tmp_path / "f.txt"
    code = (f"import threading\nev = threading.Event()\nt = threading.Thread(target=ev.wait)\n"
            f"t.start()\nf = open({str(path)!r}, 'w')\nn = 1")
    first = served("--session", "live", code)
    assert first.returncode == 0, err(first)
    second = served("--session", "live", "f.write('kept'); f.flush(); (t.is_alive(), n)")
    assert (second.returncode, out(second)) == (0, "(True, 1)\n"), err(second)
    assert path.read_text() == "kept"
    assert served("--session", "live", "ev.set(); t.join(); f.close()").returncode == 0
    status = served.server_status()
    assert status["running"] and "live" in status["live_sessions"]


def test_status_and_stop(served):
    assert served.server_status()["running"] is False
    assert served("--session", "s", "x = 1").returncode == 0
    status = served.server_status()
    assert status["running"] and status["live_sessions"] == ["s"]
    assert status["cache_dir"] == os.path.realpath(served.cache_dir)
    text = subprocess.run([str(CLI), "serve", "--status"], env=served.env, capture_output=True,
                          text=True, timeout=60)
    assert f"pid: {status['pid']}\n" in text.stdout and "live sessions: s\n" in text.stdout
    tree = server_tree(served)
    stop = subprocess.run([str(CLI), "serve", "--stop"], env=served.env, capture_output=True,
                          text=True, timeout=120)
    assert stop.returncode == 0, stop.stderr
    assert stop.stdout.startswith("stopped the dolsot server")
    assert_gone(tree)
    assert not pathlib.Path(status["socket"]).exists()
    again = subprocess.run([str(CLI), "serve", "--stop"], env=served.env, capture_output=True,
                           text=True, timeout=60)
    assert (again.returncode, again.stdout.startswith("no dolsot server runs")) == (0, True)
    # Stopped cleanly: the session was checkpointed and comes back.
    proc = served("--session", "s", "x")
    assert (proc.returncode, out(proc)) == (0, "1\n"), err(proc)


def test_sigterm_is_a_clean_stop(served):
    assert served("--session", "s", "x = 5").returncode == 0
    tree = server_tree(served)
    os.kill(tree[0], signal.SIGTERM)
    assert_gone(tree)
    proc = served("--session", "s", "x")
    assert (proc.returncode, out(proc), err(proc)) == (0, "5\n", "session now holds: x\n")


def test_kill_9_between_calls(served):
    assert served("--session", "s", "x = 1").returncode == 0
    assert served("--session", "s", "y = 2").returncode == 0
    tree = server_tree(served)
    os.kill(tree[0], signal.SIGKILL)
    assert_gone(tree)  # its workers and sessions end with it
    proc = served("--session", "s", "(x, y)")
    assert (proc.returncode, out(proc)) == (0, "(1, 2)\n"), err(proc)
    lines = err(proc).splitlines()
    assert len(lines) == 2 and "server was gone" in lines[0], err(proc)
    assert lines[1] == "session now holds: x, y"
    assert err(served("--session", "s", "x")) == "session now holds: x, y\n"


def test_general_path_calls_append_delta_frames_that_survive_kill_9(served):
    """A session holding 2 MB: each call that takes the general path (it
    defines and calls a function) appends a delta frame of kilobytes to the
    session's file, not 2 MB, and a server killed with SIGKILL loses none."""
    setup = served("--session", "big", "import os\nblob = os.urandom(2_000_000)\nrows = []")
    assert setup.returncode == 0, err(setup)
    for i in range(3):
        # A module as a default: the general path (read_only_cell.h).
        proc = served("--session", "big", f"def add(_os=os):\n    rows.append({i})\nadd()")
        assert proc.returncode == 0, err(proc)
    stored = (served.cache_dir / "big.session").read_bytes()
    assert stored.count(b"DJND") == 3
    assert len(stored) < 2_000_000 + 64 * 1024, len(stored)
    tree = server_tree(served)
    os.kill(tree[0], signal.SIGKILL)
    assert_gone(tree)
    proc = served("--session", "big", "rows, len(blob), add.__name__")
    assert (proc.returncode, out(proc)) == (0, "([0, 1, 2], 2000000, 'add')\n"), err(proc)


def test_kill_9_during_a_call(served, tmp_path):
    client = start_sleeping_cell(served, tmp_path)
    tree = server_tree(served)
    os.kill(tree[0], signal.SIGKILL)
    stdout, stderr = client.communicate(timeout=30)
    assert client.returncode == 1
    assert stdout == b""
    lines = stderr.decode().splitlines()
    assert len(lines) == 1 and "server exited during the call" in lines[0], stderr
    assert_gone(tree)
    proc = served("--session", "s", "x")
    assert (proc.returncode, out(proc)) == (0, "1\n"), err(proc)  # the last checkpoint


def test_a_stale_socket_and_lock_are_replaced(served):
    status = served.server_status()
    sock_path = status["socket"]
    served.cache_dir.mkdir(mode=0o700, exist_ok=True)
    pathlib.Path(sock_path).parent.mkdir(mode=0o700, exist_ok=True)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(sock_path)  # a socket file nobody listens on, as a killed server leaves
    stale.close()
    (pathlib.Path(sock_path).parent / "dolsot-serve.lock").write_text("12345\n")
    proc = served("--session", "s", "1 + 1")
    assert (proc.returncode, out(proc)) == (0, "2\n"), err(proc)
    assert "server was gone" in err(proc)
    assert served.server_status()["running"]


# A server of another dolsot release, as an upgrade leaves one running: it
# holds the server lock, listens on the socket, answers every request with an
# error in its own protocol version (1), and stops on SIGTERM as a real one
# does (lock released, socket removed).
OLD_SERVER = r"""
import fcntl, json, os, signal, socket, struct, sys
sock_path, lock_path = sys.argv[1], sys.argv[2]
lock = open(lock_path, "w")
fcntl.flock(lock, fcntl.LOCK_EX)
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sock_path)
server.listen()
def stop(*_):
    os.unlink(sock_path)
    os._exit(0)
signal.signal(signal.SIGTERM, stop)
print("ready", flush=True)
while True:
    conn, _ = server.accept()
    with conn:
        size = struct.unpack(">I", conn.recv(4, socket.MSG_WAITALL))[0]
        request = json.loads(conn.recv(size, socket.MSG_WAITALL))
        sys.stderr.write(f"got a request of version {request.get('v')}\n")
        reply = json.dumps({"v": 1, "type": "error", "message": f"request of protocol version "
                            f"{request.get('v')}, this dolsot speaks 1"}).encode()
        conn.sendall(struct.pack(">I", len(reply)) + reply)
"""


@pytest.fixture
def old_server(served):
    """A running server of another release, for `served`'s cache dir."""
    sock_path = pathlib.Path(served.server_status()["socket"])
    served.cache_dir.mkdir(mode=0o700, exist_ok=True)
    sock_path.parent.mkdir(mode=0o700, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", OLD_SERVER, str(sock_path),
                             str(sock_path.parent / "dolsot-serve.lock")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n", proc.stderr.read()
    yield proc
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=60)
    proc.stdout.close()
    proc.stderr.close()


def test_a_server_of_another_release_is_replaced_within_the_call(served, old_server):
    """After an upgrade the old server cannot read the new CLI's requests:
    the call stops it (SIGTERM: it checkpoints and leaves), starts its own
    and runs the cell, saying so in one line."""
    proc = served("--session", "s", "x = 41\nx + 1")
    assert (proc.returncode, out(proc)) == (0, "42\n"), err(proc)
    notes = [line for line in err(proc).splitlines() if "another dolsot release" in line]
    assert len(notes) == 1 and "protocol version 1" in notes[0] and "stopped it" in notes[0], err(proc)
    assert old_server.wait(timeout=60) == 0  # it got SIGTERM and left cleanly
    status = served.server_status()
    assert status["running"] and status["pid"] != old_server.pid
    again = served("--session", "s", "x + 2")
    assert (again.returncode, out(again), "another" in err(again)) == (0, "43\n", False)


def test_stop_and_status_handle_a_server_of_another_release(served, old_server):
    status = subprocess.run([str(CLI), "serve", "--status"], env=served.env, capture_output=True,
                            text=True, timeout=60)
    assert status.returncode == 1 and "another dolsot release" in status.stderr, status.stderr
    assert "serve --stop" in status.stderr
    assert old_server.poll() is None  # --status stops nothing
    stop = subprocess.run([str(CLI), "serve", "--stop"], env=served.env, capture_output=True,
                          text=True, timeout=120)
    assert (stop.returncode, stop.stdout.startswith("stopped the dolsot server")) == (0, True), \
        stop.stderr
    assert old_server.wait(timeout=60) == 0


def test_direct_mode_stops_a_server_of_another_release(served, old_server):
    """Direct mode asks a running server to let go of its session; one of
    another release cannot, so it is stopped (it releases them all)."""
    proc = served("--no-serve", "--session", "d", "7 * 6")
    assert (proc.returncode, out(proc)) == (0, "42\n"), err(proc)
    assert old_server.wait(timeout=60) == 0


def test_eight_concurrent_calls_on_eight_sessions_and_on_one(served):
    assert served("--session", "one", "n = 0").returncode == 0
    calls = [popen(served, "--session", f"s{i}", f"v = {i}\nv * 10") for i in range(8)]
    calls += [popen(served, "--session", "one", "n += 1\nn") for _ in range(8)]
    results = [(c.wait(timeout=120), *c.communicate()) for c in calls]
    for rc, stdout, stderr in results:
        assert rc == 0, stderr
    assert [r[1] for r in results[:8]] == [f"{i * 10}\n".encode() for i in range(8)]
    # One session: one call at a time, each saw the one before it.
    assert sorted(int(r[1]) for r in results[8:]) == list(range(1, 9))
    proc = served("--session", "one", "n")
    assert out(proc) == "8\n"


def test_a_burst_of_calls_leaves_no_threads_behind(served):
    """Each call is served by a thread waiting in accept; after a burst the
    server keeps only its spare ones (a bounded wait: they end right after
    their answers)."""
    assert served("--session", "a", "1").returncode == 0
    pid = served.server_status()["pid"]

    def threads() -> int:
        return len(os.listdir(f"/proc/{pid}/task"))

    before = threads()
    calls = [popen(served, "--session", f"b{i}", "import time; time.sleep(0.2); 1") for i in range(12)]
    assert [c.wait(timeout=120) for c in calls] == [0] * 12
    for c in calls:
        c.communicate()
    deadline = time.monotonic() + 30
    while threads() > before + 1:  # + the saver of the sessions' Repl, started by now
        assert time.monotonic() < deadline, f"{threads()} threads, {before} before the burst"
        time.sleep(0.05)


def test_clients_racing_to_start_a_server_share_one(served):
    calls = [popen(served, "--session", f"r{i}", f"{i} * 2") for i in range(8)]
    results = [(c.wait(timeout=120), *c.communicate()) for c in calls]
    assert [(rc, stdout) for rc, stdout, _ in results] == [(0, f"{i * 2}\n".encode())
                                                          for i in range(8)]
    # No note: none was gone (a server's socket appears only once it listens,
    # so a racing client never takes a starting server for a dead one).
    notes = [stderr for _, _, stderr in results if b"server" in stderr]
    assert notes == []
    status = served.server_status()
    log = pathlib.Path(status["socket"]).parent / "dolsot-serve.log"
    assert log.read_text().count("listening on") == 1
    assert sorted(status["live_sessions"]) == [f"r{i}" for i in range(8)]


def test_idle_server_exits_and_checkpoints(served):
    env = {"DOLSOT_SERVE_IDLE": "1"}
    proc = served("--session", "s", "x = 3", env=env)
    assert proc.returncode == 0, err(proc)
    status = served.server_status()
    tree = [status["pid"], *descendants(status["pid"])]
    assert_gone(tree, seconds=30)
    assert not pathlib.Path(status["socket"]).exists()
    proc = served("--session", "s", "x", env={"DOLSOT_SERVE": "0"})
    assert out(proc) == "3\n", err(proc)


@pytest.mark.parametrize("signal_number", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_is_forwarded_and_the_session_rolls_back(served, tmp_path, signal_number):
    client = start_sleeping_cell(served, tmp_path)
    client.send_signal(signal_number)
    stdout, stderr = client.communicate(timeout=30)
    assert client.returncode == 130, stderr
    assert b"rolled back" in stderr
    proc = served("--session", "s", "x")
    assert (proc.returncode, out(proc)) == (0, "1\n"), err(proc)
    assert served.server_status()["running"]


def test_a_client_that_dies_interrupts_its_cell(served, tmp_path):
    client = start_sleeping_cell(served, tmp_path)
    client.kill()
    client.wait(timeout=10)
    start = time.monotonic()
    proc = served("--session", "s", "x", timeout=50)
    assert (proc.returncode, out(proc)) == (0, "1\n"), err(proc)
    assert time.monotonic() - start < 50  # the cell did not sleep its 60 s out


def test_mixing_with_direct_mode_loses_nothing(served):
    assert served("--session", "s", "x = 1").returncode == 0
    direct = served("--session", "s", "x += 1\nx", env={"DOLSOT_SERVE": "0"})
    assert (direct.returncode, out(direct), err(direct)) == (0, "2\n", "session now holds: x\n")
    assert "s" not in served.server_status()["live_sessions"]  # released for direct mode
    again = served("--session", "s", "x += 1\nx")
    assert out(again) == "3\n", err(again)
    flag = served("--no-serve", "--session", "s", "x")
    assert out(flag) == "3\n", err(flag)
    reset = served("--reset", "s", env={"DOLSOT_SERVE": "0"})
    assert out(reset) == "removed session s\n"
    gone = served("--session", "s", "x")
    assert gone.returncode == 1 and "NameError" in err(gone)


def test_reset_and_list_see_live_sessions(served):
    assert served("--session", "a", "x = 1").returncode == 0
    assert served("--session", "b", "x = 2").returncode == 0
    listed = served("--list-sessions", "--json")
    assert sorted(s["id"] for s in json.loads(out(listed))) == ["a", "b"]
    assert out(served("--reset", "a")) == "removed session a\n"
    assert served.server_status()["live_sessions"] == ["b"]
    assert out(served("--reset", "all")) == "removed 1 session\n"
    assert served.server_status()["live_sessions"] == []
    proc = served("--session", "b", "x")
    assert proc.returncode == 1 and "NameError" in err(proc)


def test_profiles_follow_the_callers_cwd_and_environment(served, tmp_path):
    other = tmp_path / "elsewhere"
    other.mkdir()
    (other / "where.py").write_text("WHO = 'elsewhere'\n")
    assert served("--session", "p", "import os\nx = 1").returncode == 0
    proc = subprocess.run([str(CLI), "--session", "p",
                           "import os, where\n(os.getcwd(), where.WHO, os.environ['PROBE'], x)"],
                          env={**served.env, "PROBE": "from-this-call"}, cwd=other,
                          capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert out(proc) == f"({str(other)!r}, 'elsewhere', 'from-this-call', 1)\n"
    assert served.server_status()["live_sessions"] == ["p"]


def test_reset_all_racing_releases_leaves_every_profile_whole(served):
    """A release that finds its profile gone (a concurrent `reset all`
    emptied the map) must not put a null profile in its place: status, the
    next run on that profile and the next `reset all` would dereference it."""
    ids = [f"r{i}" for i in range(8)]
    pid = None
    for _ in range(12):
        for sid in ids:
            assert served("--session", sid, "x = 1").returncode == 0
        pid = pid or served.server_status()["pid"]
        racers = [popen(served, "--reset", sid) for sid in ids]
        racers.insert(len(racers) // 2, popen(served, "--reset", "all"))
        for racer in racers:
            racer.communicate(timeout=120)
        status = served.server_status()
        assert status["running"] and status["pid"] == pid, status
    proc = served("--session", "r0", "1 + 1")
    assert (proc.returncode, out(proc)) == (0, "2\n"), err(proc)
    assert out(served("--reset", "all")).startswith("removed")
    assert served.server_status()["pid"] == pid


def test_profiles_are_capped_and_the_least_recently_used_idle_one_retires(served):
    """Profiles are keyed by the caller's whole environment: without a cap,
    every new environment kept a worker until the idle exit."""
    cap = {"DOLSOT_SERVE_PROFILES": "2"}
    for i in range(5):
        proc = served("--session", f"p{i}", f"x = {i}", env={**cap, "PROBE": str(i)})
        assert proc.returncode == 0, err(proc)
        assert served.server_status()["profiles"] <= 2
    status = served.server_status()
    assert status["profiles"] == 2 and status["live_sessions"] == ["p3", "p4"], status
    # A retired profile's session comes back from the store.
    proc = served("--session", "p0", "x", env={**cap, "PROBE": "0"})
    assert (proc.returncode, out(proc)) == (0, "0\n"), err(proc)
    log = (pathlib.Path(status["socket"]).parent / "dolsot-serve.log").read_text()
    assert "retiring an idle worker profile" in log
    bad = served("serve", env={"DOLSOT_SERVE_PROFILES": "0", "DOLSOT_CACHE_DIR": str(
        served.cache_dir.parent / "other-cache")})
    assert bad.returncode != 0 and "DOLSOT_SERVE_PROFILES" in err(bad)


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("unshare") is None,
                    reason="needs root and unshare to give the client a cwd the server cannot see")
def test_a_cwd_the_server_cannot_reach_is_named_with_its_reason(served, tmp_path):
    assert served("--session", "s", "1").returncode == 0  # the server runs
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    # In a mount namespace of its own, the client's cwd is on a tmpfs the
    # server (outside it) does not see.
    script = (f"mount -t tmpfs none {hidden} && mkdir {hidden}/inside && cd {hidden}/inside && "
              f"exec {CLI} --session s 1")
    # A setting the server parses from the call's environment (strtod sets
    # errno to 0) runs between the failed open and its message.
    proc = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script],
                          env={**served.env, "DOLSOT_TIMEOUT": "30"}, capture_output=True,
                          text=True, timeout=60)
    if "unshare failed" in proc.stderr or "mount:" in proc.stderr:
        pytest.skip(f"no mount namespace here: {proc.stderr.strip()}")
    assert proc.returncode != 0
    assert f"{hidden}/inside is not reachable: No such file or directory" in proc.stderr, proc.stderr
    assert "Success" not in proc.stderr


def test_serve_as_a_cell_stays_reachable(served):
    proc = served("-s", "x", "--", "serve")
    assert proc.returncode == 1 and "NameError: name 'serve' is not defined" in err(proc)


def test_serve_after_a_global_flag_is_the_subcommand_never_a_cell(served):
    assert served("--session", "s", "x = 1").returncode == 0
    status = served.server_status()
    # --json before the word serve is serve's --json: the same document.
    proc = served("--json", "serve", "--status")
    assert proc.returncode == 0, err(proc)
    shown = json.loads(proc.stdout)
    assert {k: shown[k] for k in ("running", "pid", "socket", "live_sessions")} == {
        "running": True, "pid": status["pid"], "socket": status["socket"], "live_sessions": ["s"]}
    # Every other global flag before it is a usage error naming it; nothing
    # runs, no session is made (the server would list it).
    for args, named in [(["--session", "t", "serve"], "--session"), (["--no-serve", "serve"], "--no-serve"),
                        (["-s", "t", "--json", "serve", "--status"], "--session"),
                        (["--timeout", "5", "serve", "--stop"], "--timeout"),
                        (["--reset", "s", "serve"], "--reset")]:
        proc = served(*args)
        assert proc.returncode == 2 and proc.stdout == b"", (args, proc)
        assert err(proc).startswith(f"dolsot: error: serve cannot be combined with {named} "
                                    "(its options go after the word serve)"), err(proc)
    assert served.server_status()["live_sessions"] == ["s"]
    # serve's own options and help, after --json as after nothing.
    help_text = served("--json", "serve", "--help")
    assert help_text.returncode == 0 and b"dolsot serve" in help_text.stdout and b"--status" in help_text.stdout
    stop = served("--json", "serve", "--stop")
    assert stop.returncode == 0, err(stop)
    assert served.server_status()["running"] is False


def test_a_foreground_server_refuses_a_second_one(served):
    assert served("--session", "s", "1").returncode == 0
    second = subprocess.run([str(CLI), "serve"], env=served.env, capture_output=True, text=True,
                            timeout=60)
    assert second.returncode == 1 and "already runs" in second.stderr


def test_garbage_on_the_socket_gets_an_error_and_the_server_survives(served):
    assert served("--session", "s", "x = 1").returncode == 0
    path = served.server_status()["socket"]
    for payload in [b"\x00\x00\x00\x05hello", b"\xff\xff\xff\xff", b'\x00\x00\x00\x02{}']:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(path)
            s.sendall(payload)
            s.shutdown(socket.SHUT_WR)
            s.settimeout(30)
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        assert b'"type":"error"' in answer, answer
    proc = served("--session", "s", "x")
    assert (proc.returncode, out(proc)) == (0, "1\n"), err(proc)


def _other_user() -> str | None:
    name = "dolsot-serve-test"
    try:
        pwd.getpwnam(name)
        return name
    except KeyError:
        pass
    if shutil.which("useradd") is None:
        return None
    made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                           name], capture_output=True)
    return name if made.returncode == 0 else None


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create and become a second user")
def test_another_user_is_refused_and_runs_its_own(served):
    user = _other_user()
    if user is None:
        pytest.skip("could not create a second user (useradd)")
    uid = pwd.getpwnam(user).pw_uid
    assert served("--session", "s", "x = 1").returncode == 0
    status = served.server_status()
    sock_dir = pathlib.Path(status["socket"]).parent
    # Open the way to root's socket so that only the peer-credential check is left.
    opened = []
    for d in [sock_dir, *sock_dir.parents]:
        if d == pathlib.Path("/"):
            break
        opened.append((d, d.stat().st_mode & 0o7777))
        os.chmod(d, d.stat().st_mode | 0o011)
    os.chmod(status["socket"], 0o777)
    try:
        probe = ("import socket,sys\ns = socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\n"
                 "s.settimeout(30)\n"
                 "try:\n    s.sendall(b'\\x00\\x00\\x00\\x02{}')\n    print(repr(s.recv(100)))\n"
                 "except (ConnectionResetError, BrokenPipeError):\n    print(repr(b''))")
        proc = subprocess.run(["python3", "-c", probe, status["socket"]], user=uid,
                              capture_output=True, text=True, timeout=60)
    finally:
        for d, mode in opened:
            os.chmod(d, mode)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "b''"  # closed without an answer
    log = (sock_dir / "dolsot-serve.log").read_text()
    assert f"refused a connection from uid {uid}" in log
    # Its own CLI call works, with its own cache dir and its own server. What
    # it runs is copied where it can reach it: the clone may sit under a
    # directory other users cannot traverse (a 0700 mktemp -d folder).
    home = pathlib.Path(tempfile.mkdtemp(prefix="dolsot-other-"))
    os.chown(home, uid, -1)
    tools = pathlib.Path(tempfile.mkdtemp(prefix="dolsot-other-bin-"))
    os.chmod(tools, 0o755)
    cli = tools / "dolsot"
    shutil.copy2(CLI, cli)
    worker = CLI.parent.parent / "backend_subprocess" / "dolsot-worker"
    if worker.exists():
        shutil.copy2(worker, tools / "dolsot-worker")  # found beside the CLI
    try:
        env = {k: v for k, v in served.env.items() if k != "DOLSOT_CACHE_DIR"}
        env.update(DOLSOT_CACHE_DIR=str(home / "cache"), HOME=str(home))
        for args in (["--session", "o", "import os\nos.getuid()"], ["serve", "--stop"]):
            mine = subprocess.run([str(cli), *args], env=env, user=uid, cwd=home,
                                  capture_output=True, text=True, timeout=120)
            if mine.returncode == 127 and "shared librar" in mine.stderr:
                pytest.skip(f"the interpreter's library is not readable by {user}: "
                            f"{mine.stderr.strip()}")
            if mine.returncode != 0 and "Permission denied" in mine.stderr:
                pytest.skip(f"the build is not readable by {user}: {mine.stderr.strip()}")
            assert mine.returncode == 0, mine.stderr
            if args[0] == "--session":
                assert mine.stdout == f"{uid}\n"
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(tools, ignore_errors=True)
    assert served("--session", "s", "x").returncode == 0  # root's server is unharmed


def test_list_and_reset_start_no_server(served):
    assert out(served("--list-sessions")) == "no sessions\n"
    assert out(served("--reset", "all")) == "removed 0 sessions\n"
    assert served.server_status()["running"] is False


def test_a_hung_server_costs_a_bounded_wait(served):
    """A stopped (SIGSTOP) server: the call gives up after the cell's timeout
    plus the client's 60 s margin, says so in one line and exits 1."""
    assert served("--session", "s", "x = 1").returncode == 0
    pid = served.server_status()["pid"]
    os.kill(pid, signal.SIGSTOP)
    try:
        proc = served("--session", "s", "--timeout", "1", "x", timeout=120)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert proc.returncode == 1 and proc.stdout == b""
    lines = err(proc).splitlines()
    assert len(lines) == 1 and "did not answer in time" in lines[0], err(proc)
    proc = served("--session", "s", "x")
    assert (proc.returncode, out(proc)) == (0, "1\n"), err(proc)


# --- the Sandbox through the server (its policy is part of the profile) ---------

@pytest.fixture
def walled(served, tmp_path):
    """A host file outside any mount, a directory to mount, and a listening
    host socket (the network the sandbox must not reach)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    yield {**make_host_files(tmp_path), "port": listener.getsockname()[1]}
    listener.close()


def probe(walled) -> str:
    """A cell that reports what it can reach: the host file, the host socket."""
    return ("import socket\n"
            f"try:\n    seen = open({str(walled['secret'])!r}).read()\n"
            "except OSError as e:\n    seen = type(e).__name__\n"
            f"try:\n    socket.create_connection(('127.0.0.1', {walled['port']}), 5).close()\n"
            "    net = 'connected'\n"
            "except OSError as e:\n    net = type(e).__name__\n"
            "(seen, net)")


def test_a_sandboxed_call_is_walled_and_an_unsandboxed_one_on_the_same_server_is_not(
        served, walled):
    free = served("--session", "free", probe(walled))
    assert free.returncode == 0, err(free)
    assert out(free) == "('host secret\\n', 'connected')\n"
    pid = served.server_status()["pid"]
    boxed = served("--sandbox", "--session", "boxed", probe(walled))
    assert boxed.returncode == 0, err(boxed)
    seen, net = eval(out(boxed))  # noqa: S307 (our own repr of two strings)
    assert seen == "FileNotFoundError" and net != "connected", out(boxed)
    status = served.server_status()
    # It ran in the server (no direct run beside it), in a profile of its own.
    assert status["pid"] == pid and status["live_sessions"] == ["boxed", "free"], status
    assert status["profiles"] == 2, status
    # DOLSOT_SANDBOX=1 is the same policy as --sandbox: the same profile.
    env_on = served("--session", "boxed2", probe(walled), env={"DOLSOT_SANDBOX": "1"})
    assert env_on.returncode == 0 and "FileNotFoundError" in out(env_on), err(env_on)
    # ... but its environment differs (DOLSOT_SANDBOX): another profile, as
    # any environment difference is.
    assert served.server_status()["profiles"] == 3


def test_two_policies_are_two_profiles_and_each_gets_exactly_its_own(served, walled):
    data = walled["data"]
    mounted = served("--sandbox", "--mount", f"/data={data}", "--session", "a",
                     "open('/data/hello.txt').read()")
    assert (mounted.returncode, out(mounted)) == (0, "'hello from the host\\n'\n"), err(mounted)
    networked = served("--sandbox", "--network", "--session", "b", probe(walled))
    assert networked.returncode == 0, err(networked)
    assert eval(out(networked)) == ("FileNotFoundError", "connected")  # noqa: S307
    unmounted = served("--sandbox", "--session", "c",
                       "import os\nos.path.exists('/data/hello.txt')")
    assert (unmounted.returncode, out(unmounted)) == (0, "False\n"), err(unmounted)
    assert served.server_status()["profiles"] == 3
    # The same policy again shares the profile; a read-only mount stays read-only.
    again = served("--sandbox", "--mount", f"/data={data}", "--session", "a2",
                   "open('/data/new.txt', 'w')")
    assert again.returncode == 1 and "Read-only file system" in err(again), err(again)
    assert not (data / "new.txt").exists()
    assert served.server_status()["profiles"] == 3


def test_a_session_moving_into_the_sandbox_keeps_its_state_and_leaves_only_when_trusted(served, walled):
    assert served("--session", "s", "x = 41").returncode == 0
    boxed = served("--sandbox", "--session", "s", probe(walled) + "[0], x + 1")
    assert boxed.returncode == 0, err(boxed)
    assert out(boxed) == "('FileNotFoundError', 42)\n"
    # Its state was written under the walls: an unwalled profile does not
    # load it (issue #36: what a cell left could run code when loaded)...
    refused = served("--session", "s", probe(walled) + "[0], x")
    assert refused.returncode == 2 and "--accept-weaker-walls" in err(refused), err(refused)
    # ...unless the caller trusts it.
    back = served("--accept-weaker-walls", "--session", "s", probe(walled) + "[0], x")
    assert (back.returncode, out(back)) == (0, "('host secret\\n', 41)\n"), err(back)
    assert served.server_status()["live_sessions"] == ["s"]


def test_sandbox_check_and_bad_sandbox_flags_with_the_server_on(served):
    check = served("--sandbox", "--check")
    assert check.returncode == 0, err(check)
    assert "[on ] user-namespace" in out(check) and "[on ] seccomp" in out(check)
    bad = served("--mount", "/x=/tmp", "--session", "c", "1")
    assert bad.returncode == 2 and "need --sandbox" in err(bad), err(bad)
    relative = served("--sandbox", "--mount", "x=/tmp", "--session", "c", "1")
    assert relative.returncode == 2 and "absolute" in err(relative), err(relative)


def test_a_sandboxed_request_from_an_older_client_shape_is_refused(served):
    # A run request without its policy is refused, never run unwalled.
    assert served("--session", "s", "1").returncode == 0
    sock = socket.socket(socket.AF_UNIX)
    sock.connect(served.server_status()["socket"])
    import base64
    b64 = lambda s: base64.b64encode(s.encode()).decode()  # noqa: E731
    # This release's protocol version, as the server speaks it.
    header = (pathlib.Path(__file__).resolve().parents[2] / "cli" / "serve_protocol.h").read_text()
    version = int(re.search(r"kServeProtocolVersion = (\d+);", header).group(1))
    request = json.dumps({"v": version, "type": "run", "json": False, "cwd": b64("/"), "env": [],
                          "session": b64("s"), "code": b64("1"), "toolboxes": [],
                          "gate": False}).encode()
    sock.sendall(len(request).to_bytes(4, "big") + request)
    header = sock.recv(4)
    reply = json.loads(sock.recv(int.from_bytes(header, "big"), socket.MSG_WAITALL))
    sock.close()
    assert reply["type"] == "error" and "sandbox" in reply["message"], reply


# --- durability: answered once in the kernel, on disk right after --------------

def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 & -(crc & 1))
    return crc ^ 0xFFFFFFFF


def pending_bytes(blob: bytes) -> bytes:
    """A pending file as the server writes it (core/pending_file.h)."""
    return blob + b"DOLSOTPF" + len(blob).to_bytes(8, "little") + _crc32c(blob).to_bytes(4, "little")


def test_kill_9_right_after_an_answer_loses_nothing(served):
    # Ten rounds: right after a kill the dead server's listening socket can
    # linger in the kernel and take a connection nobody answers (the client
    # must see that its listener exited and start a new server).
    for n in range(10):
        assert served("--session", "s", f"x = {n}").returncode == 0
        tree = server_tree(served)
        os.kill(tree[0], signal.SIGKILL)  # its flusher may not have run
        assert_gone(tree)
        proc = served("--session", "s", "x")
        assert (proc.returncode, out(proc)) == (0, f"{n}\n"), err(proc)
    served.stop_servers()
    assert not list(served.cache_dir.glob("*.pending"))


def test_a_whole_pending_file_is_preferred_and_a_torn_one_is_ignored(served):
    assert served("--session", "s", "x = 1").returncode == 0
    assert served("--session", "t", "x = 2").returncode == 0
    served.stop_servers()  # flushed: s.session and t.session, no pending file
    assert not list(served.cache_dir.glob("*.pending"))
    newer = (served.cache_dir / "t.session").read_bytes()
    pending = served.cache_dir / "s.pending"
    whole = pending_bytes(newer)
    torn = {
        "truncated": whole[: len(whole) // 2],
        "no trailer": newer,
        "zeroed block": whole[:8] + b"\0" * 64 + whole[72:],
        "empty": b"",
    }
    for name, data in torn.items():
        pending.write_bytes(data)
        os.chmod(pending, 0o600)
        proc = served("--session", "s", "x")
        assert (proc.returncode, out(proc)) == (0, "1\n"), (name, err(proc))
        served.stop_servers()  # the call's own checkpoint flushed
        assert not pending.exists(), name  # removed: the session file is the durable one
    # A whole one is the newest checkpoint (a server killed before its flush):
    # restored, and made the session file.
    pending.write_bytes(whole)
    proc = served("--session", "s", "x", env={"DOLSOT_SERVE": "0"})
    assert (proc.returncode, out(proc)) == (0, "2\n"), err(proc)
    assert not pending.exists()
    proc = served("--session", "s", "x")
    assert (proc.returncode, out(proc)) == (0, "2\n"), err(proc)


def test_a_symlinked_pending_file_is_refused(served, tmp_path):
    assert served("--session", "s", "x = 1").returncode == 0
    served.stop_servers()
    target = tmp_path / "planted"
    target.write_bytes(pending_bytes((served.cache_dir / "s.session").read_bytes()))
    (served.cache_dir / "s.pending").symlink_to(target)
    proc = served("--session", "s", "x")
    assert proc.returncode != 0 and "symlink" in err(proc), err(proc)


def test_a_failed_flush_is_logged_and_told_to_the_next_call_once(served):
    # The cell puts a directory where the flusher renames the session file:
    # the pending file is written (the call succeeds), its flush fails.
    in_the_way = served.cache_dir / "f.session" / "in-the-way"
    first = served("--session", "f", f"import os\nos.makedirs({str(in_the_way)!r})\nx = 1")
    assert first.returncode == 0 and err(first) == "session now holds: os, x\n", err(first)
    # The flush runs after the call was answered: the next call hears of it
    # once it has failed (the log says so first).
    log = pathlib.Path(served.server_status()["socket"]).with_name("dolsot-serve.log")
    give_up = time.monotonic() + 60
    while "could not be made durable" not in log.read_text() and time.monotonic() < give_up:
        time.sleep(0.01)
    second = served("--session", "f", "x + 1")
    assert (second.returncode, out(second)) == (0, "2\n"), err(second)
    warnings = [line for line in err(second).splitlines() if "could not be made durable" in line]
    assert len(warnings) == 1 and warnings[0].startswith("dolsot: warning: "), err(second)
    assert "'f'" in warnings[0]
    # Nothing is lost meanwhile: the pending file holds the newest state.
    shutil.rmtree(in_the_way.parent)
    served.stop_servers()
    proc = served("--session", "f", "x", env={"DOLSOT_SERVE": "0"})
    assert (proc.returncode, out(proc)) == (0, "1\n"), err(proc)
    assert not (served.cache_dir / "f.pending").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a small tmpfs (root)")
def test_enospc_while_writing_is_still_an_error_in_the_call(served, tmp_path):
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m,mode=0700", "tmpfs", str(small)],
                      capture_output=True).returncode != 0:
        pytest.skip("cannot mount a tmpfs here")
    try:
        env = {"DOLSOT_CACHE_DIR": str(small / "cache")}
        assert served("--session", "s", "x = 1", env=env).returncode == 0
        proc = served("--session", "s", "--json", "y = b'.' * (8 << 20)", env=env)
        assert proc.returncode == 75, err(proc)
        result = json.loads(out(proc))
        assert result["save_error"] and "No space left on device" in result["error"], result
        served.stop_servers()
        proc = served("--session", "s", "'y' in globals(), x", env=env)
        assert (proc.returncode, out(proc)) == (0, "(False, 1)\n"), err(proc)
    finally:
        served.stop_servers()
        subprocess.run(["umount", "-l", str(small)], check=False)


def test_binding_cells_on_the_server_append_journal_frames(served):
    # The server's sessions checkpoint before each call returns; a cell that
    # only binds plain values goes to the store as a small frame appended
    # to the session file, not as a whole new checkpoint.
    assert served("--session", "j", "blob = b'x' * 1_000_000\nx = 0").returncode == 0
    served.stop_servers()  # every flush done: the base alone
    base = (served.cache_dir / "j.session").read_bytes()
    for _ in range(2):
        proc = served("--session", "j", "x += 1")
        assert proc.returncode == 0, err(proc)
    served.stop_servers()
    stored = (served.cache_dir / "j.session").read_bytes()
    assert stored.startswith(base) and 0 < len(stored) - len(base) < 400
    assert stored.count(b"DJNL") == 2
    proc = served("--session", "j", "x, len(blob)", env={"DOLSOT_SERVE": "0"})
    assert (proc.returncode, out(proc)) == (0, "(2, 1000000)\n"), err(proc)
