"""Issue #36, the escape suite's second part: walls a cell cannot move.

1. A cell must not change what a later worker binds: a symlink (relative or
   absolute), a rename or a swapped directory planted in a read-write mount
   never redirects a bind, whether the policy names the path, reaches it
   through a host symlink, or another Sandbox planted it.
2. A checkpoint written under a Sandbox is restored only under walls at
   least as strong (or with an explicit opt-in), through the library, the
   CLI direct and through the server; a branch keeps the mark.
4. Only what Python needs is bound (not a host script's folder), and /proc
   shows nothing of the host's (its command line, keys, cgroup path).

Run as root here (CI); the unprivileged host's own case is at the end.
The first part of the suite is test_sandbox_escape.py."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import textwrap
import uuid

import pytest

import dolsot
from dolsot import Mount, Sandbox
from dolsot.errors import ConfigError, WeakerWalls
from dolsot.store import FileStore

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SECRET = "dolsot-walls-secret-" + uuid.uuid4().hex


def _cli():
    build = os.environ.get("DOLSOT_BUILD_DIR", os.path.join(REPO, "build"))
    path = os.path.join(build, "cli", "dolsot")
    if not os.path.exists(path):
        pytest.fail(f"{path} is not built (cmake --build build)", pytrace=False)
    return path


def ok(repl, sid, code, **kw):
    r = repl.run(sid, code, **kw)
    assert r.ok, (code, r.error, r.stdout)
    return r


def repl_with(tmp_path, *mounts, store=None, **kw):
    return dolsot.Repl(store=store or FileStore(str(tmp_path / "store")), typecheck=False,
                       timeout=30, sandbox=Sandbox(mounts=list(mounts), processes=64), **kw)


def _plant(repl, link_path, target):
    """A cell replaces `link_path` (inside a read-write mount) with a symlink."""
    ok(repl, "plant", textwrap.dedent(f"""
        import os
        p = {link_path!r}
        if os.path.lexists(p) and not os.path.islink(p):
            os.rename(p, p + '.moved')
        elif os.path.islink(p):
            os.remove(p)
        os.symlink({target!r}, p)
        os.readlink(p)
    """))


@pytest.fixture
def planted(tmp_path):
    """A host directory a Sandbox mounts read-write, in which a cell has put
    relative and absolute symlinks to the host's root where a later policy
    would find a directory."""
    rw = tmp_path / "rw"
    (rw / "inner").mkdir(parents=True)
    (rw / "inner" / "data.txt").write_text("inner data\n")
    depth = len(rw.parts)  # enough '..' to reach '/' from inside rw
    r = repl_with(tmp_path, Mount("/out", str(rw), "read-write"))
    try:
        _plant(r, "/out/inner", "/".join([".."] * (depth + 3)))
        _plant(r, "/out/absolute", "/")
        _plant(r, "/out/etc", "../" * (depth + 3) + "etc")
    finally:
        r.close()
    # What the cell left on the host: links that lead to the host's root.
    assert os.path.samefile(rw / "inner", "/") and os.path.samefile(rw / "absolute", "/")
    return rw


# ---------------------------------------------------------------- 1. binds


def test_a_mount_inside_a_read_write_mount_is_refused_where_the_sandbox_is_made(tmp_path):
    rw = tmp_path / "rw"
    (rw / "sub").mkdir(parents=True)
    with pytest.raises(ConfigError, match="lies inside the read-write mount /out"):
        Sandbox(mounts=[Mount("/out", str(rw), "read-write"), Mount("/data", str(rw / "sub"))])
    with pytest.raises(ConfigError, match="lies inside the read-write mount /out"):
        Sandbox(mounts=[Mount("/data", str(rw / "sub"), "overlay"), Mount("/out", str(rw), "read-write")])
    with pytest.raises(ConfigError, match="mount /out/sub lies inside the read-write mount /out"):
        Sandbox(mounts=[Mount("/out", str(rw), "read-write"), Mount("/out/sub", str(tmp_path))])
    # Holding a read-write mount is fine: nothing is looked up inside it.
    Sandbox(mounts=[Mount("/out", str(rw), "read-write"), Mount("/all", str(tmp_path))])


def test_a_mount_of_a_missing_host_path_is_refused_where_it_is_made(tmp_path):
    # Once a WorkerError at the first cell; now where the policy is made:
    # Sandbox(...) in Python, the flags in the CLI (a usage error, exit 2).
    missing = str(tmp_path / "nonexistent")
    with pytest.raises(ConfigError, match=f"mount /x: the host path '{missing}' does not exist"):
        Sandbox(mounts=[Mount("/x", missing)])
    with pytest.raises(ConfigError, match="does not exist"):
        Sandbox(mounts=[Mount("/ok", str(tmp_path)), Mount("/x", str(tmp_path / "a" / "b"), "overlay")])
    env = {**os.environ, "DOLSOT_CACHE_DIR": str(tmp_path / "cache"), "DOLSOT_TYPECHECK": "0"}
    for serve in ("0", "1"):
        p = subprocess.run([_cli(), "--sandbox", "--mount", f"/x={missing}:read-write",
                            "--session", "s", "print('ran')"],
                           env={**env, "DOLSOT_SERVE": serve}, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 2 and "does not exist" in p.stderr, (serve, p.returncode, p.stderr)
        assert p.stdout == ""
    subprocess.run([_cli(), "serve", "--stop"], env=env, capture_output=True, timeout=180)


def test_cli_refuses_a_mount_the_sandbox_would_not_show_as_a_usage_error(tmp_path):
    # Issue #41: each refusal known before the worker starts is exit 2 with
    # a message naming the mount and why, direct and through the server;
    # nothing runs (once: exit 1, a WorkerError from the worker's start).
    work, home, rw = tmp_path / "work", tmp_path / "home", tmp_path / "rw"
    cache = home / "cache"
    for d in (work / "sub", cache / "inner", rw / "inner"):
        d.mkdir(parents=True)
    (work / "file").write_text("x")
    (tmp_path / "link").symlink_to(work / "sub")
    (rw / "alias").symlink_to(rw / "inner")
    refused = [
        (f"/src={work}:overlay", ["mount /src would show", f"'{work}' is the working directory"]),
        (f"/src={work}", ["mount /src would show", "run from another directory"]),
        (f"/src={work}:read-write", ["mount /src would show", "working directory"]),
        (f"/c={cache}", ["mount /c would show", f"'{cache}' is dolsot's cache directory"]),
        (f"/c={cache / 'inner'}", [f"mount /c would show part of '{cache}'", "cache directory"]),
        (f"/h={home}:read-write", ["read-write mount /h would hold /h/cache",
                                   "cache directory"]),
        (f"/l={tmp_path / 'link'}", ["mount /l", "passes through the symlink"]),
        (f"/f={work / 'file'}:overlay", ["overlay mount /f", "is a file"]),
        (f"/d={rw / 'alias'}:read-write", ["read-write mount /d", "symlink"]),
    ]
    env = {**os.environ, "DOLSOT_CACHE_DIR": str(cache), "DOLSOT_TYPECHECK": "0"}
    try:
        for serve in ("0", "1"):
            for mount, says in refused:
                p = subprocess.run([_cli(), "--sandbox", "--mount", mount, "--session", "s",
                                    "print('ran')"], cwd=work, env={**env, "DOLSOT_SERVE": serve},
                                   capture_output=True, text=True, timeout=120)
                assert (p.returncode, p.stdout) == (2, ""), (serve, mount, p.returncode, p.stderr)
                assert p.stderr.startswith("dolsot: error: sandbox: "), (serve, mount, p.stderr)
                assert all(part in p.stderr for part in says), (serve, mount, p.stderr)
            # Holding the cwd and the cache is fine where nothing can move
            # them: they are hidden inside the mount.
            ok_run = subprocess.run([_cli(), "--sandbox", "--mount", f"/t={tmp_path}:overlay",
                                     "--session", f"ok{serve}",
                                     "import os; sorted(os.listdir('/t/work')), "
                                     "os.listdir('/t/home/cache')"],
                                    cwd=work, env={**env, "DOLSOT_SERVE": serve},
                                    capture_output=True, text=True, timeout=120)
            assert ok_run.returncode == 0, (serve, ok_run.stderr)
            assert ok_run.stdout == "([], [])\n", (serve, ok_run.stdout)
    finally:
        subprocess.run([_cli(), "serve", "--stop"], env=env, capture_output=True, timeout=180)


@pytest.mark.parametrize("name", ["inner", "absolute", "etc"])
def test_a_planted_symlink_never_becomes_a_bind(planted, tmp_path, name):
    # Another policy that names the planted path (read-only or read-write):
    # the path passes through a symlink, so nothing is bound; the error says
    # so where the Repl is made.
    for mode in ("read-only", "read-write", "overlay"):
        with pytest.raises(ConfigError) as refused:
            repl_with(tmp_path, Mount("/data", str(planted / name), mode))
        assert "symlink" in str(refused.value) and str(planted / name) in str(refused.value)


@pytest.mark.parametrize("mode", ["read-only", "read-write", "overlay"])
def test_a_symlink_planted_after_the_repl_was_made_never_becomes_a_bind(planted, tmp_path, mode):
    # The path was a directory when the Repl was made; a cell of another
    # sandbox then put a link to the host's root there, before this Repl's
    # worker started: the worker's own check refuses it.
    target = planted / f"later-{mode}"
    target.mkdir()
    r = repl_with(tmp_path, Mount("/data", str(target), mode))
    try:
        target.rmdir()
        target.symlink_to("/")
        res = r.run("s", "import os; sorted(os.listdir('/data'))")
        assert not res.ok, (mode, res.value)
        assert "symlink" in res.error and str(target) in res.error, res.error
    finally:
        r.close()


def test_the_store_inside_a_read_write_mount_is_refused(tmp_path, monkeypatch):
    # A cell could move the store's directory out from under what hides it.
    home = tmp_path / "home"
    cache = home / ".cache" / "dolsot"
    cache.mkdir(parents=True)
    monkeypatch.setenv("DOLSOT_CACHE_DIR", str(cache))
    with pytest.raises(ConfigError, match="must stay hidden"):
        dolsot.Repl(typecheck=False, timeout=30,
                    sandbox=Sandbox(mounts=[Mount("/home", str(home), "read-write")], processes=64))


def test_no_part_of_the_store_is_mounted_but_a_part_of_the_cwd_is(tmp_path, monkeypatch):
    # Inside the store's directory is other sessions' state: refused where
    # the Repl is made, in any mode. Inside the cwd is an ordinary mount.
    store_dir = tmp_path / "state"
    (store_dir / "sub").mkdir(parents=True)
    for mode in ("read-only", "read-write", "overlay"):
        with pytest.raises(ConfigError, match="would show part of"):
            dolsot.Repl(store=FileStore(str(store_dir)), typecheck=False,
                        sandbox=Sandbox(mounts=[Mount("/x", str(store_dir / "sub"), mode)],
                                        processes=64))
    (tmp_path / "work" / "data").mkdir(parents=True)
    (tmp_path / "work" / "data" / "a.txt").write_text("a")
    monkeypatch.chdir(tmp_path / "work")
    r = dolsot.Repl(store=FileStore(str(store_dir)), typecheck=False, timeout=30,
                    sandbox=Sandbox(mounts=[Mount("/data", str(tmp_path / "work" / "data"))],
                                    processes=64))
    try:
        assert ok(r, "s", "import os; os.listdir('/data')").value == "['a.txt']"
    finally:
        r.close()


def test_a_file_store_of_its_own_stays_outside_every_mount(tmp_path):
    # Not only the default store's directory: the Repl's own FileStore's.
    project = tmp_path / "project"
    store_dir = project / "state"
    store_dir.mkdir(parents=True)
    store = FileStore(str(store_dir))
    ok_repl = dolsot.Repl(store=store, typecheck=False, timeout=30,
                          sandbox=Sandbox(mounts=[Mount("/p", str(project))], processes=64))
    try:
        ok(ok_repl, "other", "secret = 'of another session'")
        ok_repl.close()  # its checkpoint is in the store now
        assert os.listdir(store_dir)
        reader = dolsot.Repl(store=store, typecheck=False, timeout=30,
                             sandbox=Sandbox(mounts=[Mount("/p", str(project))], processes=64))
        try:
            assert ok(reader, "s", "import os; os.listdir('/p/state')").value == "[]"
        finally:
            reader.close()
    finally:
        ok_repl.close()
    with pytest.raises(ConfigError, match="must stay hidden"):
        dolsot.Repl(store=store, typecheck=False, timeout=30,
                    sandbox=Sandbox(mounts=[Mount("/p", str(project), "read-write")], processes=64))


def test_cli_refuses_the_planted_path_direct_and_through_the_server(planted, tmp_path):
    for serve in ("0", "1"):
        env = {**os.environ, "DOLSOT_CACHE_DIR": str(tmp_path / f"cache{serve}"),
               "DOLSOT_TYPECHECK": "0", "DOLSOT_SERVE": serve}
        try:
            p = subprocess.run([_cli(), "--sandbox", "--mount", f"/data={planted / 'inner'}",
                                "--session", "s", "import os; os.listdir('/data')"],
                               env=env, capture_output=True, text=True, timeout=120)
            assert p.returncode != 0, (serve, p.stdout)
            assert "symlink" in p.stderr and "etc" not in p.stdout, (serve, p.stdout, p.stderr)
            bad = subprocess.run([_cli(), "--sandbox", "--mount", f"/out={planted}:read-write",
                                  "--mount", f"/data={planted / 'sub'}", "--session", "s", "1"],
                                 env=env, capture_output=True, text=True, timeout=120)
            assert bad.returncode == 2 and "lies inside the read-write mount" in bad.stderr, bad.stderr
        finally:
            subprocess.run([_cli(), "serve", "--stop"], env=env, capture_output=True, timeout=180)


# ---------------------------------------------------------------- 2. checkpoints


EVIL = textwrap.dedent("""
    import os
    class Evil:
        def __init__(self, path):
            self.path = path
        def __reduce__(self):
            return (os.system, ("touch " + self.path,))
    evil = Evil({marker!r})
""")


def _leave_evil(tmp_path, marker, sid="s", **kw):
    store = FileStore(str(tmp_path / "store"))
    r = repl_with(tmp_path, store=store, **kw)
    try:
        ok(r, sid, EVIL.format(marker=str(marker)))
        r.branch(sid, sid + "-branch")
        ok(r, sid + "-branch", "1")
    finally:
        r.close()  # checkpoints both
    assert not marker.exists()
    return store


def test_a_sandboxed_checkpoint_is_not_restored_without_the_sandbox(tmp_path):
    marker = tmp_path / "ran-on-the-host"
    store = _leave_evil(tmp_path, marker)
    for sid in ("s", "s-branch"):  # a branch keeps the mark
        plain = dolsot.Repl(store=store, typecheck=False, timeout=30)
        try:
            with pytest.raises(WeakerWalls, match=f"session '{sid}'.*no Sandbox.*accept_weaker_walls"):
                plain.run(sid, "1")
            assert not marker.exists()
        finally:
            plain.close()
    # The same Sandbox restores it: its pickle runs, inside the walls (the
    # host's path is not there: the command fails), and the session goes on.
    same = repl_with(tmp_path, store=store)
    try:
        assert ok(same, "s", "type(evil).__name__").value == "'int'"
    finally:
        same.close()
    assert not marker.exists()
    # The user's explicit choice takes it across (and the pickle runs: the
    # reason for the rule). The branch still holds its Evil.
    trusted = dolsot.Repl(store=store, typecheck=False, timeout=30, accept_weaker_walls=True)
    try:
        ok(trusted, "s-branch", "1")
    finally:
        trusted.close()
    assert marker.exists()


def test_weaker_walls_are_refused_and_stronger_ones_accepted(tmp_path):
    marker = tmp_path / "ran"
    data = tmp_path / "data"
    data.mkdir()
    store = _leave_evil(tmp_path, marker, sid="w")
    weaker = [Sandbox(network=True, processes=64), Sandbox(best_effort=True, processes=64),
              Sandbox(memory_mb=0, processes=64), Sandbox(processes=0),
              Sandbox(mounts=[Mount("/data", str(data))], processes=64)]
    for sandbox in weaker:
        r = dolsot.Repl(store=store, typecheck=False, timeout=30, sandbox=sandbox)
        try:
            with pytest.raises(WeakerWalls, match="weaker"):
                r.run("w", "1")
        finally:
            r.close()
    stronger = dolsot.Repl(store=store, typecheck=False, timeout=30,
                           sandbox=Sandbox(memory_mb=1024, processes=32))
    try:
        ok(stronger, "w", "x = 1")
    finally:
        stronger.close()
    # A stricter Repl does not make the session stricter to load: the
    # default Sandbox still takes it.
    again = repl_with(tmp_path, store=store)
    try:
        assert ok(again, "w", "x").value == "1"
    finally:
        again.close()
    assert not marker.exists()


def test_a_mount_in_a_freer_mode_is_weaker(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    store = FileStore(str(tmp_path / "store"))
    r = repl_with(tmp_path, Mount("/data", str(data)), store=store)
    try:
        ok(r, "m", "y = 2")
    finally:
        r.close()
    for mode in ("overlay", "read-write"):
        freer = repl_with(tmp_path, Mount("/data", str(data), mode), store=store)
        try:
            with pytest.raises(WeakerWalls, match=f"/data {mode}"):
                freer.run("m", "y")
        finally:
            freer.close()


def test_cli_keeps_the_walls_direct_and_through_the_server(tmp_path):
    marker = tmp_path / "cli-ran"
    for serve in ("0", "1"):
        env = {**os.environ, "DOLSOT_CACHE_DIR": str(tmp_path / f"cache{serve}"),
               "DOLSOT_TYPECHECK": "0", "DOLSOT_SERVE": serve}
        try:
            made = subprocess.run([_cli(), "--sandbox", "--session", "c",
                                   EVIL.format(marker=str(marker))],
                                  env=env, capture_output=True, text=True, timeout=120)
            assert made.returncode == 0, made.stderr
            plain = subprocess.run([_cli(), "--session", "c", "1"], env=env, capture_output=True,
                                   text=True, timeout=120)
            assert plain.returncode == 2, (serve, plain.stdout, plain.stderr)
            assert "--accept-weaker-walls" in plain.stderr, plain.stderr
            assert not marker.exists()
            walled = subprocess.run([_cli(), "--sandbox", "--session", "c", "type(evil).__name__"],
                                    env=env, capture_output=True, text=True, timeout=120)
            # Restored inside the walls: its pickle ran there, not on the host.
            assert walled.returncode == 0 and "'int'" in walled.stdout, walled.stderr
            assert not marker.exists()
            made = subprocess.run([_cli(), "--sandbox", "--session", "c",
                                   EVIL.format(marker=str(marker))],
                                  env=env, capture_output=True, text=True, timeout=120)
            assert made.returncode == 0, made.stderr
            taken = subprocess.run([_cli(), "--accept-weaker-walls", "--session", "c", "2"],
                                   env=env, capture_output=True, text=True, timeout=120)
            assert taken.returncode == 0 and "2" in taken.stdout, taken.stderr
            assert marker.exists()
            marker.unlink()
        finally:
            subprocess.run([_cli(), "serve", "--stop"], env=env, capture_output=True, timeout=180)


# ---------------------------------------------------------------- 4. what is bound


def test_a_host_script_folder_is_not_bound_but_its_toolbox_is(tmp_path, monkeypatch):
    project = tmp_path / "project"
    project.mkdir()
    (project / ".env").write_text(f"API_KEY={SECRET}\n")
    (project / "projtool.py").write_text("def f():\n    return 42\n")
    (project / "other.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(project))
    r = dolsot.Repl(inject={"pt": "projtool"}, store=FileStore(str(tmp_path / "store")),
                    typecheck=False, timeout=30, sandbox=Sandbox(processes=64))
    try:
        env = r.run("s", f"open({str(project / '.env')!r}).read()")
        assert not env.ok and "FileNotFoundError" in env.error, (env.value, env.error)
        assert SECRET not in (env.stdout or "") + (env.error or "")
        assert ok(r, "s", "pt.f()").value == "42"
        other = r.run("s", "import other")
        assert not other.ok and "ModuleNotFoundError" in other.error, other.error
        # Python's own still works: the standard library and site-packages.
        assert ok(r, "s", "import json, dill; json.dumps([1])").value == "'[1]'"
    finally:
        r.close()
        sys.modules.pop("projtool", None)


def test_proc_shows_nothing_of_the_hosts(tmp_path):
    with open("/proc/self/cgroup") as f:
        host_cgroup = f.read()
    r = repl_with(tmp_path)
    try:
        value = ok(r, "p", textwrap.dedent("""
            def read(path):
                try:
                    with open(path, 'rb') as f:
                        return f.read()
                except OSError as e:
                    return type(e).__name__
            {name: read('/proc/' + name) for name in
             ('cmdline', 'keys', 'key-users', 'kallsyms', 'timer_list', 'sched_debug', 'self/cgroup')}
        """)).value
        shown = eval(value)  # noqa: S307 - our own repr of bytes and str
        for name in ("cmdline", "keys", "key-users", "kallsyms", "timer_list", "sched_debug"):
            assert shown[name] in (b"", "FileNotFoundError", "PermissionError"), (name, shown[name])
        cgroup = shown["self/cgroup"]
        # The host's path to its cgroup (the worker's sits below it) is not shown.
        for line in host_cgroup.splitlines():
            path = line.split(":", 2)[-1]
            if path not in ("", "/"):
                assert path.encode() not in cgroup, (path, cgroup)
        assert b"dolsot-sandbox" not in cgroup, cgroup
        # And a cell cannot undo the masks.
        undo = r.run("p", "import ctypes; ctypes.CDLL(None).umount2(b'/proc/keys', 2)")
        assert ok(r, "p", "open('/proc/keys','rb').read()").value == "b''"
    finally:
        r.close()


def test_cli_binds_only_what_python_needs_and_masks_proc(tmp_path):
    # The CLI's worker starts from the caller's PYTHONPATH: a plain folder
    # on it is not shown (its .env stays on the host), nor the host's
    # /proc/cmdline or keys; direct and through the server.
    project = tmp_path / "project"
    project.mkdir()
    (project / ".env").write_text(f"API_KEY={SECRET}\n")
    code = textwrap.dedent(f"""
        import os
        def read(path):
            try:
                with open(path, 'rb') as f:
                    return len(f.read())
            except OSError as e:
                return type(e).__name__
        (read({str(project / '.env')!r}), read('/proc/cmdline'), read('/proc/keys'))
    """)
    for serve in ("0", "1"):
        env = {**os.environ, "DOLSOT_CACHE_DIR": str(tmp_path / f"cache{serve}"),
               "DOLSOT_TYPECHECK": "0", "DOLSOT_SERVE": serve,
               "PYTHONPATH": str(project) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        try:
            p = subprocess.run([_cli(), "--sandbox", "--session", "p", code], env=env,
                               capture_output=True, text=True, timeout=120)
            assert p.returncode == 0, (serve, p.stderr)
            assert "('FileNotFoundError', 0, 0)" in p.stdout, (serve, p.stdout)
        finally:
            subprocess.run([_cli(), "serve", "--stop"], env=env, capture_output=True, timeout=180)


# ---------------------------------------------------------------- as another user


def test_unprivileged_host_keeps_the_walls(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root to create the unprivileged user")
    python = "/usr/bin/python3"
    useradd = shutil.which("useradd") or "/usr/sbin/useradd"
    if not os.path.exists(python) or not os.path.exists(useradd):
        pytest.skip("no system python3 or useradd here")
    import tempfile
    work = __import__("pathlib").Path(tempfile.mkdtemp(prefix="dolsot-walls-", dir="/tmp"))
    try:
        os.chmod(work, 0o755)
        user = "dolsotsbx"
        if subprocess.run(["id", user], capture_output=True).returncode != 0:
            subprocess.run([useradd, "--no-create-home", "--shell", "/usr/sbin/nologin", user], check=True)
        uid, gid = pwd.getpwnam(user).pw_uid, pwd.getpwnam(user).pw_gid
        for d in ("home", "rw", "rw/inner"):
            (work / d).mkdir()
        for d in ("", "home", "rw", "rw/inner"):
            os.chown(work / d, uid, gid)
        package = os.path.dirname(os.path.dirname(dolsot.__file__))
        site = [p for p in sys.path if p.endswith("site-packages")]
        script = work / "home" / "host.py"
        script.write_text(textwrap.dedent(f"""
            import os, dolsot
            from dolsot import Mount, Sandbox
            from dolsot.errors import WeakerWalls
            from dolsot.store import FileStore
            store = FileStore({str(work / 'home' / 'store')!r})
            rw = {str(work / 'rw')!r}
            a = dolsot.Repl(store=store, typecheck=False,
                            sandbox=Sandbox(mounts=[Mount('/out', rw, 'read-write')]))
            res = a.run('s', "import os\\n"
                             "os.rename('/out/inner', '/out/x')\\n"
                             "os.symlink('../../../../../../..', '/out/inner')\\n"
                             "class E:\\n"
                             "    def __reduce__(self):\\n"
                             "        return (os.system, ('touch ' + {str(work / 'home' / 'ran')!r},))\\n"
                             "e = E()")
            print('PLANT', res.ok, res.error)
            a.close()
            try:
                b = dolsot.Repl(store=store, typecheck=False,
                                sandbox=Sandbox(mounts=[Mount('/data', rw + '/inner')]))
            except dolsot.ConfigError as error:  # refused where it is made
                print('BIND', False, 'symlink' in str(error))
            c = dolsot.Repl(store=store, typecheck=False)
            try:
                c.run('s', '1')
                print('RESTORE ran')
            except WeakerWalls:
                print('RESTORE refused')
            c.close()
            print('MARKER', os.path.exists({str(work / 'home' / 'ran')!r}))
        """))
        env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": ":".join([package, *site]),
               "DOLSOT_CACHE_DIR": str(work / "home" / "cache"), "HOME": str(work / "home")}
        p = subprocess.run([shutil.which("runuser") or "/usr/sbin/runuser", "-u", user, "--", python,
                            str(script)], env=env, cwd=work / "home", capture_output=True, text=True,
                           timeout=180)
        if "No module named" in p.stderr or "undefined symbol" in p.stderr:
            pytest.skip("the build's extension does not load in the system python: " + p.stderr[-300:])
        assert p.returncode == 0, p.stderr
        assert "PLANT True None" in p.stdout, p.stdout + p.stderr
        assert "BIND False True" in p.stdout, p.stdout + p.stderr
        assert "RESTORE refused" in p.stdout and "MARKER False" in p.stdout, p.stdout + p.stderr
    finally:
        shutil.rmtree(work, ignore_errors=True)
