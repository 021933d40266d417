"""Shared pytest fixtures: a toolbox module on sys.path, `backend`, the
fixture the conformance suite runs against every backend (InProcessSession
and Repl), and a real redis-server (redis_fixtures.py)."""

from __future__ import annotations

import sys
import textwrap

import pytest

import dolsot
from dolsot.inprocess import InProcessSession
from redis_fixtures import own_redis_server, redis_prefix, redis_server  # noqa: F401 (fixtures)

CONFORMANCE_TOOLBOX = "dolsot_conformance_toolbox"


@pytest.fixture(scope="session")
def conformance_toolbox(tmp_path_factory):
    """An importable toolbox module (name: CONFORMANCE_TOOLBOX)."""
    root = tmp_path_factory.mktemp("toolbox")
    (root / f"{CONFORMANCE_TOOLBOX}.py").write_text(textwrap.dedent('''
        __all__ = ["add", "find", "ToolError"]

        class ToolError(Exception):
            exit_code = 3

        def add(a: int, b: int) -> int:
            return a + b

        def find(name: str) -> str:
            raise ToolError(f"{name} not found")
    '''))
    sys.path.insert(0, str(root))
    yield CONFORMANCE_TOOLBOX
    sys.path.remove(str(root))


def _make_inprocess(inject):
    return InProcessSession(inject, timeout=20, typecheck=False)


def _make_repl(inject):
    from dolsot.repl import Repl
    from dolsot.store import MemoryStore

    return Repl(inject, store=MemoryStore(), typecheck=False)


def _make_sandboxed_repl(inject):
    from dolsot.repl import Repl
    from dolsot.store import MemoryStore

    return Repl(inject, store=MemoryStore(), typecheck=False, sandbox=dolsot.Sandbox())


def _backend_factories():
    # All three, always: a module of ours that does not import fails the
    # suite, it never turns into skipped tests. The sandboxed Repl runs the
    # same contract inside the kernel's walls (docs/sandbox.md).
    return [pytest.param(_make_inprocess, id="inprocess"), pytest.param(_make_repl, id="repl"),
            pytest.param(_make_sandboxed_repl, id="repl-sandboxed")]


@pytest.fixture(params=_backend_factories())
def backend(request, conformance_toolbox):
    """A backend with the conformance toolbox injected as `tb`."""
    instance = request.param({"tb": conformance_toolbox})
    yield instance
    instance.close()


@pytest.fixture
def session():
    """A plain InProcessSession (no toolbox), closed afterwards."""
    s = InProcessSession(timeout=20)
    yield s
    s.close()
