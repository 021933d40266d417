"""InProcessSession cell threads have a stack deep enough for C iterator
chains a million deep (#38): before, next() through a million nested
map/filter/zip/chain/islice objects overflowed the C stack and killed the
host (SIGSEGV). Each case runs in a child process, which must exit 0."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(300)

CHAINS = {
    "map": ("it = map(abs, it)", "1"),
    "filter": ("it = filter(None, it)", "1"),
    "zip": ("it = zip(it)", "1"),
    "chain": ("it = itertools.chain(it)", "1"),
    "islice": ("it = itertools.islice(it, 5)", "1"),
}


def cell_for(step: str) -> str:
    return textwrap.dedent(f"""
        import itertools
        it = iter([-1, 2])
        for _ in range(1_000_000):
            {step}
        first = next(it)
        while isinstance(first, tuple):
            first = first[0]
        first
    """)


@pytest.mark.parametrize("kind", sorted(CHAINS))
def test_a_million_deep_iterator_chain_does_not_crash_the_host(kind):
    step, expected = CHAINS[kind]
    cell = cell_for(step)
    script = textwrap.dedent(f"""
        from dolsot.inprocess import InProcessSession
        from dolsot.sandbox import AstGate, Policy
        for gate in (None, AstGate(Policy())):
            s = InProcessSession(gate=gate, timeout=120)
            r = s.run("a", {cell!r})
            assert r.ok, r.error
            assert r.value in ("1", "-1"), r.value
            # The host goes on, and so does the session on its (trimmed) thread.
            assert s.run("a", "del it\\n2 + 2").value == "4"
            s.close()
        print("child ok", flush=True)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, f"exit {done.returncode}: {done.stdout}{done.stderr}"
    assert "child ok" in done.stdout
