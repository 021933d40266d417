"""A Python host: one agent loop, either backend, the same call sites.

Run: python examples/python_host.py [repl|inprocess]   (with examples/toolbox on
PYTHONPATH). The test suite runs it and type-checks it against dolsot's stubs.
"""

from __future__ import annotations

import asyncio
import sys

import mytools

import dolsot
from dolsot.store import MemoryStore


def make_backend(kind: str) -> dolsot.Backend:
    if kind == "inprocess":
        return dolsot.InProcessSession(inject={"mt": mytools}, timeout=5)
    return dolsot.Repl(inject={"mt": mytools}, store=MemoryStore(), timeout=5)


def agent_turns(backend: dolsot.Backend) -> list[dolsot.Result]:
    cells = [
        "rows = mt.load('orders')",
        "len(rows)",
        "mt.top(rows, 1)[0]['item']",
        "mt.load('returns')",
    ]
    return [backend.run("example", code) for code in cells]


async def one_async_turn(backend: dolsot.Backend) -> dolsot.Result:
    return await backend.arun("example", "mt.add(2, 3)")


def main(kind: str) -> int:
    backend = make_backend(kind)
    try:
        results = agent_turns(backend)
        for result in results:
            print(f"exit={result.exit_code} value={result.value!r}")
        asynced = asyncio.run(one_async_turn(backend))
        print(f"async value={asynced.value}")
        ok = (
            results[1].value == "6"
            and results[2].value == "'rice'"
            and results[3].exit_code == 4
            and asynced.value == "5"
        )
        return 0 if ok else 1
    finally:
        backend.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "repl"))
