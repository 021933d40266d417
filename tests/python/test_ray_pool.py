"""dolsot.ray.SessionPool on Ray in local mode over a real redis-server: 64
sessions on 4 actors with affinity and every state checked, an actor killed
mid-run whose sessions continue on others from the store, the Repl calls
(arun, sessions, reset), and no process left after shutdown. Cells travel over
the pool's direct channel (a unix socket, or TCP with its key checked), with
Ray's own calls as the fallback."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import stat
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing import connection as mpc

import pytest
from process_tree import open_fds, open_fds_left_over
import ray

import dolsot
from dolsot.errors import ConfigError
from dolsot.ray import SessionPool
from dolsot.ray_channel import Channel, ChannelLost
from dolsot import ray_pool
from dolsot.ray_pool import _Host
from dolsot.store import RedisStore
from process_tree import alive, children, descendants

REPL_OPTIONS = {"typecheck": False, "checkpoint": "sync"}


@pytest.fixture(scope="module")
def ray_local():
    """Ray on this machine only, kept light (2 CPUs, no dashboard)."""
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
             object_store_memory=80 * 1024 * 1024, _node_ip_address="127.0.0.1")
    yield
    if ray.is_initialized():
        ray.shutdown()


@pytest.fixture
def store(ray_local, redis_server, redis_prefix):
    s = RedisStore(redis_server.url, prefix=redis_prefix, hmac_key="k" * 32, lease_seconds=5)
    yield s
    s.close()


def _kill(actor):
    """Kills a pool actor and returns once its process is gone: ray.kill only
    asks, and a call sent before the process dies could still be answered."""
    pid = ray.get(actor.pid.remote())
    ray.kill(actor, no_restart=True)
    deadline = time.monotonic() + 30
    while alive(pid):
        assert time.monotonic() < deadline, f"actor process {pid} outlived ray.kill"
        time.sleep(0.01)


def _socket_dir(pool, sid):
    """The private directory of the unix socket `sid`'s actor listens on."""
    return os.path.dirname(pool._route(sid).channel.address)


def _run_all(pool, cells):
    """Runs [(sid, code)] from 16 threads; returns the Results in order."""
    with ThreadPoolExecutor(16) as threads:
        return list(threads.map(lambda cell: pool.run(*cell), cells))


def test_64_sessions_on_4_actors_keep_their_actor_and_their_state(store):
    sids = [f"s{i}" for i in range(64)]
    with SessionPool(4, store=store, repl_options=REPL_OPTIONS) as pool:
        assert all(r.ok for r in _run_all(pool, [(s, f"x = {i}") for i, s in enumerate(sids)]))
        placed = {sid: pool.actor_of(sid) for sid in sids}
        # Spread: each actor got 16 sessions.
        counts = {}
        for handle in placed.values():
            counts[handle] = counts.get(handle, 0) + 1
        assert sorted(counts.values()) == [16, 16, 16, 16]
        for step in ("x = x * 2", "x += 1"):
            results = _run_all(pool, [(s, step) for s in sids])
            assert all(r.ok and r.save_error is None for r in results)
        # Affinity: every session stayed on its actor.
        assert {sid: pool.actor_of(sid) for sid in sids} == placed
        values = _run_all(pool, [(s, "x") for s in sids])
        assert [r.value for r in values] == [str(2 * i + 1) for i in range(64)]
        assert isinstance(values[0], dolsot.Result)
        assert {info.id for info in pool.sessions()} == set(sids)


def test_64_sessions_on_2_actors_stay_live_the_limit_follows_what_each_is_given(store):
    sids = [f"g{i}" for i in range(64)]
    with SessionPool(2, store=store, repl_options=REPL_OPTIONS) as pool:
        assert [tuple(a) for a in pool.stats()] == [(0, 16, 0), (0, 16, 0)]  # a Repl's default
        assert all(r.ok for r in _run_all(pool, [(s, f"x = {i}") for i, s in enumerate(sids)]))
        assert all(r.ok for r in _run_all(pool, [(s, "x += 1") for s in sids]))
        stats = pool.stats()
        assert [(a.sessions, a.evictions) for a in stats] == [(32, 0), (32, 0)]
        assert all(a.max_live_sessions >= 32 for a in stats), stats  # this node has the memory
        values = _run_all(pool, [(s, "x") for s in sids])
        assert [r.value for r in values] == [str(i + 1) for i in range(64)]
        assert [a.evictions for a in pool.stats()] == [0, 0]
        # What the pool forgets, the actor does too; the limit stays.
        assert pool.reset("g0") == 1
        assert sorted(a.sessions for a in pool.stats()) == [31, 32]
        pool.reset("all")
        assert [a.sessions for a in pool.stats()] == [0, 0]


def test_an_explicit_limit_is_honoured_and_its_evictions_show_in_stats(store):
    with SessionPool(1, store=store, repl_options=REPL_OPTIONS, max_live_sessions=2) as pool:
        for i in range(5):
            assert pool.run(f"e{i}", f"x = {i}").ok
        from dolsot.ray import ActorStats

        assert pool.stats() == [ActorStats(sessions=5, max_live_sessions=2, evictions=3)]
        # Evicted sessions come back from the store, each evicting another.
        assert [pool.run(f"e{i}", "x").value for i in range(5)] == ["0", "1", "2", "3", "4"]
        assert pool.stats()[0].evictions == 3 + 5
    # The limit may come in repl_options too, as a Repl takes it.
    options = dict(REPL_OPTIONS, max_live_sessions=1)
    with SessionPool(1, store=store, repl_options=options, channel="ray") as pool:
        assert pool.run("f0", "1").ok and pool.run("f1", "1").ok
        assert pool.stats() == [(2, 1, 1)]


def test_the_limit_that_follows_the_sessions_stops_at_the_memory_ray_gives_an_actor(store):
    memory = 3 * ray_pool.SESSION_BYTES
    with SessionPool(1, store=store, repl_options=REPL_OPTIONS,
                     actor_options={"memory": memory}) as pool:
        assert pool.stats()[0].max_live_sessions == 3  # under a Repl's 16 already
        for i in range(5):
            assert pool.run(f"m{i}", f"x = {i}").ok
        assert pool.stats() == [(5, 3, 2)]
        assert [pool.run(f"m{i}", "x").value for i in range(5)] == ["0", "1", "2", "3", "4"]


class _LimitOnly:
    """What _LiveSizing touches of a Repl."""

    def __init__(self, limit):
        self.max_live_sessions = limit


def test_without_ray_s_memory_the_limit_grows_only_into_what_the_node_has_left(monkeypatch):
    mib = 1024 * 1024
    monkeypatch.setattr(ray_pool, "_total_memory", lambda: 1000 * mib)  # 100 MiB kept back
    sizing = ray_pool._LiveSizing(None, None)
    # Room for 3 sessions past the reserve once 16 are live; each session
    # live past those takes its share (the one just given is not live yet).
    monkeypatch.setattr(ray_pool, "_available_memory", lambda: 100 * mib + ray_pool.SESSION_BYTES * (
        3 - max(0, len(sizing.given) - 1 - 16)))
    repl = _LimitOnly(sizing.initial())
    assert repl.max_live_sessions == 16
    for i in range(24):
        sizing.give(f"n{i}", repl)
    assert repl.max_live_sessions == 19  # room for 3 more sessions than the 16
    monkeypatch.setattr(ray_pool, "_available_memory", lambda: 50 * mib)  # under the reserve
    sizing.give("n24", repl)
    assert repl.max_live_sessions == 19  # never lowered by memory, never raised past it
    monkeypatch.setattr(ray_pool, "_available_memory", lambda: None)  # unknown: a Repl's 16
    unknown = ray_pool._LiveSizing(None, None)
    other = _LimitOnly(unknown.initial())
    for i in range(20):
        unknown.give(f"u{i}", other)
    assert other.max_live_sessions == 16
    fixed = ray_pool._LiveSizing(4, None)
    pinned = _LimitOnly(fixed.initial())
    for i in range(10):
        fixed.give(f"f{i}", pinned)
    assert (pinned.max_live_sessions, len(fixed.given)) == (4, 10)


@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "8", 2**31])
def test_a_bad_live_session_limit_is_refused_before_any_actor_starts(store, bad):
    with pytest.raises(ConfigError, match="max_live_sessions .*must be an int >= 1") as raised:
        SessionPool(1, store=store, max_live_sessions=bad)
    assert repr(bad) in str(raised.value)
    with pytest.raises(ConfigError, match="max_live_sessions is given twice"):
        SessionPool(1, store=store, max_live_sessions=4, repl_options={"max_live_sessions": 4})


def test_a_killed_actor_s_sessions_resume_elsewhere_from_the_store(store):
    sids = [f"k{i}" for i in range(16)]
    with SessionPool(4, store=store, repl_options=REPL_OPTIONS) as pool:
        assert all(r.ok for r in _run_all(pool, [(s, f"x = {i}") for i, s in enumerate(sids)]))
        victim = pool.actor_of("k0")
        orphans = [s for s in sids if pool.actor_of(s) == victim]
        _kill(victim)
        # The run goes on: a cell sent to the dead actor reports WORKER_LOST
        # (it was killed between cells, so that cell did not run: send it again).
        results = _run_all(pool, [(s, "x += 100") for s in sids])
        lost = [s for s, r in zip(sids, results) if r.outcome == dolsot.Outcome.WORKER_LOST]
        assert set(lost) <= set(orphans) and lost, results
        assert all(r.ok for s, r in zip(sids, results) if s not in lost)
        assert all(r.ok for r in _run_all(pool, [(s, "x += 100") for s in lost]))
        for s in orphans:
            assert pool.actor_of(s) != victim
        assert victim not in pool.actors() and len(pool.actors()) == 4
        values = _run_all(pool, [(s, "x") for s in sids])
        assert [r.value for r in values] == [str(i + 100) for i in range(16)]


def test_an_actor_that_died_unnoticed_is_reported_by_sessions_and_close(store):
    pool = SessionPool(2, store=store, repl_options=REPL_OPTIONS)
    assert pool.run("quiet", "q = 1").ok
    victim = pool.actor_of("quiet")
    _kill(victim)
    assert "quiet" in {info.id for info in pool.sessions()}  # from the store
    assert victim not in pool.actors()
    assert pool.run("quiet", "q").value == "1"  # on another actor
    other = pool.actor_of("quiet")
    _kill(other)
    with pytest.raises(dolsot.StoreError, match="sessions quiet had died"):
        pool.close()
    pool.close()  # once


def test_arun_sessions_and_reset_behave_as_on_a_repl(store):
    with SessionPool(2, store=store, repl_options=REPL_OPTIONS) as pool:
        async def two():
            return await asyncio.gather(pool.arun("a", "v = 1\nv"), pool.arun("b", "w = 2\nw"))

        a, b = asyncio.run(two())
        assert (a.value, b.value) == ("1", "2")
        failing = pool.run("a", "1 / 0")
        assert not failing.ok and "ZeroDivisionError" in failing.error
        slow = pool.run("b", "while True: pass", timeout=0.5)
        assert slow.outcome == dolsot.Outcome.TIMEOUT and not slow.ok
        # The session outlived its timed-out cell; variables cross the channel.
        assert pool.run("b", "w + v", variables={"v": 5}).value == "7"
        assert [i.id for i in pool.sessions()] == ["a", "b"]
        assert pool.reset("a") == 1
        assert "NameError" in pool.run("a", "v").error  # a new, empty session
        assert pool.reset("all") == 2
        assert pool.sessions() == []
        with pytest.raises(dolsot.InvalidSession):
            pool.run("../x", "1")


def test_final_answers_and_figures_cross_from_the_actor(store):
    options = dict(REPL_OPTIONS, final="SUBMIT")
    with SessionPool(1, store=store, repl_options=options) as pool:
        plain = pool.run("f", "1 + 1")
        assert plain.ok and not plain.has_returned and plain.returned is None
        done = pool.run("f", "SUBMIT({'answer': 42, 'items': [1, 2]})")
        assert done.ok and done.has_returned, done.error
        assert done.returned == {"answer": 42, "items": [1, 2]}
        drawn = pool.run("f", "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()")
        assert drawn.ok, drawn.error
        assert len(drawn.images) == 1 and drawn.images[0].startswith(b"\x89PNG")


def test_a_session_another_host_holds_is_session_busy_after_lease_wait(store, redis_server,
                                                                       redis_prefix):
    other_host = RedisStore(redis_server.url, prefix=redis_prefix, hmac_key="k" * 32)
    other_host.load("held")  # leased to another host
    try:
        with SessionPool(1, store=store, repl_options=REPL_OPTIONS, lease_wait=0) as pool:
            with pytest.raises(dolsot.SessionBusy, match="leased by another host"):
                pool.run("held", "1")
            other_host.release("held")
            assert pool.run("held", "1").value == "1"
    finally:
        other_host.close()



def test_cells_take_a_unix_socket_in_a_private_directory_to_an_actor_on_this_node(store):
    with SessionPool(2, store=store, repl_options=REPL_OPTIONS) as pool:
        assert pool.run("u", "u = 5\nu * 2").value == "10"
        assert pool.channel_of("u") == "unix"
        directory = _socket_dir(pool, "u")
        mode = os.stat(directory).st_mode
        assert stat.S_ISDIR(mode) and stat.S_IMODE(mode) == 0o700
        assert os.stat(directory).st_uid == os.getuid()
        dirs = [os.path.dirname(slot.channel.address) for slot in pool._slots]
        assert len(set(dirs)) == 2
        assert pool.run("u", "u").value == "5"
    for directory in dirs:  # each actor removed its listener at close
        assert not os.path.exists(directory)


def test_an_actor_killed_mid_cell_on_the_channel_is_worker_lost_then_resumes_elsewhere(
        store, tmp_path):
    started, blocked = tmp_path / "started", tmp_path / "blocked"
    os.mkfifo(started)
    os.mkfifo(blocked)
    cell = (f"f = open({str(started)!r}, 'w')\nf.write('x')\nf.close()\n"
            f"open({str(blocked)!r}).read()")  # runs until its actor is killed
    with SessionPool(2, store=store, repl_options=REPL_OPTIONS) as pool:
        assert pool.run("m", "x = 41").ok
        assert pool.channel_of("m") == "unix"
        victim = pool.actor_of("m")
        victim_dir = _socket_dir(pool, "m")
        with ThreadPoolExecutor(1) as thread:
            pending = thread.submit(pool.run, "m", cell)
            with open(started) as f:  # returns once the cell is running
                assert f.read() == "x"
            _kill(victim)
            lost = pending.result(timeout=120)
        assert lost.outcome == dolsot.Outcome.WORKER_LOST and not lost.ok
        assert "'m' died (ActorDiedError)" in lost.error
        assert victim not in pool.actors() and len(pool.actors()) == 2
        assert not os.path.exists(victim_dir)  # the pool removed what the actor left
        resumed = pool.run("m", "x + 1")
        assert resumed.value == "42", resumed
        assert pool.actor_of("m") != victim and pool.channel_of("m") == "unix"


def test_the_tcp_channel_refuses_a_client_without_the_key_and_outlasts_a_silent_one(store):
    with SessionPool(1, store=store, repl_options=REPL_OPTIONS, channel="tcp") as pool:
        assert pool.run("t", "t = 3").ok
        assert pool.channel_of("t") == "tcp"
        address = pool._route("t").channel.address
        assert address[0] == ray.nodes()[0]["NodeManagerAddress"]  # the node's IP, as Ray's
        with pytest.raises(mpc.AuthenticationError):
            mpc.Client(address, authkey=b"not the pool's key")
        with pytest.raises(ChannelLost, match="AuthenticationError"):
            Channel("tcp", address, b"k" * 32, limit=1)
        silent = socket.create_connection(address)  # connects and never authenticates
        try:
            assert pool.run("t", "t + 1").value == "4"  # over a new connection
            with ThreadPoolExecutor(4) as threads:
                results = list(threads.map(lambda i: pool.run(f"t{i}", f"{i} * 2"), range(8)))
            assert [r.value for r in results] == [str(i * 2) for i in range(8)]
            silent.settimeout(60)  # a guard: the actor drops it after its 5 s handshake deadline
            while silent.recv(4096):  # the actor's challenge, then EOF
                pass
        finally:
            silent.close()


def test_a_channel_broken_under_a_live_actor_is_worker_lost_and_the_actor_replaced(store):
    with SessionPool(1, store=store, repl_options=REPL_OPTIONS) as pool:
        assert pool.run("b", "b = 8").ok
        live = pool.actor_of("b")
        for conn in pool._route("b").channel._idle:  # each connection cut at the pool's end
            with socket.socket(fileno=os.dup(conn.fileno())) as end:
                end.shutdown(socket.SHUT_RDWR)
        lost = pool.run("b", "b")
        assert lost.outcome == dolsot.Outcome.WORKER_LOST
        assert "broke its direct channel" in lost.error and "Ray reports it alive" in lost.error
        assert live not in pool.actors()  # replaced: the cell's fate was unknown
        assert pool.run("b", "b").value == "8"  # from the store, on the new actor

def test_cells_of_different_sessions_on_one_actor_run_in_parallel(store, tmp_path):
    fifo = str(tmp_path / "meet")
    os.mkfifo(fifo)
    # The reader's open returns only once the writer's is made, and the other
    # way round: run one after the other, the first cell would time out.
    cells = [("reader", f"open({fifo!r}).read()"),
             ("writer", f"f = open({fifo!r}, 'w')\nf.write('met')\nf.close()")]
    with SessionPool(1, store=store, repl_options=REPL_OPTIONS) as pool:
        assert pool.channel_of("reader") == "unix"
        with ThreadPoolExecutor(2) as threads:
            reader, writer = threads.map(lambda c: pool.run(*c, timeout=60), cells)
        assert writer.ok and reader.value == "'met'", (reader, writer)
        assert pool.actor_of("reader") == pool.actor_of("writer")


class Recorder:
    """on_output/on_image that record, in order, what they saw and on which thread."""

    def __init__(self):
        self.events = []
        self.threads = set()
        self.lock = threading.Lock()

    def output(self, text):
        with self.lock:
            self.threads.add(threading.get_ident())
            self.events.append(("out", text))

    def image(self, png):
        with self.lock:
            self.threads.add(threading.get_ident())
            self.events.append(("image", png))

    def text(self):
        with self.lock:
            return "".join(value for kind, value in self.events if kind == "out")

    def merged(self):
        """Consecutive text joined into one event (chunks may merge or split)."""
        out = []
        for kind, value in self.events:
            if kind == "out" and out and out[-1][0] == "out":
                out[-1] = ("out", out[-1][1] + value)
            else:
                out.append((kind, value))
        return out


FIGURE_CELL = ("import sys\nimport matplotlib.pyplot as plt\nprint('before')\n"
               "sys.stderr.write('err\\n')\nplt.plot([1, 2])\nplt.show()\nprint('after')")


def test_live_output_crosses_the_channel_while_the_cell_runs_in_the_actor(store, caplog):
    with SessionPool(1, store=store, repl_options=REPL_OPTIONS) as pool:
        assert pool.channel_of("live") == "unix"
        # The cell prints, then loops for ever; only the callback, once it has
        # seen the first chunk, ends it (pool.interrupt). So the chunk crossed
        # from the actor while the cell ran, or the run ends at its timeout.
        seen, ended_by = Recorder(), []

        def on_output(text):
            seen.output(text)
            if "first" in seen.text() and not ended_by:
                ended_by.append("interrupt")
                pool.interrupt("live")

        r = pool.run("live", "x = 1\nprint('first', flush=True)\nwhile True:\n    pass",
                     on_output=on_output, timeout=60)
        assert ended_by == ["interrupt"]
        assert (r.ok, r.exit_code, r.outcome) == (False, 130, dolsot.Outcome.INTERRUPTED)
        assert seen.text().startswith("first") and "first" in r.stdout
        assert "NameError" in pool.run("live", "x").error  # interrupted: rolled back

        # Order across stdout, stderr and figures, as the Repl streams them.
        drawn = Recorder()
        r = pool.run("fig", FIGURE_CELL, on_output=drawn.output, on_image=drawn.image)
        assert r.ok, r.error
        assert [kind for kind, _ in drawn.merged()] == ["out", "image", "out"]
        assert drawn.merged()[0] == ("out", "before\nerr\n")
        assert drawn.merged()[2] == ("out", "after\n")
        assert drawn.merged()[1][1] == r.images[0] and r.images[0].startswith(b"\x89PNG")
        assert r.stdout == "before\nerr\nafter\n"

        # A raising callback is logged once; the cell goes on.
        calls = []

        def raising(text):
            calls.append(text)
            raise ValueError("callback bug")

        with caplog.at_level(logging.ERROR, logger="dolsot"):
            r = pool.run("c", "import time\nfor i in range(3):\n    print(i, flush=True)\n"
                              "    time.sleep(0.02)\n'done'", on_output=raising)
        assert (r.ok, r.value, r.stdout) == (True, "'done'", "0\n1\n2\n")
        assert "".join(calls) == "0\n1\n2\n"
        records = [rec for rec in caplog.records if rec.name == "dolsot"]
        assert len(records) == 1 and "on_output raised" in records[0].getMessage()
        assert records[0].exc_info[0] is ValueError

        # max_output bounds the stream as on a Repl: the head, then one notice.
        bounded = Recorder()
        r = pool.run("c", "for i in range(30):\n    print('x' * 9999)", on_output=bounded.output)
        text = bounded.text()
        assert text[:100_000] == ("x" * 9999 + "\n") * 10
        assert "output past 100000 characters is not streamed" in text[100_000:]
        assert "x" not in text[100_000:].replace("exactly", "")

        with pytest.raises(TypeError, match="'on_output' must be a callable or None, not int"):
            pool.run("c", "1", on_output=3)
        with pytest.raises(TypeError, match="'on_image' must be a callable or None, not str"):
            pool.run("c", "1", on_image="png")
        pool.interrupt("never-ran")  # nothing runs there: nothing happens


def test_a_slow_callback_does_not_hold_the_actor_s_cell_back(store):
    # Each call takes 50 ms; 2000 flushed lines called one by one would be
    # 100 s. The actor's Repl merges what waits while the channel is held up.
    calls = []

    def slow(text):
        calls.append(text)
        time.sleep(0.05)  # the slowness under test, not a synchronisation

    with SessionPool(1, store=store, repl_options=REPL_OPTIONS) as pool:
        r = pool.run("c", "for i in range(2000):\n    print(i, flush=True)", on_output=slow)
    assert r.ok
    assert "".join(calls) == r.stdout == "".join(f"{i}\n" for i in range(2000))
    assert len(calls) < 200


def test_arun_and_astream_stream_from_the_pool(store):
    with SessionPool(2, store=store, repl_options=REPL_OPTIONS) as pool:
        seen = Recorder()
        r = asyncio.run(pool.arun("a", "print('async')\n7", on_output=seen.output))
        assert (r.value, seen.text()) == ("7", "async\n")

        async def collect():
            return [item async for item in pool.astream("a", "for i in range(3):\n"
                                                             "    print(i, flush=True)\n42")]

        *chunks, result = asyncio.run(collect())
        assert chunks and all(isinstance(chunk, str) for chunk in chunks)
        assert "".join(chunks) == "0\n1\n2\n"
        assert isinstance(result, dolsot.Result) and result.value == "42"

        async def first_chunk_only():
            stream = pool.astream("s", "s = 1\nprint('go', flush=True)\nwhile True:\n    pass",
                                  timeout=60)
            first = await stream.__anext__()
            await stream.aclose()  # interrupts the cell, and waits for its end
            return first

        assert asyncio.run(first_chunk_only()) in ("go", "go\n")
        assert "NameError" in pool.run("s", "s").error  # interrupted, rolled back
        assert pool.run("s", "1 + 1").value == "2"


def test_through_ray_calls_live_output_comes_whole_at_the_end(store, tmp_path):
    with SessionPool(1, store=store, repl_options=REPL_OPTIONS, channel="ray") as pool:
        assert pool.channel_of("r") == "ray"
        seen = Recorder()
        r = pool.run("r", FIGURE_CELL, on_output=seen.output, on_image=seen.image)
        assert r.ok, r.error
        assert seen.merged()[0] == ("out", "before\nerr\n")
        assert [kind for kind, _ in seen.merged()] == ["out", "image", "out"]
        assert seen.merged()[1][1] == r.images[0]

        async def collect():
            return [item async for item in pool.astream("r", "print('x')\n5")]

        *chunks, result = asyncio.run(collect())
        assert ("".join(chunks), result.value) == ("x\n", "5")
        # interrupt goes through Ray too, while the cell runs in the actor.
        os.mkfifo(tmp_path / "started")
        cell = (f"x = 1\nf = open({str(tmp_path / 'started')!r}, 'w')\nf.write('x')\n"
                "f.close()\nprint('so far')\nwhile True:\n    pass")
        with ThreadPoolExecutor(1) as thread:
            pending = thread.submit(pool.run, "r2", cell, timeout=60, on_output=seen.output)
            with open(tmp_path / "started") as f:  # returns once the cell is running
                assert f.read() == "x"
            pool.interrupt("r2")
            stopped = pending.result(timeout=120)
        assert (stopped.exit_code, stopped.outcome) == (130, dolsot.Outcome.INTERRUPTED)
        assert seen.text().endswith("so far\n")  # what came before, at the end
        plain = pool.run("r", "print('no callback')")
        assert plain.stdout == "no callback\n"


async def _collect(stream):
    return [item async for item in stream]


def test_a_pool_leaves_no_thread_socket_or_process_after_close(store):
    with SessionPool(1, store=store, repl_options=REPL_OPTIONS) as warm:
        assert warm.run("w", "1").ok  # Ray's driver-side setup happens once
    threads, fds = set(threading.enumerate()), open_fds()
    pool = SessionPool(2, store=store, repl_options=REPL_OPTIONS)
    streamed = [Recorder() for _ in range(32)]  # half the cells stream their output

    def cell(i):
        live = {"on_output": streamed[i].output} if i % 2 else {}
        return pool.run(f"c{i % 4}", f"print({i})\n{i}", **live)

    with ThreadPoolExecutor(8) as callers:
        results = list(callers.map(cell, range(32)))
    assert all(r.ok for r in results)
    assert [streamed[i].text() for i in range(1, 32, 2)] == [f"{i}\n" for i in range(1, 32, 2)]
    *chunks, last = asyncio.run(_collect(pool.astream("c0", "print('end')\n0")))
    assert ("".join(chunks), last.value) == ("end\n", "0")
    channels = [slot.channel for slot in pool._slots]
    assert sum(c.open_connections() for c in channels) >= 2
    actor_pids = ray.get([h.pid.remote() for h in pool.actors()])
    tree = set(actor_pids)
    for pid in actor_pids:
        tree.update(descendants(pid))
    dirs = [os.path.dirname(c.address) for c in channels]
    pool.close()
    assert [c.open_connections() for c in channels] == [0, 0]
    assert not [d for d in dirs if os.path.exists(d)]
    deadline = time.monotonic() + 60
    while [p for p in tree if alive(p)]:
        assert time.monotonic() < deadline, [p for p in tree if alive(p)]
        time.sleep(0.1)
    assert set(threading.enumerate()) == threads
    assert open_fds_left_over(fds) == {}


def test_an_actor_s_channel_ends_its_threads_sockets_and_processes_at_close(store):
    """The actor's side, hosted in this process: after close, its listener,
    serving threads, sockets and Repl processes are gone."""
    spec = store.spec()
    key = os.urandom(32)
    kids = set(descendants(os.getpid(), every_thread=True))
    threads, fds = set(threading.enumerate()), open_fds()
    host = _Host(lambda: RedisStore(**spec), REPL_OPTIONS,
                 {"kind": "unix", "node": None, "authkey": key})
    _, kind, address, why = host.hello()
    assert (kind, why) == ("unix", None)
    channel = Channel(kind, address, key, limit=4)
    with ThreadPoolExecutor(4) as callers:
        values = list(callers.map(lambda i: channel.call("run", f"h{i}", f"{i} + 1", None),
                                  range(12)))
    assert [v["value"] for v in values] == [str(i + 1) for i in range(12)]
    events = []  # a streaming call: its events, in order, ahead of its reply
    streamed = channel.call("run", "h0", "print('a')\nprint('b', flush=True)\n9", None, None,
                            (True, False), on_event=lambda *event: events.append(event))
    assert streamed["value"] == "9" and streamed["live"] == []
    assert "".join(text for kind, text in events) == "a\nb\n" and {k for k, _ in events} == {"out"}
    with pytest.raises(ValueError, match="only run streams events, not 'sessions'"):
        channel.call("sessions", on_event=events.append)
    with pytest.raises(ValueError, match="not 'close'"):
        channel.call("close")  # the channel serves run, sessions, reset and hello only
    with pytest.raises(dolsot.InvalidSession):
        channel.call("run", "../bad", "1", None)  # the actor's exception, raised here
    assert channel.call("sessions")  # the connection is still good after both
    assert set(descendants(os.getpid(), every_thread=True)) - kids  # the Repl's worker
    channel.close()
    assert host.close() is None
    assert not os.path.exists(os.path.dirname(address))
    assert set(threading.enumerate()) == threads
    assert open_fds_left_over(fds) == {}
    assert not [p for p in set(descendants(os.getpid(), every_thread=True)) - kids if alive(p)]


def test_an_actor_that_cannot_listen_says_why(store):
    spec = store.spec()
    host = _Host(lambda: RedisStore(**spec), REPL_OPTIONS,
                 {"kind": "udp", "node": None, "authkey": b"k" * 32})
    try:
        token, kind, address, why = host.hello()
        assert (kind, address) == (None, None) and token
        assert why == ("the actor could not listen (ValueError: channel kind must be 'unix' or "
                       "'tcp', got 'udp')")
    finally:
        assert host.close() is None


def test_a_channel_that_cannot_be_opened_falls_back_to_ray_calls_and_says_so(store,
                                                                            monkeypatch):
    def refused(*args, **kwargs):
        raise ChannelLost("could not connect (ConnectionRefusedError: refused)")

    monkeypatch.setattr("dolsot.ray_pool.Channel", refused)
    with pytest.warns(RuntimeWarning, match=r"no direct channel to a new actor: the pool could "
                                            r"not connect \(could not connect \(Connection"):
        pool = SessionPool(1, store=store, repl_options=REPL_OPTIONS)
    with pool:
        assert pool.channel_of("r") == "ray"
        assert pool.run("r", "r = 2\nr ** 3").value == "8"
        assert [i.id for i in pool.sessions()] == ["r"]
    with pytest.raises(ConfigError, match="channel must be one of auto, unix, tcp, ray"):
        SessionPool(1, store=store, channel="udp")


def test_ray_calls_only_when_asked(store):
    with SessionPool(1, store=store, repl_options=REPL_OPTIONS, channel="ray") as pool:
        assert pool.channel_of("q") == "ray"
        assert pool.run("q", "q = 1").ok
        _kill(pool.actor_of("q"))
        lost = pool.run("q", "q")
        assert lost.outcome == dolsot.Outcome.WORKER_LOST and "died" in lost.error
        assert pool.run("q", "q").value == "1"


def test_without_ray_the_error_says_what_to_install():
    code = "import sys; sys.modules['ray'] = None\nfrom dolsot.ray import SessionPool"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode != 0 and "pip install 'dolsot[ray]'" in out.stderr


def test_no_actor_or_worker_process_is_left_after_shutdown(store, redis_server):
    # Runs last in this module: it shuts Ray down. Ray's daemons and workers
    # are this process's descendants (redis-server too, which stays).
    ray_daemons = set(descendants(os.getpid())) - {redis_server.process.pid}
    with SessionPool(2, store=store, repl_options=REPL_OPTIONS) as pool:
        assert pool.run("p", "1").ok
        actor_pids = ray.get([h.pid.remote() for h in pool.actors()])
        tree = set(actor_pids)
        for pid in actor_pids:
            tree.update(descendants(pid))  # each actor's Repl worker and sessions
    ray.shutdown()
    tree |= ray_daemons
    deadline = time.monotonic() + 60
    while [p for p in tree if alive(p)]:
        assert time.monotonic() < deadline, [p for p in tree if alive(p)]
        time.sleep(0.1)
