"""Core types through Python: Result, errors, session ids, configuration
precedence and bad values, and the session stores' protocol and security."""

from __future__ import annotations

import ast
import os
import re
import signal
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import dolsot
from dolsot import _dolsot
from dolsot.store import FileStore, MemoryStore, SessionInfo, SessionStore


def test_errors_form_one_hierarchy():
    for cls in (dolsot.InvalidSession, dolsot.InvalidToolbox, dolsot.ConfigError,
                dolsot.SessionBusy, dolsot.StoreError, dolsot.WorkerError):
        assert issubclass(cls, dolsot.DolsotError)
    assert issubclass(dolsot.InvalidSession, ValueError)


def _stub_class(name: str) -> ast.ClassDef:
    stub = Path(dolsot.__file__).parent / "_dolsot.pyi"
    tree = ast.parse(stub.read_text(encoding="utf-8"))
    return next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == name)


def test_result_stub_class_and_field_table_agree():
    # core/result_fields.h is the one list of Result's fields: the class's
    # attributes and keywords are made from it (_RESULT_FIELDS), and the stub
    # a type checker reads must say what the class does.
    table = _dolsot._RESULT_FIELDS
    runtime_attributes = {name for name, value in vars(dolsot.Result).items()
                          if isinstance(value, property)}
    assert runtime_attributes == set(table["attributes"]) | {"has_returned"}
    signature = dolsot.Result.__init__.__doc__.splitlines()[0]
    runtime_keywords = re.findall(r"(?:^|, )(\w+): ", signature.split("*, ", 1)[1])
    assert runtime_keywords == table["init"]

    stub = _stub_class("Result")
    stub_attributes = {node.name for node in stub.body if isinstance(node, ast.FunctionDef)
                       and any(isinstance(d, ast.Name) and d.id == "property"
                               for d in node.decorator_list)}
    assert stub_attributes == runtime_attributes, "bindings/dolsot/_dolsot.pyi's Result"
    init = next(node for node in stub.body
                if isinstance(node, ast.FunctionDef) and node.name == "__init__")
    assert not init.args.args[1:] and [a.arg for a in init.args.kwonlyargs] == table["init"]


def test_result_fields_and_text():
    r = dolsot.Result(ok=False, value=None, stdout="hi\n", error="ValueError: bad",
                      exit_code=1, held=["x"], dropped=["sock"])
    assert (r.ok, r.value, r.stdout, r.error, r.exit_code) == (False, None, "hi\n", "ValueError: bad", 1)
    assert r.held == ["x"] and r.dropped == ["sock"]
    assert r.text.startswith("hi\nValueError: bad\n")
    assert r.text.endswith("session now holds: x")


@pytest.mark.parametrize("bad", ["", "all", "../x", "a/b", "a\x00b", "a\nb", ".hidden", "-x", "x" * 129, "é"])
def test_bad_session_ids_are_refused(bad):
    with pytest.raises(dolsot.InvalidSession):
        _dolsot.validate_session_id(bad)


def test_good_session_ids_pass():
    for good in ("task-42", "a", "A.b_c-1", "x" * 128):
        _dolsot.validate_session_id(good)


def test_config_defaults(monkeypatch):
    for name in list(os.environ):
        if name.startswith("DOLSOT_"):
            monkeypatch.delenv(name)
    c = _dolsot.resolve_config()
    assert c["timeout"] == 20 and c["ttl_days"] == 7 and c["max_output"] == 100000
    assert c["typecheck"] is True and c["ty_bin"] == "ty"
    assert c["cache_dir"].endswith(f"/dolsot-{os.getuid()}/sessions")


def test_config_precedence(monkeypatch):
    monkeypatch.setenv("DOLSOT_TIMEOUT", "3")
    monkeypatch.setenv("DOLSOT_MAX_OUTPUT", "0")
    monkeypatch.setenv("DOLSOT_TYPECHECK", "0")
    c = _dolsot.resolve_config()
    assert c["timeout"] == 3 and c["max_output"] == 0 and c["typecheck"] is False
    c = _dolsot.resolve_config(timeout=1.5, max_output=10, typecheck=True)
    assert c["timeout"] == 1.5 and c["max_output"] == 10 and c["typecheck"] is True


@pytest.mark.parametrize("name,value", [
    ("DOLSOT_TIMEOUT", "abc"), ("DOLSOT_TIMEOUT", "-1"), ("DOLSOT_SESSION_TTL_DAYS", "-1"),
    ("DOLSOT_SESSION_TTL_DAYS", "soon"), ("DOLSOT_MAX_OUTPUT", "-3"), ("DOLSOT_TYPECHECK", "perhaps"),
])
def test_malformed_environment_is_an_error_naming_the_variable(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(dolsot.ConfigError, match=name):
        _dolsot.resolve_config()


@pytest.mark.parametrize("value", ["maybe", "2", "enabled"])
def test_a_malformed_dolsot_sandbox_is_an_error_not_a_sandbox(monkeypatch, value):
    # Once: any value but "" and "0" silently turned the default Sandbox on.
    monkeypatch.setenv("DOLSOT_SANDBOX", value)
    with pytest.raises(dolsot.ConfigError, match=f"DOLSOT_SANDBOX='{value}'"):
        dolsot.Repl()


@pytest.mark.parametrize("value,on", [("", False), ("0", False), ("off", False), ("1", True),
                                      ("Yes", True)])
def test_dolsot_sandbox_reads_as_a_flag(value, on):
    assert _dolsot._parse_flag("DOLSOT_SANDBOX", value) is on


def test_explicit_bad_values_are_errors():
    with pytest.raises(dolsot.ConfigError):
        _dolsot.resolve_config(timeout=0)
    with pytest.raises(dolsot.ConfigError):
        _dolsot.resolve_config(ttl_days=-2)


def _redis_store(request):
    from dolsot.store import RedisStore

    store = RedisStore(request.getfixturevalue("redis_server").url,
                       prefix=request.getfixturevalue("redis_prefix"))
    request.addfinalizer(store.close)
    return store


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda request: MemoryStore(), id="memory"),
        pytest.param(lambda request: FileStore(None), id="file"),
        pytest.param(_redis_store, id="redis"),
    ],
)
def test_store_protocol(make, request, tmp_path, monkeypatch):
    monkeypatch.setenv("DOLSOT_CACHE_DIR", str(tmp_path / "cache"))
    store = make(request)
    assert isinstance(store, SessionStore)
    assert store.load("s1") is None
    store.save("s1", b"\x00blob")
    store.save("s2", b"")
    assert store.load("s1") == b"\x00blob"
    infos = store.list()
    assert [i.id for i in infos] == ["s1", "s2"]
    assert isinstance(infos[0], SessionInfo) and infos[0].size_bytes == 5 and infos[0].last_used > 0
    assert store.delete("s1") == 1
    assert store.delete("s1") == 0
    assert store.delete("all") == 1
    assert store.list() == []
    with pytest.raises(dolsot.InvalidSession):
        store.save("../x", b"")


def test_file_store_uses_cache_dir_and_is_private(tmp_path, monkeypatch):
    monkeypatch.setenv("DOLSOT_CACHE_DIR", str(tmp_path / "deep" / "sessions"))
    store = FileStore()
    assert store.path == str(tmp_path / "deep" / "sessions")
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o700
    explicit = FileStore(str(tmp_path / "other"), ttl_days=0)
    assert explicit.path == str(tmp_path / "other") and explicit.ttl_days == 0


def test_file_store_refuses_symlinked_directory(tmp_path):
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    with pytest.raises(dolsot.StoreError, match="symlink"):
        FileStore(str(tmp_path / "link"))


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown to another user")
def test_file_store_refuses_foreign_owner(tmp_path):
    d = tmp_path / "foreign"
    d.mkdir(mode=0o700)
    os.chown(d, 65534, 65534)
    with pytest.raises(dolsot.StoreError, match="owned by uid 65534"):
        FileStore(str(d))


def test_file_store_refuses_a_parent_writable_by_others(tmp_path):
    parent = tmp_path / "shared"
    parent.mkdir()
    parent.chmod(0o777)
    with pytest.raises(dolsot.StoreError, match=f"{parent} is writable by other users"):
        FileStore(str(parent / "sessions"))
    assert not (parent / "sessions").exists()


def test_file_store_default_layout_refuses_a_parent_made_by_someone_else(tmp_path, monkeypatch):
    """{tempdir}/dolsot-{uid} made first by another user (theirs, or open to
    all) could let them swap the sessions directory: refused, never used."""
    monkeypatch.delenv("DOLSOT_CACHE_DIR", raising=False)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    tmp_path.chmod(0o1777)
    parent = tmp_path / f"dolsot-{os.getuid()}"
    parent.mkdir()
    parent.chmod(0o777)
    if os.geteuid() == 0:
        os.chown(parent, 65534, 65534)
    with pytest.raises(dolsot.StoreError, match=str(parent)):
        FileStore()
    assert not (parent / "sessions").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown to another user")
def test_file_store_refuses_a_parent_owned_by_another_user(tmp_path):
    parent = tmp_path / "theirs"
    parent.mkdir(mode=0o755)
    os.chown(parent, 65534, 65534)
    with pytest.raises(dolsot.StoreError, match=f"{parent} is owned by uid 65534"):
        FileStore(str(parent / "sessions"))


def test_file_store_sweeps_the_temp_file_of_a_writer_killed_mid_save(tmp_path):
    """A writer killed mid-save (by SIGXFSZ past its file size limit: no race)
    leaves its temporary file; the next listing removes it, its writer gone."""
    d = str(tmp_path / "s")
    store = FileStore(d)
    script = textwrap.dedent(f"""
        import resource, signal
        from dolsot.store import FileStore
        s = FileStore({d!r})
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL)  # Python ignores it by default
        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))
        s.save("big", b"x" * (4 << 20))
    """)
    assert subprocess.run([sys.executable, "-c", script]).returncode == -signal.SIGXFSZ
    temps = [n for n in os.listdir(d) if n.endswith(".tmp")]
    assert len(temps) == 1 and os.path.getsize(os.path.join(d, temps[0])) == 1 << 20
    assert store.list() == []
    assert [n for n in os.listdir(d) if n.endswith(".tmp")] == []


def test_file_store_shared_by_processes(tmp_path):
    """Two processes writing the same directory never see a torn session."""
    script = textwrap.dedent(f"""
        from dolsot.store import FileStore
        s = FileStore({str(tmp_path / 'shared')!r})
        import sys
        tag = sys.argv[1].encode()
        for i in range(200):
            s.save("same", tag * 50000)
            blob = s.load("same")
            assert blob in (b"a" * 50000, b"b" * 50000), len(blob)
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script, tag]) for tag in "ab"]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]


def test_malformed_ttl_environment_refuses_file_store(monkeypatch, tmp_path):
    monkeypatch.setenv("DOLSOT_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("DOLSOT_SESSION_TTL_DAYS", "-1")
    with pytest.raises(dolsot.ConfigError, match="DOLSOT_SESSION_TTL_DAYS"):
        FileStore()


@pytest.mark.parametrize("make, argument", [
    (lambda: dolsot.Repl(timeout="5"), "timeout"),
    (lambda: dolsot.Repl(timeout=True), "timeout"),
    (lambda: dolsot.Repl(max_output=1.5), "max_output"),
    (lambda: dolsot.Repl(snapshots="yes"), "snapshots"),
    (lambda: dolsot.Repl(checkpoint=1), "checkpoint"),
    (lambda: dolsot.Repl(max_live_sessions="8"), "max_live_sessions"),
    (lambda: dolsot.InProcessSession(timeout=[1]), "timeout"),
    (lambda: dolsot.InProcessSession(typecheck="no"), "typecheck"),
    (lambda: dolsot.InProcessSession(ty_bin=3), "ty_bin"),
])
def test_a_wrong_argument_type_names_the_argument_not_pybind11_internals(make, argument):
    with pytest.raises(TypeError) as raised:
        make()
    message = str(raised.value)
    assert message.startswith(f"{argument} must be "), message
    assert "worker_command" not in message and "incompatible" not in message
