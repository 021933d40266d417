"""The Sandbox (issue #16): every escape attempt fails with a clean error
and leaves the session and the host working; the ordinary Repl features
(state, rollback, checkpoints, branches, toolboxes) work inside it.

Run as root here (CI); test_unprivileged_host runs a small host as an
unprivileged user to check the other path. The Sandbox is not the AST gate
(test_sandbox.py)."""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import uuid

import pytest

import dolsot
from dolsot import Mount, Sandbox
from dolsot.errors import ConfigError, DolsotError, Unsupported
from dolsot.store import FileStore, MemoryStore
from process_tree import alive, descendants, wait_until_gone

SECRET = "dolsot-escape-secret-" + uuid.uuid4().hex
# A host file on no sys.path entry (the repository's README).
REPO_README = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "README.md")

# The layers a default Sandbox must have on this kernel (6.x, Landlock ABI >= 6).
LAYERS = ["user-namespace", "pid-namespace", "ipc-namespace", "uts-namespace",
          "network-namespace", "filesystem", "environment", "rlimits", "landlock",
          "session-walls", "capabilities", "seccomp"]


def ok(repl, sid, code, **kw):
    r = repl.run(sid, code, **kw)
    assert r.ok, (code, r.error, r.stdout)
    return r


def failed(repl, sid, code, *fragments, **kw):
    """The cell fails with an error naming one of `fragments`; the session still works."""
    r = repl.run(sid, code, **kw)
    assert not r.ok, (code, r.value, r.stdout)
    text = (r.error or "") + (r.stdout or "")
    assert any(f in text for f in fragments), (code, text)
    assert repl.run(sid, "1 + 1").value == "2"
    return r


@pytest.fixture(scope="module")
def host_dirs(tmp_path_factory):
    root = tmp_path_factory.mktemp("sbx")
    data = root / "data"
    data.mkdir()
    (data / "hello.txt").write_text("hello from the host\n")
    out = root / "out"
    out.mkdir()
    secret_dir = root / "elsewhere"
    secret_dir.mkdir()
    (secret_dir / "secret.txt").write_text(SECRET)
    cache = root / "cache"
    cache.mkdir()
    ov = root / "ov"
    (ov / "sub").mkdir(parents=True)
    (ov / "read.txt").write_text("read me\n")
    (ov / "edit.txt").write_text("original\n")
    (ov / "gone.txt").write_text("delete me\n")
    (ov / "move.txt").write_text("rename me\n")
    (ov / "sub" / "deep.txt").write_text("deep\n")
    return {"root": root, "data": data, "out": out, "secret": secret_dir, "cache": cache, "ov": ov}


def snapshot(directory):
    """Every path under `directory` with its bytes (None for a directory) and symlink target."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(directory):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, directory)
            if os.path.islink(path):
                out[rel] = ("link", os.readlink(path))
            elif os.path.isdir(path):
                out[rel] = ("dir", None)
            else:
                with open(path, "rb") as f:
                    out[rel] = ("file", f.read())
    return out


@pytest.fixture(scope="module")
def repl(host_dirs):
    os.environ["DOLSOT_ESCAPE_SECRET"] = SECRET
    try:
        r = dolsot.Repl(
            store=FileStore(str(host_dirs["cache"])),
            typecheck=False,
            timeout=20,
            sandbox=Sandbox(
                mounts=[Mount("/data", host_dirs["data"]),
                        Mount("/out", host_dirs["out"], "read-write"),
                        Mount("/ov", host_dirs["ov"], "overlay")],
                env={"GREETING": "hi"},
                processes=128,  # each session takes about four (docs/sandbox.md)
                open_files=128,
                file_size_mb=8,
                disk_mb=16,
                memory_mb=1024,
            ),
        )
        ok(r, "warm", "1")
    finally:
        del os.environ["DOLSOT_ESCAPE_SECRET"]
    yield r
    r.close()


# ---------------------------------------------------------------- the policy


def test_report_lists_every_layer_active(repl):
    report = repl.sandbox_report()
    for name in LAYERS:
        assert report.active(name), (name, str(report))
    assert "[on ] seccomp" in str(report)
    assert report.active("overlay") and "/ov" in str(report), str(report)
    assert repl.capabilities.sandbox
    assert not dolsot.Repl(store=MemoryStore()).capabilities.sandbox


def test_inprocess_session_refuses_a_sandbox():
    with pytest.raises(Unsupported, match="cannot be sandboxed"):
        dolsot.InProcessSession(sandbox=Sandbox())


def test_bad_policies_are_refused_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match="mode"):
        Mount("/x", str(tmp_path), "sideways")
    with pytest.raises(DolsotError, match="overlay mount /x"):
        dolsot.Repl(store=MemoryStore(), sandbox=Sandbox(mounts=[Mount("/x", str(tmp_path) + ",upperdir=/root", "overlay")]))
    with pytest.raises(DolsotError, match=r"\.\."):
        dolsot.Repl(store=MemoryStore(), sandbox=Sandbox(mounts=[Mount("/x/../etc", str(tmp_path))]))
    with pytest.raises(ValueError, match="memory_mb"):
        Sandbox(memory_mb=-1)
    # A missing host path is refused where the Sandbox is made ...
    with pytest.raises(ConfigError, match="mount /x: the host path .* does not exist"):
        Sandbox(mounts=[Mount("/x", str(tmp_path / "missing"))])
    # ... and one that goes away afterwards by the worker, which refuses to
    # start: an error naming the path.
    (tmp_path / "gone").mkdir()
    r = dolsot.Repl(store=MemoryStore(), sandbox=Sandbox(mounts=[Mount("/x", str(tmp_path / "gone"))]))
    (tmp_path / "gone").rmdir()
    res = r.run("s", "1")
    r.close()
    assert not res.ok and "does not exist" in res.error, res.error
    # An overlay of a file: refused where the Repl is made.
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ConfigError, match="overlay mount /x: .* is a file"):
        dolsot.Repl(store=MemoryStore(),
                    sandbox=Sandbox(mounts=[Mount("/x", str(tmp_path / "file.txt"), "overlay")]))


def test_best_effort_reports_each_layer():
    r = dolsot.Repl(store=MemoryStore(), typecheck=False, sandbox=Sandbox(best_effort=True))
    report = r.sandbox_report()
    r.close()
    # Everything is available here, so best_effort loses nothing; a layer
    # that cannot be had fails closed without it (sandbox_setup_test.cc).
    for name in LAYERS:
        assert report.active(name), str(report)
    # As root the processes cap is a pids cgroup (root is exempt from RLIMIT_NPROC).
    assert report.active("cgroup") == (os.geteuid() == 0), str(report)


# ---------------------------------------------------------------- filesystem


def test_reads_outside_the_mounts_fail(repl, host_dirs):
    for path in ["/etc/shadow", "/etc/passwd", "/root/.bash_history",
                 str(host_dirs["secret"] / "secret.txt"), REPO_README]:
        failed(repl, "fs", f"open({path!r}).read()", "FileNotFoundError", "PermissionError")
    # The host's cwd and the store's cache directory are not there.
    cwd_files = [f for f in os.listdir(os.getcwd()) if os.path.isfile(f)]
    assert cwd_files
    for name in cwd_files[:5]:
        failed(repl, "fs", f"open({os.path.join(os.getcwd(), name)!r}).read()", "FileNotFoundError")
    failed(repl, "fs", f"import os; os.listdir({str(host_dirs['cache'])!r})",
           "FileNotFoundError", "PermissionError")
    # What is there: only what Python needs, read-only.
    top = ok(repl, "fs", "import os; sorted(os.listdir('/'))").value
    assert "home" not in top and "etc" in top, top
    assert ok(repl, "fs", "open('/data/hello.txt').read()").value == repr("hello from the host\n")


def test_the_store_stays_on_the_host_side(repl, host_dirs):
    ok(repl, "stored", "x = 41")
    ok(repl, "stored", "x += 1")
    # The host wrote the checkpoint; the session cannot see the directory.
    assert any(host_dirs["cache"].rglob("*")), list(host_dirs["cache"].iterdir())
    failed(repl, "stored", f"import os; os.listdir({str(host_dirs['cache'])!r})",
           "FileNotFoundError", "PermissionError")


def test_proc_shows_only_the_sandbox(repl):
    host = os.getpid()
    failed(repl, "proc", f"open('/proc/{host}/environ').read()", "FileNotFoundError", "ProcessLookupError")
    failed(repl, "proc", f"open('/proc/{host}/mem', 'rb').read(1)", "FileNotFoundError", "ProcessLookupError")
    pids = ok(repl, "proc", "import os; sorted(int(p) for p in os.listdir('/proc') if p.isdigit())").value
    # Only the session's own processes are listed: not the worker (pid 1).
    assert "1" not in pids.strip("[]").replace(" ", "").split(","), pids
    assert str(host) not in pids.replace(",", " ").split() or host < 100, pids
    env = ok(repl, "proc", textwrap.dedent("""
        import os
        seen = b''
        for p in os.listdir('/proc'):
            try:
                seen += open(f'/proc/{p}/environ', 'rb').read()
            except OSError:
                pass
        seen
    """)).value
    assert SECRET not in env
    # /proc/self/root is the sandbox's root, not the host's.
    failed(repl, "proc", "open('/proc/self/root/etc/shadow').read()", "FileNotFoundError")
    failed(repl, "proc", "open('/proc/1/root/etc/shadow').read()", "FileNotFoundError", "PermissionError")


def test_links_planted_in_a_writable_mount_lead_nowhere(repl, host_dirs):
    out = host_dirs["out"]
    (out / "escape").unlink(missing_ok=True)
    os.symlink(str(host_dirs["secret"] / "secret.txt"), out / "escape")
    failed(repl, "links", "open('/out/escape').read()", "FileNotFoundError")
    ok(repl, "links", "import os; os.symlink('/etc/shadow', '/out/planted')")
    failed(repl, "links", "open('/out/planted').read()", "FileNotFoundError")
    failed(repl, "links", "open('/out/../../etc/shadow').read()", "FileNotFoundError")
    failed(repl, "links", "import os; os.link('/data/hello.txt', '/out/hard')", "Error")
    # Writes through the read-write mount reach the host (that is its point).
    ok(repl, "links", "open('/out/written.txt', 'w').write('from the cell')")
    assert (out / "written.txt").read_text() == "from the cell"
    (out / "planted").unlink()
    (out / "escape").unlink()


def test_overlay_reads_the_host_and_keeps_every_write_inside(repl, host_dirs):
    ov = host_dirs["ov"]
    before = snapshot(ov)
    assert ok(repl, "ov", "open('/ov/read.txt').read()").value == repr("read me\n")
    ok(repl, "ov", textwrap.dedent("""
        import os
        with open('/ov/edit.txt', 'a') as f:
            f.write('changed in the sandbox\\n')
        open('/ov/new.txt', 'w').write('created')
        os.remove('/ov/gone.txt')
        os.rename('/ov/move.txt', '/ov/moved.txt')
        os.mkdir('/ov/newdir')
        open('/ov/sub/deep.txt', 'w').write('overwritten')
        os.rename('/ov/newdir', '/ov/newdir2')
        # A directory from the host renames by copying (overlayfs without
        # redirect_dir answers EXDEV, as across filesystems; shutil.move copies).
        try:
            os.rename('/ov/sub', '/ov/sub2')
        except OSError as e:
            import errno, shutil
            assert e.errno == errno.EXDEV, e
            shutil.move('/ov/sub', '/ov/sub2')
        os.chmod('/ov/read.txt', 0o600)
    """))
    # The next cell of the session sees all of it...
    seen = ok(repl, "ov", textwrap.dedent("""
        import os
        (open('/ov/edit.txt').read(), open('/ov/new.txt').read(), os.path.exists('/ov/gone.txt'),
         open('/ov/moved.txt').read(), os.path.exists('/ov/move.txt'), os.path.isdir('/ov/newdir2'),
         open('/ov/sub2/deep.txt').read(), os.path.exists('/ov/sub'))
    """)).value
    assert seen == repr(("original\nchanged in the sandbox\n", "created", False, "rename me\n",
                         False, True, "overwritten", False)), seen
    # ...and a branch of it (its walls); another session does not: it has a
    # writable layer of its own over the host directory.
    repl.branch("ov", "ov-branch")
    assert ok(repl, "ov-branch", "open('/ov/new.txt').read()").value == "'created'"
    assert ok(repl, "ov-other", "import os; (os.path.exists('/ov/new.txt'), open('/ov/edit.txt').read(), sorted(os.listdir('/ov')))").value == \
        repr((False, "original\n", sorted(["read.txt", "edit.txt", "gone.txt", "move.txt", "sub"])))
    ok(repl, "ov-other", "open('/ov/new.txt', 'w').write('other')")
    assert ok(repl, "ov", "open('/ov/new.txt').read()").value == "'created'"
    # The host directory is byte for byte as it was, with no new entry.
    assert snapshot(ov) == before
    assert oct(os.stat(ov / "read.txt").st_mode & 0o777) != "0o600"


def test_overlay_links_and_dotdot_lead_nowhere(repl, host_dirs):
    ov = host_dirs["ov"]
    (ov / "escape").unlink(missing_ok=True)
    os.symlink(str(host_dirs["secret"] / "secret.txt"), ov / "escape")
    try:
        before = snapshot(ov)
        failed(repl, "ovlinks", "open('/ov/escape').read()", "FileNotFoundError")
        # Writing through the planted link creates nothing on the host either.
        failed(repl, "ovlinks", "open('/ov/escape', 'w').write('x')", "FileNotFoundError",
               "PermissionError", "Read-only file system")
        ok(repl, "ovlinks", "import os; os.symlink('/etc/shadow', '/ov/planted')")
        failed(repl, "ovlinks", "open('/ov/planted').read()", "FileNotFoundError")
        failed(repl, "ovlinks", "open('/ov/../../etc/shadow').read()", "FileNotFoundError")
        failed(repl, "ovlinks", f"open('/ov/../{host_dirs['secret'].name}/secret.txt').read()", "FileNotFoundError")
        ok(repl, "ovlinks", "import os; os.link('/ov/read.txt', '/ov/hard'); os.symlink('/ov/edit.txt', '/ov/soft')")
        ok(repl, "ovlinks", "open('/ov/soft', 'w').write('through a link'); open('/proc/self/root/ov/via-proc', 'w').write('x')")
        assert ok(repl, "ovlinks", "open('/ov/edit.txt').read()").value == "'through a link'"
        assert snapshot(ov) == before
        assert (host_dirs["secret"] / "secret.txt").read_text() == SECRET
    finally:
        (ov / "escape").unlink()


def test_overlay_writes_are_capped_by_disk_mb(repl, host_dirs):
    before = snapshot(host_dirs["ov"])
    # disk_mb=16: the overlays' writable layer fills up (each file stays
    # under file_size_mb=8, so it is the disk cap that stops it).
    failed(repl, "ovcap", textwrap.dedent("""
        for i in range(8):
            with open(f'/ov/fill{i}', 'wb') as f:
                for _ in range(4):
                    f.write(b'x' * (1 << 20))
                    f.flush()
    """), "No space left")
    ok(repl, "ovcap", "import glob, os; [os.remove(p) for p in glob.glob('/ov/fill*')]")
    ok(repl, "ovcap", "open('/ov/after-cap.txt', 'w').write('room again')")
    assert snapshot(host_dirs["ov"]) == before


def test_overlay_writes_of_a_rolled_back_cell_stay(repl):
    # Rollback restores the session's memory, not files: documented in
    # docs/sandbox.md ("What is not walled off").
    ok(repl, "ovroll", "n = 1")
    crash = repl.run("ovroll", "n = 2\nopen('/ov/from-a-crashed-cell', 'w').write('kept')\nimport os; os._exit(3)")
    assert not crash.ok
    assert ok(repl, "ovroll", "(n, open('/ov/from-a-crashed-cell').read())").value == "(1, 'kept')"


def test_read_only_places_refuse_writes(repl, host_dirs):
    failed(repl, "ro", "open('/data/new.txt', 'w')", "Read-only file system", "PermissionError")
    assert not (host_dirs["data"] / "new.txt").exists()
    failed(repl, "ro", "import sys; open(sys.prefix + '/evil.pth', 'w')", "Read-only file system", "PermissionError")
    failed(repl, "ro", "open('/evil', 'w')", "Read-only file system", "PermissionError")
    ok(repl, "ro", "open('/tmp/scratch.txt', 'w').write('x'); import os; os.getcwd()")


# ---------------------------------------------------------------- network


@pytest.fixture(scope="module")
def listeners(host_dirs):
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen()
    unix_path = str(host_dirs["root"] / "host.sock")
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.bind(unix_path)
    unix.listen()
    abstract_name = "\0dolsot-escape-" + uuid.uuid4().hex
    abstract = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    abstract.bind(abstract_name)
    abstract.listen()
    yield {"tcp": tcp.getsockname()[1], "unix": unix_path, "abstract": abstract_name}
    for s in (tcp, unix, abstract):
        s.close()


def test_network_attempts_fail(repl, listeners):
    port = listeners["tcp"]
    net_errors = ("PermissionError", "OSError", "ConnectionRefusedError", "gaierror", "Network is unreachable")
    failed(repl, "net", f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)", *net_errors)
    failed(repl, "net", f"import socket; socket.create_connection(('::1', {port}), timeout=2)", *net_errors)
    failed(repl, "net", f"import socket; s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b'x', ('127.0.0.1', {port}))", *net_errors)
    failed(repl, "net", "import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)", *net_errors)
    failed(repl, "net", "import socket; socket.socket(socket.AF_PACKET, socket.SOCK_RAW)", *net_errors)
    failed(repl, "net", "import socket; socket.getaddrinfo('example.com', 80)", *net_errors)
    failed(repl, "net", f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({listeners['unix']!r})",
           "FileNotFoundError", "PermissionError")
    failed(repl, "net", f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({listeners['abstract']!r})",
           "ConnectionRefusedError", "PermissionError", "OSError")


# ---------------------------------------------------------------- processes


def test_signals_and_ptrace_do_not_leave_the_sandbox(repl):
    host = os.getpid()
    failed(repl, "proc2", f"import os, signal; os.kill({host}, signal.SIGKILL)", "ProcessLookupError", "PermissionError")
    # The worker is pid 1 here, outside the session's Landlock domain: no
    # signal reaches it (nor would a SIGKILL from inside its namespace).
    for sig in ("SIGKILL", "SIGTERM", "SIGINT", "SIGHUP", "SIGUSR1"):
        failed(repl, "proc2", f"import os, signal; os.kill(1, signal.{sig})", "PermissionError")
    ok(repl, "proc2-fresh", "1")  # the worker still opens sessions
    ok(repl, "proc2", "import os; os.getppid()")
    failed(repl, "proc2", textwrap.dedent("""
        import ctypes, os
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.ptrace(16, 1, None, None) != 0:  # PTRACE_ATTACH
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    """), "Operation not permitted")
    assert alive(host)


def test_namespace_and_mount_calls_are_refused(repl):
    for call in ["libc.unshare(0x10000000)", "libc.unshare(0x00020000)",
                 "libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)",
                 "libc.umount2(b'/data', 2)", "libc.setns(0, 0)"]:
        failed(repl, "ns", textwrap.dedent(f"""
            import ctypes, os
            libc = ctypes.CDLL(None, use_errno=True)
            if {call} != 0:
                raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
        """), "Operation not permitted", "Bad file descriptor")
    caps = ok(repl, "ns", "[l for l in open('/proc/self/status') if l.startswith(('CapEff', 'CapBnd', 'NoNewPrivs', 'Seccomp:'))]").value
    assert "CapEff:\\t0000000000000000" in caps and "CapBnd:\\t0000000000000000" in caps, caps
    assert "NoNewPrivs:\\t1" in caps and "Seccomp:\\t2" in caps, caps


def test_a_setuid_binary_gains_nothing(repl):
    mount = shutil.which("mount") or "/usr/bin/mount"
    r = ok(repl, "suid", f"import subprocess; p = subprocess.run([{mount!r}, '-t', 'tmpfs', 'x', '/tmp'], capture_output=True, text=True); (p.returncode, p.stderr)")
    assert not r.value.startswith("(0,"), r.value


def test_fork_bomb_is_capped(repl):
    failed(repl, "bomb", textwrap.dedent("""
        import os
        pids = []
        try:
            for _ in range(10000):
                pid = os.fork()
                if pid == 0:
                    import time
                    time.sleep(30)
                    os._exit(0)
                pids.append(pid)
        finally:
            for p in pids:
                os.kill(p, 9)
                os.waitpid(p, 0)
    """), "BlockingIOError", "Resource temporarily unavailable")


def test_memory_bomb_is_a_memory_error(repl):
    failed(repl, "mem", "x = bytearray(4 * 1024 ** 3)", "MemoryError")
    failed(repl, "mem", "x = [bytearray(64 * 1024 ** 2) for _ in range(64)]", "MemoryError")


def test_disk_open_files_and_file_size_are_capped(repl):
    failed(repl, "caps", textwrap.dedent("""
        with open('/tmp/fill', 'wb') as f:
            for _ in range(64):
                f.write(b'x' * (1 << 20))
                f.flush()
    """), "No space left", "File too large")
    ok(repl, "caps", "import os; os.remove('/tmp/fill')")
    failed(repl, "caps", "fs = [open('/dev/null') for _ in range(1000)]", "Too many open files")
    failed(repl, "caps", "open('/tmp/big', 'wb').write(b'x' * (12 << 20))", "File too large")
    ok(repl, "caps", "import os; os.remove('/tmp/big')")


def test_environment_is_scrubbed(repl):
    env = ok(repl, "env", "import os; dict(os.environ)").value
    assert SECRET not in env
    assert "'GREETING': 'hi'" in env and "'HOME': '/tmp'" in env, env
    raw = ok(repl, "env", "open('/proc/self/environ', 'rb').read()").value
    assert SECRET not in raw


# ---------------------------------------------------------------- between sessions


def test_sessions_cannot_reach_each_others_files_or_processes(repl):
    # A: a secret in its scratch (by absolute and relative path) and in
    # /dev/shm, and a sleeping subprocess.
    ok(repl, "wallA", textwrap.dedent(f"""
        import os, subprocess
        for path in ('/tmp/a-secret', 'a-relative-secret', '/dev/shm/a-secret'):
            with open(path, 'w') as f:
                f.write({SECRET!r})
        sleeper = subprocess.Popen(['sleep', '300'])
    """))
    runner, sleeper, group = eval(ok(repl, "wallA", "(os.getpid(), sleeper.pid, os.getpgid(sleeper.pid))").value)
    ok(repl, "wallB", "import os, signal")
    # Files: B's /tmp and /dev/shm are its own (the same paths, other tmpfs).
    listing = ok(repl, "wallB", "(sorted(os.listdir('/tmp')), sorted(os.listdir('/dev/shm')), os.getcwd())").value
    assert "secret" not in listing and "'/tmp')" in listing, listing
    for path in ["/tmp/a-secret", "/dev/shm/a-secret", "a-relative-secret",
                 f"/proc/{runner}/root/tmp/a-secret", f"/proc/{runner}/cwd/a-relative-secret",
                 f"/proc/{sleeper}/root/dev/shm/a-secret"]:
        failed(repl, "wallB", f"open({path!r}).read()", "FileNotFoundError", "PermissionError")
    ok(repl, "wallB", "open('/tmp/a-secret', 'w').write('b'); open('/dev/shm/a-secret', 'w').write('b')")
    # /proc: A's processes are not listed, and their memory, environ, maps
    # and descriptors cannot be read.
    pids = ok(repl, "wallB", "[int(p) for p in os.listdir('/proc') if p.isdigit()]").value
    assert str(runner) not in pids and str(sleeper) not in pids, pids
    for pid in (runner, sleeper):
        for leaf in ("environ", "mem", "maps", "cmdline"):
            failed(repl, "wallB", f"open('/proc/{pid}/{leaf}', 'rb').read(1)",
                   "FileNotFoundError", "PermissionError")
        failed(repl, "wallB", f"os.listdir('/proc/{pid}/fd')", "FileNotFoundError", "PermissionError")
    failed(repl, "wallB", textwrap.dedent(f"""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        class IoVec(ctypes.Structure):
            _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]
        buf = ctypes.create_string_buffer(64)
        local = IoVec(ctypes.cast(buf, ctypes.c_void_p), 64)
        remote = IoVec(0x400000, 64)
        n = libc.process_vm_readv({runner}, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0)
        if n < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    """), "Operation not permitted", "No such process")
    # IPC: A's abstract unix socket and System V shared memory are A's.
    ok(repl, "wallA", textwrap.dedent("""
        import ctypes, socket
        libc = ctypes.CDLL(None, use_errno=True)
        listener = socket.socket(socket.AF_UNIX)
        listener.bind('\\0dolsot-walls-a')
        listener.listen()
        segment = libc.shmget(0x5a11, 4096, 0o1600)  # IPC_CREAT | 0600
        assert segment >= 0, ctypes.get_errno()
    """))
    failed(repl, "wallB", "import socket; socket.socket(socket.AF_UNIX).connect('\\0dolsot-walls-a')",
           "PermissionError", "ConnectionRefusedError")
    failed(repl, "wallB", textwrap.dedent("""
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.shmget(0x5a11, 0, 0) < 0:
            raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))
    """), "No such file or directory")
    assert ok(repl, "wallA", "libc.shmget(0x5a11, 0, 0) == segment").value == "True"
    # Signals: none reaches A's processes, by pid, process group or pidfd.
    for sig in ("0", "signal.SIGKILL", "signal.SIGTERM"):
        failed(repl, "wallB", f"os.kill({sleeper}, {sig})", "PermissionError")
        failed(repl, "wallB", f"os.kill({runner}, {sig})", "PermissionError")
    failed(repl, "wallB", f"os.killpg({group}, signal.SIGKILL)", "PermissionError")
    failed(repl, "wallB", f"signal.pidfd_send_signal(os.pidfd_open({sleeper}), signal.SIGKILL)",
           "PermissionError", "FileNotFoundError")
    # A is untouched: its files, its subprocess (which A itself may signal).
    assert ok(repl, "wallA", "open('/tmp/a-secret').read() + open('/dev/shm/a-secret').read()").value == repr(SECRET * 2)
    assert ok(repl, "wallA", "sleeper.poll() is None").value == "True"
    assert ok(repl, "wallA", "os.kill(sleeper.pid, 0); sleeper.kill(); sleeper.wait()").value == "-9"
    # A's scratch works as before: tempfile, relative paths, subprocesses.
    assert ok(repl, "wallA", textwrap.dedent("""
        import tempfile
        with tempfile.NamedTemporaryFile('w', delete=False) as f:
            f.write('t')
        (os.path.dirname(f.name), subprocess.run(['cat', os.path.basename(f.name)], capture_output=True, text=True).stdout)
    """)).value == "('/tmp', 't')"


def test_multiprocessing_works_inside_a_sessions_walls(repl):
    value = ok(repl, "mpA", textwrap.dedent("""
        import multiprocessing as mp, os
        from multiprocessing import shared_memory
        def square(x):
            return x * x
        with mp.get_context('fork').Pool(2) as pool:
            squares = pool.map(square, range(5))
        shm = shared_memory.SharedMemory(create=True, size=16)
        shm.buf[0] = 7
        queue = mp.get_context('fork').Queue()
        queue.put(3)
        (squares, queue.get(), shm.name in os.listdir('/dev/shm'))
    """)).value
    assert value == "([0, 1, 4, 9, 16], 3, True)", value
    name = ok(repl, "mpA", "shm.name").value.strip("'")
    failed(repl, "mpB", f"from multiprocessing import shared_memory; shared_memory.SharedMemory({name!r})",
           "FileNotFoundError")
    ok(repl, "mpA", "shm.close(); shm.unlink()")


def test_what_is_bound_below_the_scratch_stays_in_every_sessions_walls(host_dirs):
    """A mount under /tmp (and so a venv or toolbox directory that lives under
    /tmp on the host, which the worker binds there) is not hidden by a
    session's own /tmp: it is there, read-only stays read-only, and the
    session's scratch around it is its own."""
    with dolsot.Repl(store=MemoryStore(), typecheck=False,
                     sandbox=Sandbox(mounts=[Mount("/tmp/below/data", host_dirs["data"])])) as r:
        for sid in ("a", "b"):
            assert ok(r, sid, "open('/tmp/below/data/hello.txt').read()").value == \
                repr("hello from the host\n")
            failed(r, sid, "open('/tmp/below/data/new.txt', 'w')", "OSError", "PermissionError")
        ok(r, "a", "open('/tmp/mine.txt', 'w').write('a')")
        failed(r, "b", "open('/tmp/mine.txt').read()", "FileNotFoundError")


def stored_repl(cache, **options):
    """A default-sandboxed Repl checkpointing into the directory `cache`."""
    return dolsot.Repl(store=FileStore(str(cache)), typecheck=False, sandbox=Sandbox(), **options)


def test_walls_hold_through_rollback_checkpoint_and_branch(host_dirs):
    cache = host_dirs["root"] / "cache-walls"
    cache.mkdir()
    with stored_repl(cache, timeout=10) as r:
        ok(r, "a", "import os; open('/tmp/mine', 'w').write('a'); x = 1")
        ok(r, "b", "import os")
        t = r.run("a", "x = 2\nwhile True: pass", timeout=1)
        assert t.outcome == dolsot.Outcome.TIMEOUT, t
        # The promoted snapshot is the session's runner now, inside its walls.
        assert ok(r, "a", "(x, open('/tmp/mine').read())").value == "(1, 'a')"
        a = ok(r, "a", "os.getpid()").value
        failed(r, "b", f"os.kill({a}, 9)", "PermissionError")
        failed(r, "b", "open('/tmp/mine').read()", "FileNotFoundError")
        # A branch shares its source's keeper and so its walls and scratch.
        r.branch("a", "a2")
        assert ok(r, "a2", "open('/tmp/mine').read()").value == "'a'"
        a2 = ok(r, "a2", "os.getpid()").value
        failed(r, "b", f"os.kill({a2}, 9)", "PermissionError")
        b = ok(r, "b", "os.getpid()").value
        failed(r, "a2", f"os.kill({b}, 9)", "PermissionError")
        ok(r, "a", "y = 3")
    # Restored from its checkpoint in a new worker: a new keeper, new walls,
    # a fresh scratch (files are not in checkpoints).
    with stored_repl(cache) as r:
        assert ok(r, "a", "(x, y)").value == "(1, 3)"
        failed(r, "a", "open('/tmp/mine').read()", "FileNotFoundError")
        a = ok(r, "a", "os.getpid()").value
        ok(r, "b", "import os")
        failed(r, "b", f"os.kill({a}, 9)", "PermissionError")
        assert ok(r, "a", "x").value == "1"


# ---------------------------------------------------------------- the ordinary Repl


def test_state_rollback_and_checkpoints(host_dirs):
    cache = host_dirs["root"] / "cache2"
    cache.mkdir()
    with stored_repl(cache, timeout=3) as r:
        ok(r, "s", "x = [1, 2]")
        t = r.run("s", "x.append(3)\nwhile True: pass", timeout=1)
        assert (t.outcome, t.exit_code) == (dolsot.Outcome.TIMEOUT, 124), t
        assert ok(r, "s", "x").value == "[1, 2]"
        crash = r.run("s", "x.append(4); import os; os._exit(3)")
        assert not crash.ok
        assert ok(r, "s", "x").value == "[1, 2]"
        r.branch("s", "s2")
        ok(r, "s2", "x.append(5)")
        assert ok(r, "s", "x").value == "[1, 2]"
        ok(r, "s", "y = 7")
    with stored_repl(cache) as r:
        assert ok(r, "s", "(x, y)").value == "([1, 2], 7)"


def test_toolboxes_import_inside_the_sandbox(tmp_path, monkeypatch):
    (tmp_path / "sbx_toolbox.py").write_text("def double(x):\n    return 2 * x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with dolsot.Repl({"tb": "sbx_toolbox"}, store=MemoryStore(), typecheck=False,
                     sandbox=Sandbox()) as r:
        assert ok(r, "s", "tb.double(21)").value == "42"


def test_setsid_processes_do_not_outlive_a_rollback(repl):
    ok(repl, "tree", "import subprocess")
    # A timeout long enough for Popen to return on a loaded machine: the
    # sleeper must exist before the cell is killed.
    r = repl.run("tree", "p = subprocess.Popen(['sleep', '300'], start_new_session=True)\nwhile True: pass",
                 timeout=5)
    assert not r.ok
    # The session's keeper swept them before the next cell ran (the sandbox's
    # /proc shows only its own processes).
    alive_sleepers = ok(repl, "tree", "import os; [p for p in os.listdir('/proc') if p.isdigit() and open(f'/proc/{p}/comm').read().strip() == 'sleep']").value
    assert alive_sleepers == "[]", alive_sleepers


def test_interrupt_of_a_sandboxed_cell(repl, host_dirs):
    fifo = host_dirs["out"] / "started"
    os.mkfifo(fifo)
    try:
        ok(repl, "intr", "kept = 1")
        results = []
        cell = "kept = 2\nimport os\nos.close(os.open('/out/started', os.O_WRONLY))\nwhile True: pass"
        runner = threading.Thread(target=lambda: results.append(repl.run("intr", cell)))
        runner.start()
        os.close(os.open(fifo, os.O_RDONLY))  # returns once the cell has opened it
        repl.interrupt("intr")
        runner.join(timeout=30)
        assert not runner.is_alive()
        assert (results[0].outcome, results[0].exit_code) == (dolsot.Outcome.INTERRUPTED, 130)
        assert ok(repl, "intr", "kept").value == "1"
    finally:
        fifo.unlink()


def test_worker_and_sessions_die_with_the_repl():
    r = dolsot.Repl(store=MemoryStore(), typecheck=False, sandbox=Sandbox())
    ok(r, "a", "import subprocess; p = subprocess.Popen(['sleep', '300'], start_new_session=True)")
    worker = r.worker_pid
    tree = descendants(worker)
    assert len(tree) >= 3, tree
    r.close()
    assert not alive(worker)
    assert not [p for p in tree if alive(p)]


def _pids_cgroup_base() -> str | None:
    """This process's directory in the cgroup v1 pids hierarchy (where a
    root host makes its workers' dolsot-sandbox-<pid>), None without one."""
    with open("/proc/self/cgroup") as f:
        for line in f:
            _, controllers, path = line.rstrip("\n").split(":", 2)
            if "pids" in controllers.split(","):
                base = "/sys/fs/cgroup/pids" + path.rstrip("/")
                return base if os.path.exists(base + "/cgroup.procs") else None
    return None


def _cgroup_members(directory: str) -> list[int]:
    with open(f"{directory}/cgroup.procs") as f:
        return [int(pid) for pid in f.read().split()]


KILLED_HOST = """
import sys
sys.path.insert(0, {path!r})
import dolsot
from dolsot.store import MemoryStore
r = dolsot.Repl(store=MemoryStore(), typecheck=False, sandbox=dolsot.Sandbox())
r.run("s", "1")
print(r.worker_pid, flush=True)
sys.stdin.read()
"""


@pytest.mark.timeout(120)
def test_a_killed_host_s_cgroup_is_swept_by_the_next_start_and_a_live_worker_s_is_not(repl):
    base = _pids_cgroup_base()
    if os.geteuid() != 0 or base is None:
        pytest.skip("a root host's pids cgroups: needs root and a cgroup v1 pids controller")
    live = f"{base}/dolsot-sandbox-{repl.worker_pid}"
    assert repl.worker_pid in _cgroup_members(live)
    # A host killed with SIGKILL never removes its worker's directory.
    path = os.path.dirname(os.path.dirname(dolsot.__file__))
    host = subprocess.Popen([sys.executable, "-c", KILLED_HOST.format(path=path)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    worker = int(host.stdout.readline())
    stale = f"{base}/dolsot-sandbox-{worker}"
    assert worker in _cgroup_members(stale)
    host.kill()
    host.wait()
    # Its worker and everything in the cgroup die with it (a process forked
    # just before is listed the next time round).
    while members := _cgroup_members(stale):
        for pid in members:
            wait_until_gone(pid)
    # Left behind, empty (unless a concurrent root host's start swept it already).
    try:
        r = dolsot.Repl(store=MemoryStore(), typecheck=False, sandbox=Sandbox())
        try:
            ok(r, "a", "1")
            assert not os.path.exists(stale), "the stale directory outlived the next start"
            assert os.path.isdir(f"{base}/dolsot-sandbox-{r.worker_pid}")
        finally:
            r.close()
        assert not os.path.exists(f"{base}/dolsot-sandbox-{r.worker_pid}")
        # The live worker's directory stayed, with the worker in it, capped.
        assert repl.worker_pid in _cgroup_members(live)
        with open(f"{live}/pids.max") as f:
            assert f.read().strip() == "129"
        assert ok(repl, "warm", "2").value == "2"
    finally:
        if os.path.isdir(stale):
            os.rmdir(stale)


# ---------------------------------------------------------------- as another user


@pytest.fixture
def world_readable_dir():
    import tempfile
    path = tempfile.mkdtemp(prefix="dolsot-unpriv-", dir="/tmp")
    os.chmod(path, 0o755)
    yield __import__("pathlib").Path(path)
    shutil.rmtree(path, ignore_errors=True)


def test_unprivileged_host(world_readable_dir):
    tmp_path = world_readable_dir
    if os.geteuid() != 0:
        pytest.skip("needs root to create the unprivileged user")
    python = "/usr/bin/python3"
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    if not os.path.exists(python) or not os.path.exists(useradd):
        pytest.skip("no system python3 or useradd here")
    user = "dolsotsbx"
    if subprocess.run(["id", user], capture_output=True).returncode != 0:
        subprocess.run([useradd, "--no-create-home", "--shell", "/usr/sbin/nologin", user], check=True)
    uid = pwd.getpwnam(user).pw_uid
    work = tmp_path / "unpriv"
    work.mkdir()
    os.chown(work, uid, -1)
    ov = tmp_path / "ov"
    ov.mkdir()
    (ov / "host.txt").write_text("host\n")
    os.chmod(ov, 0o755)
    # The user's own directory (the overlay keeps the host's permissions).
    # (Copy-up keeps a file's owner and group: both must be the user's.)
    gid = pwd.getpwnam(user).pw_gid
    os.chown(ov, uid, gid)
    os.chown(ov / "host.txt", uid, gid)
    package = os.path.dirname(os.path.dirname(dolsot.__file__))
    site = [p for p in sys.path if p.endswith("site-packages")]
    script = work / "host.py"
    script.write_text(textwrap.dedent(f"""
        import os, dolsot
        from dolsot import Sandbox
        from dolsot.store import MemoryStore
        os.environ["DOLSOT_ESCAPE_SECRET"] = {SECRET!r}
        from dolsot import Mount
        r = dolsot.Repl(store=MemoryStore(), typecheck=False,
                        sandbox=Sandbox(mounts=[Mount("/ov", {str(ov)!r}, "overlay")]))
        res = r.run("s", "import os; (os.getuid(), 'DOLSOT_ESCAPE_SECRET' in os.environ, os.path.exists('/etc/shadow'))")
        print("RESULT", res.ok, res.value, res.error)
        w = r.run("s", "import os; open('/ov/host.txt', 'a').write('x'); open('/ov/new.txt', 'w').write('n'); os.remove('/ov/host.txt'); os.listdir('/ov')")
        print("OVERLAY", w.ok, w.value, w.error)
        print("REPORT", r.sandbox_report())
        r.close()
    """))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join([package, *site]),
           "DOLSOT_CACHE_DIR": str(work / "cache"), "HOME": str(work)}
    p = subprocess.run([shutil.which("runuser") or "/usr/sbin/runuser", "-u", user, "--", python, str(script)], env=env, cwd=work,
                       capture_output=True, text=True, timeout=120)
    if "No module named" in p.stderr or "undefined symbol" in p.stderr:
        pytest.skip("the build's extension does not load in the system python: " + p.stderr[-300:])
    assert p.returncode == 0, p.stderr
    assert f"RESULT True ({uid}, False, False)" in p.stdout, p.stdout + p.stderr
    assert "[on ] seccomp" in p.stdout and "[on ] user-namespace" in p.stdout, p.stdout
    assert "[on ] session-walls" in p.stdout, p.stdout
    assert "OVERLAY True ['new.txt']" in p.stdout, p.stdout
    assert "[on ] overlay: /ov" in p.stdout, p.stdout
    assert sorted(os.listdir(ov)) == ["host.txt"] and (ov / "host.txt").read_text() == "host\n"


# ---------------------------------------------------------------- the command


def _cli():
    build = os.environ.get("DOLSOT_BUILD_DIR", os.path.join(os.path.dirname(REPO_README), "build"))
    path = os.path.join(build, "cli", "dolsot")
    if not os.path.exists(path):
        pytest.fail(f"{path} is not built (cmake --build build)", pytrace=False)
    return path


@pytest.fixture(params=["direct", "serve"])
def cli_env(request, tmp_path):
    """The CLI's environment, with the server off or on (test_serve.py has
    the server's own sandbox tests); a server started here is stopped."""
    env = {**os.environ, "DOLSOT_CACHE_DIR": str(tmp_path / "cache"),
           "DOLSOT_ESCAPE_SECRET": SECRET, "DOLSOT_TYPECHECK": "0",
           "DOLSOT_SERVE": "1" if request.param == "serve" else "0"}
    yield env
    stop = subprocess.run([_cli(), "serve", "--stop", "--json"], env=env, capture_output=True,
                          text=True, timeout=180)
    assert stop.returncode == 0, stop.stderr
    assert ('"stopped":true' in stop.stdout) == (request.param == "serve"), stop.stdout


def test_cli_sandbox_check_and_run(host_dirs, cli_env, tmp_path):
    env = cli_env
    check = subprocess.run([_cli(), "--sandbox", "--check"], env=env, capture_output=True,
                           text=True, timeout=60)
    assert check.returncode == 0, check.stderr
    for name in LAYERS:
        assert f"[on ] {name}" in check.stdout, check.stdout
    run = subprocess.run(
        [_cli(), "--sandbox", "--mount", f"/data={host_dirs['data']}", "--memory", "512",
         "--session", "cli", "import os; (open('/data/hello.txt').read(), "
         "'DOLSOT_ESCAPE_SECRET' in os.environ, os.path.exists('/etc/shadow'))"],
        env=env, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "('hello from the host\\n', False, False)" in run.stdout, run.stdout
    # DOLSOT_SANDBOX=1 turns it on; a mount without it is a usage error.
    on = subprocess.run([_cli(), "--session", "cli2", "open('/etc/passwd').read()"],
                        env={**env, "DOLSOT_SANDBOX": "1"}, capture_output=True, text=True, timeout=60)
    assert on.returncode == 1 and "FileNotFoundError" in on.stderr, (on.stdout, on.stderr)
    bad = subprocess.run([_cli(), "--mount", "/x=/tmp", "--session", "c", "1"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "need --sandbox" in bad.stderr, bad.stderr
    assert "[off] overlay: no overlay mount asked" in check.stdout, check.stdout
    ov = tmp_path / "ov"
    ov.mkdir()
    (ov / "a.txt").write_text("host a")
    overlay = subprocess.run(
        [_cli(), "--sandbox", "--mount", f"/x={ov}:overlay", "--session", "c",
         "import os; open('/x/a.txt', 'w').write('cell'); open('/x/b.txt', 'w').write('b'); "
         "(open('/x/a.txt').read(), sorted(os.listdir('/x')))"],
        env=env, capture_output=True, text=True, timeout=60)
    assert overlay.returncode == 0, overlay.stderr
    assert "('cell', ['a.txt', 'b.txt'])" in overlay.stdout, overlay.stdout
    assert sorted(os.listdir(ov)) == ["a.txt"] and (ov / "a.txt").read_text() == "host a"
    check_ov = subprocess.run([_cli(), "--sandbox", "--mount", f"/x={ov}:overlay", "--check"],
                              env=env, capture_output=True, text=True, timeout=60)
    assert check_ov.returncode == 0 and f"[on ] overlay: /x" in check_ov.stdout, (check_ov.stdout, check_ov.stderr)
