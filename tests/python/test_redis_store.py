"""RedisStore against a real redis-server: what the contract suite in
test_core.py does not cover (atomic saves, TTL, prefixes), the faults (Redis
stopped, restarted, full; damaged and wrongly signed blobs), the lease and the
Repl's release hook, and two hosts sharing one store with a failover."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import dolsot
from dolsot import Repl
from dolsot.store import RedisStore, SessionLeased
from process_tree import alive, children

KEY_A = "a" * 32
KEY_B = "b" * 32


@pytest.fixture
def make_store(redis_server, redis_prefix):
    """RedisStore factory on the shared server and this test's prefix; every
    store made is closed at teardown."""
    made = []

    def make(**kwargs):
        kwargs.setdefault("prefix", redis_prefix)
        store = RedisStore(kwargs.pop("url", redis_server.url), **kwargs)
        made.append(store)
        return store

    yield make
    for store in made:
        store.close()


def _sync_repl(store, **kwargs):
    return Repl(store=store, typecheck=False, checkpoint="sync", **kwargs)


def _lease_threads():
    return [t for t in threading.enumerate() if t.name == "dolsot-redis-lease"]


# ------------------------------------------------------------------ basics


def test_import_dolsot_does_not_need_redis():
    code = "import sys, dolsot, dolsot.store; assert 'redis' not in sys.modules, 'redis imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_reader_never_sees_a_torn_blob(make_store):
    store = make_store()
    blobs = [b"a" * 1_000_000, b"b" * 2_000_000]
    store.save("s", blobs[0])
    stop = threading.Event()

    def writer():
        i = 0
        while not stop.is_set():
            i += 1
            store.save("s", blobs[i % 2])

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        for _ in range(50):
            assert store.load("s") in blobs
            assert store.list()[0].size_bytes in (1_000_000, 2_000_000)
    finally:
        stop.set()
        thread.join()


def test_ttl_is_enforced_by_redis(make_store, redis_server, redis_prefix):
    client = redis_server.client()
    make_store(ttl_days=2).save("kept", b"x")
    ttl = client.ttl(f"{redis_prefix}s:{{kept}}")
    assert 86400 < ttl <= 2 * 86400
    make_store(ttl_days=0).save("forever", b"x")
    assert client.ttl(f"{redis_prefix}s:{{forever}}") == -1  # no expiry


def test_delete_all_wipes_only_its_own_prefix(make_store, redis_prefix):
    mine, other = make_store(), make_store(prefix=redis_prefix + "other:")
    mine.save("a", b"1")
    mine.save("b", b"2")
    other.save("a", b"3")
    assert mine.delete("all") == 2
    assert mine.list() == []
    assert other.load("a") == b"3"


def test_a_prefix_with_glob_characters_lists_only_its_own(make_store, redis_prefix):
    star = make_store(prefix=redis_prefix + "*:")
    plain = make_store(prefix=redis_prefix + "x:")
    plain.save("p", b"1")
    star.save("s", b"2")
    assert [i.id for i in star.list()] == ["s"]


def test_a_short_hmac_key_is_a_config_error(make_store):
    with pytest.raises(dolsot.ConfigError, match="at least 16 bytes"):
        make_store(hmac_key="short")


# ------------------------------------------------------------------ faults


def test_redis_stuck_during_a_save_fails_the_save_not_the_cell(own_redis_server, redis_prefix):
    server = own_redis_server

    class StuckOnSave(RedisStore):
        def save(self, sid, blob):
            server.pause()  # Redis stops answering while the save is in flight
            try:
                return super().save(sid, blob)
            finally:
                server.resume()

    store = StuckOnSave(server.url, prefix=redis_prefix, timeout=0.5)
    repl = _sync_repl(store)
    result = repl.run("s", "x = 1\nx")
    assert result.ok and result.value == "1"
    assert "Redis" in result.save_error and "Timeout" in result.save_error
    assert "checkpoint not saved" in result.error
    # close() tries that state once more; Redis is still stuck, so it says so.
    with pytest.raises(dolsot.StoreError, match="s: .*Timeout"):
        repl.close()
    store.close()
    # Once Redis answers again, saves land.
    store = RedisStore(server.url, prefix=redis_prefix, timeout=0.5)
    with _sync_repl(store) as repl:
        result = repl.run("s", "x = 2")
        assert result.save_error is None
    with _sync_repl(store) as repl:
        assert repl.run("s", "x").value == "2"
    store.close()


def test_redis_restarted_cells_run_and_saves_resume(own_redis_server, redis_prefix):
    server = own_redis_server
    store = RedisStore(server.url, prefix=redis_prefix, timeout=0.5)
    with _sync_repl(store) as repl:
        assert repl.run("s", "x = 1").save_error is None
        server.stop()
        down = repl.run("s", "x += 1\nx")
        assert down.ok and down.value == "2"  # the cell ran; only its save failed
        assert "ConnectionError" in down.save_error
        server.start()  # an empty Redis (no persistence) on the same port
        back = repl.run("s", "x += 1\nx")
        assert back.value == "3" and back.save_error is None
    with _sync_repl(store) as repl:
        assert repl.run("s", "x").value == "3"
    store.close()


def test_a_full_redis_fails_the_save_and_saves_resume_when_memory_is_freed(make_store,
                                                                             redis_server):
    client = redis_server.client()
    store = make_store()
    with _sync_repl(store) as repl:
        assert repl.run("s", "x = 1").save_error is None
        used = client.info("memory")["used_memory"]
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", used + 200_000)
        try:
            full = repl.run("s", "big = 'y' * 2_000_000\nlen(big)")
            assert full.ok and full.value == "2000000"
            assert "OutOfMemoryError" in full.save_error
            assert "\n" not in full.save_error  # one line, no traceback
        finally:
            client.config_set("maxmemory", 0)
        assert repl.run("s", "x = 2").save_error is None
    with _sync_repl(store) as repl:
        assert repl.run("s", "(x, len(big))").value == "(2, 2000000)"


def test_a_damaged_blob_is_refused_never_restored(make_store, redis_server, redis_prefix):
    store = make_store()
    with _sync_repl(store) as repl:
        repl.run("s", "x = 1")
    store.release("s")
    key = f"{redis_prefix}s:{{s}}"
    client = redis_server.client()
    data = bytearray(client.hget(key, "data"))
    data[len(data) // 2] ^= 0xFF
    client.hset(key, "data", bytes(data))
    with pytest.raises(dolsot.StoreError, match="damaged: its SHA-256 digest does not match"):
        store.load("s")
    with _sync_repl(store) as repl:
        with pytest.raises(dolsot.StoreError, match="'s'.*damaged"):
            repl.run("s", "x")


def test_a_blob_moved_to_another_session_is_refused(make_store, redis_server, redis_prefix):
    # The digest covers the session id: a valid checkpoint of one session
    # cannot be planted as another's.
    store = make_store(hmac_key=KEY_A)
    store.save("victim", b"victim state")
    store.save("other", b"other state")
    client = redis_server.client()
    client.copy(f"{redis_prefix}s:{{other}}", f"{redis_prefix}s:{{victim}}", replace=True)
    with pytest.raises(dolsot.StoreError, match="signature does not match"):
        store.load("victim")


def test_a_blob_with_a_bad_hmac_is_refused(make_store):
    signer = make_store(hmac_key=KEY_A)
    with _sync_repl(signer) as repl:
        repl.run("s", "x = 1")
    signer.release("s")
    with pytest.raises(dolsot.StoreError, match="signature does not match"):
        make_store(hmac_key=KEY_B).load("s")
    with pytest.raises(dolsot.StoreError, match="signed with a store key this host does not have"):
        make_store().load("s")
    with _sync_repl(make_store(hmac_key=KEY_B)) as repl:
        with pytest.raises(dolsot.StoreError, match="signature does not match"):
            repl.run("s", "x")


def test_an_unsigned_blob_is_refused_by_a_host_with_a_key(make_store, monkeypatch):
    make_store().save("s", b"unsigned")
    monkeypatch.setenv("DOLSOT_STORE_KEY", KEY_A)  # the key from the environment
    keyed = make_store()
    assert keyed.signed
    with pytest.raises(dolsot.StoreError, match="not signed with this host's store key"):
        keyed.load("s")


# ----------------------------------------------------------------- journal


def test_appends_go_to_the_journal_and_a_save_or_delete_empties_it(make_store, redis_server,
                                                                   redis_prefix):
    store = make_store(hmac_key=KEY_A)
    journal = f"{redis_prefix}j:{{s}}"
    client = redis_server.client()
    with pytest.raises(dolsot.StoreError, match="'s' has no checkpoint to append to"):
        store.append("s", b"+1")
    assert not client.exists(journal)
    store.save("s", b"base")
    store.append("s", b"+1")
    store.append("s", b"+2")
    assert store.load("s") == b"base+1+2"
    assert client.llen(journal) == 2
    # Listed at the size load returns, as a FileStore lists its file.
    assert [(i.id, i.size_bytes) for i in store.list()] == [("s", len(b"base+1+2"))]
    store.save("s", b"new")  # the new blob's journal starts empty
    assert store.load("s") == b"new" and not client.exists(journal)
    assert [(i.id, i.size_bytes) for i in store.list()] == [("s", 3)]
    store.append("s", b"+3")
    assert store.delete("s") == 1
    assert not client.exists(journal) and store.load("s") is None
    other = make_store(hmac_key=KEY_A)
    store.save("t", b"base")
    assert store.load("t") == b"base"  # leased to `store`
    with pytest.raises(SessionLeased):
        other.append("t", b"+1")
    assert store.load("t") == b"base"


def test_a_damaged_or_moved_journal_item_is_refused(make_store, redis_server, redis_prefix):
    store = make_store(hmac_key=KEY_A)
    client = redis_server.client()
    for sid in ("s", "t"):
        store.save(sid, b"base")
        store.append(sid, b"+" + sid.encode())
    # A frame of another session: its signature covers the session id.
    client.rpush(f"{redis_prefix}j:{{s}}", client.lindex(f"{redis_prefix}j:{{t}}", 0))
    with pytest.raises(dolsot.StoreError, match="journal of session 's'.*item 2's signature"):
        store.load("s")
    item = bytearray(client.lindex(f"{redis_prefix}j:{{t}}", 0))
    item[-1] ^= 0x01
    client.lset(f"{redis_prefix}j:{{t}}", 0, bytes(item))
    with pytest.raises(dolsot.StoreError, match="journal of session 't'.*item 1's signature"):
        store.load("t")


def test_binding_cells_reach_another_host_through_the_journal(make_store, redis_server,
                                                              redis_prefix):
    store = make_store()
    client = redis_server.client()
    repl = Repl(store=store, typecheck=False, checkpoint_delay=0.2)
    try:
        assert repl.run("s", "blob = b'x' * 1_000_000; x = 0").ok
        repl.sessions()  # its checkpoint has landed
        base = client.hget(f"{redis_prefix}s:{{s}}", "data")
        for _ in range(3):
            assert repl.run("s", "x += 1").ok
        give_up = time.monotonic() + 30
        while not client.exists(f"{redis_prefix}j:{{s}}") and time.monotonic() < give_up:
            time.sleep(0.02)  # polling Redis for the frame the timer appends
        assert client.llen(f"{redis_prefix}j:{{s}}") == 1
        assert client.hget(f"{redis_prefix}s:{{s}}", "data") == base  # no new 1 MB blob
    finally:
        repl.close()
    with _sync_repl(make_store()) as elsewhere:
        assert elsewhere.run("s", "x, len(blob)").value == "(3, 1000000)"


def test_general_path_cells_reach_another_host_as_delta_frames(make_store, redis_server,
                                                                redis_prefix):
    # Each cell may change anything (it calls the session's own code), so
    # its checkpoint holds the whole state, as a delta against the 2 MB base:
    # the journal gets kilobytes, and the blob stays.
    client = redis_server.client()
    with _sync_repl(make_store()) as repl:
        assert repl.run("s", "import os; blob = b'x' * 2_000_000; rows = []").ok
        base = client.hget(f"{redis_prefix}s:{{s}}", "data")
        for i in range(3):
            # A module as a default: the general path (read_only_cell.h).
            assert repl.run("s", f"def add(_os=os):\n    rows.append({i})\nadd()").ok
        items = client.lrange(f"{redis_prefix}j:{{s}}", 0, -1)
        assert [item[32:36] for item in items] == [b"DJND"] * 3  # digest, then the frame
        assert sum(len(item) for item in items) < 64 * 1024
        assert client.hget(f"{redis_prefix}s:{{s}}", "data") == base
    with _sync_repl(make_store()) as elsewhere:
        assert elsewhere.run("s", "rows, len(blob), add.__name__").value == \
            "([0, 1, 2], 2000000, 'add')"


# ------------------------------------------------------------------- lease


def test_a_leased_session_is_refused_to_another_store_until_released(make_store):
    a, b = make_store(), make_store()
    a.save("s", b"from a")
    assert a.load("s") == b"from a"
    for call in (lambda: b.load("s"), lambda: b.save("s", b"x"), lambda: b.delete("s")):
        with pytest.raises(SessionLeased, match=f"'s' is leased by another host \\({a.token}\\)"):
            call()
    assert isinstance(SessionLeased("x"), dolsot.SessionBusy)
    a.release("s")
    assert b.load("s") == b"from a"
    with pytest.raises(SessionLeased):
        a.save("s", b"late write from a")  # a gave it up: its late write is refused
    assert b.load("s") == b"from a"


def test_the_lease_is_renewed_while_held_and_the_thread_stops_at_close(make_store, redis_server,
                                                                      redis_prefix):
    before = _lease_threads()
    store = make_store(lease_seconds=0.6)
    store.load("s")
    assert len(_lease_threads()) == len(before) + 1
    client = redis_server.client()
    key = f"{redis_prefix}lease:{{s}}"
    # Wait for two periods' worth of renewals: the lease outlives its period.
    deadline = time.monotonic() + 30
    first = time.monotonic()
    while time.monotonic() - first < 1.5:
        assert client.get(key) == store.token.encode()
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert store.held() == ["s"]
    store.close()
    assert client.get(key) is None  # close releases
    assert _lease_threads() == before


def test_a_second_repl_gets_session_busy_until_the_first_lets_go(make_store):
    host_a, host_b = make_store(), make_store()
    repl_a = _sync_repl(host_a)
    assert repl_a.run("s", "x = 1").ok
    with _sync_repl(host_b) as repl_b:
        with pytest.raises(dolsot.SessionBusy, match="leased by another host"):
            repl_b.run("s", "x")
        repl_a.close()  # the session leaves host A: the Repl releases it
        assert repl_b.run("s", "x").value == "1"


def test_the_repl_releases_a_session_it_evicts_or_resets(make_store):
    host_a, host_b = make_store(), make_store()
    with _sync_repl(host_a, max_live_sessions=1) as repl:
        repl.run("first", "x = 1")
        repl.run("second", "y = 2")  # evicts "first"
        assert host_a.held() == ["second"]
        assert host_b.load("first") is not None
        host_b.release("first")
        repl.reset("second")
        assert host_a.held() == []


class _RecordingStore:
    """A Python store with the optional release(sid) method."""

    def __init__(self):
        self.blobs, self.released = {}, []

    def load(self, sid):
        return self.blobs.get(sid)

    def save(self, sid, blob):
        self.blobs[sid] = blob

    def delete(self, sid):
        return 1 if self.blobs.pop(sid, None) is not None else 0

    def list(self):
        return []

    def release(self, sid):
        self.released.append(sid)


def test_release_is_called_when_a_session_leaves_the_host():
    store = _RecordingStore()
    repl = _sync_repl(store, max_live_sessions=1)
    repl.run("a", "x = 1")
    repl.run("b", "x = 2")  # "a" is evicted
    assert store.released == ["a"]
    repl.reset("b")
    assert store.released == ["a", "b"]
    repl.run("c", "x = 3")
    repl.close()
    assert "c" in store.released[2:]


# ---------------------------------------------------------- two hosts, failover


_HOST = textwrap.dedent("""
    import sys
    from dolsot import Repl
    from dolsot.store import RedisStore
    store = RedisStore(sys.argv[1], prefix=sys.argv[2], lease_seconds=1.0)
    assert store.signed  # DOLSOT_STORE_KEY
    repl = Repl(store=store, typecheck=False, checkpoint="sync")
    for code in ("x = 40", "x += 1", "def f(): return x + 1"):
        result = repl.run("moving", code)
        assert result.ok and result.save_error is None, result
    print("ready", flush=True)
    sys.stdin.read()  # until killed
""")


def test_a_session_moves_to_another_host_when_its_host_is_killed(redis_server, redis_prefix,
                                                                  monkeypatch):
    monkeypatch.setenv("DOLSOT_STORE_KEY", KEY_A)
    host_a = subprocess.Popen([sys.executable, "-c", _HOST, redis_server.url, redis_prefix],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert host_a.stdout.readline().strip() == "ready"
        workers = children(host_a.pid)
        store_b = RedisStore(redis_server.url, prefix=redis_prefix, lease_seconds=1.0)
        with _sync_repl(store_b) as host_b:
            # A is alive and renews its lease: B is refused, retryably.
            with pytest.raises(dolsot.SessionBusy, match="leased by another host"):
                host_b.run("moving", "f()")
            host_a.kill()
            host_a.wait()
            # A renews no more: its lease expires and B takes the session over.
            deadline = time.monotonic() + 60
            while True:
                try:
                    result = host_b.run("moving", "f()")
                    break
                except dolsot.SessionBusy:
                    assert time.monotonic() < deadline, "the dead host's lease never expired"
                    time.sleep(0.2)
            assert result.ok and result.value == "42"
            assert store_b.held() == ["moving"]
        store_b.close()
        # A's worker processes do not outlive it.
        deadline = time.monotonic() + 30
        while any(alive(p) for p in workers):
            assert time.monotonic() < deadline, f"host A's workers outlived it: {workers}"
            time.sleep(0.1)
    finally:
        if host_a.poll() is None:
            host_a.kill()
            host_a.wait()


def test_without_the_redis_client_the_error_says_what_to_install():
    code = ("import sys; sys.modules['redis'] = None\n"
            "from dolsot.store import RedisStore")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode != 0 and "pip install 'dolsot[redis]'" in out.stderr
