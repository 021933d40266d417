"""dolsot.ray.SessionPool on Ray in local mode over a real redis-server: 64
sessions on 4 actors with affinity and every state checked, an actor killed
mid-run whose sessions continue on others from the store, the Repl calls
(arun, sessions, reset), and no process left after shutdown."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
import ray

import dolsot
from dolsot.ray import SessionPool
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
        assert [i.id for i in pool.sessions()] == ["a", "b"]
        assert pool.reset("a") == 1
        assert "NameError" in pool.run("a", "v").error  # a new, empty session
        assert pool.reset("all") == 2
        assert pool.sessions() == []
        with pytest.raises(dolsot.InvalidSession):
            pool.run("../x", "1")


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
