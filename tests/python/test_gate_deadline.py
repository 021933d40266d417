"""The gate's half of #38's deadline and deferred code: cells that would hold
the GIL in C past any deadline (a literal catastrophic regex, a literal power
with over a million digits) and cells whose cleanup code would run later on
whatever thread collects their generator or coroutine are refused before they
run, naming the rule and the line; their harmless neighbours run."""

from __future__ import annotations

import pytest

from dolsot.inprocess import InProcessSession
from dolsot.sandbox import AstGate, Policy, check_ast


@pytest.fixture
def session():
    with InProcessSession(gate=AstGate(Policy()), typecheck=False) as s:
        yield s


REFUSED = [
    ("import re\nre.compile(r'(a+)+$')\n", "slow-pattern", 2),
    ("from re import match\nmatch('(x*)*y', 'x' * 40)\n", "slow-pattern", 2),
    ("import re as r\np = r'(\\w+\\s?)*$'\nr.search(p, s)\n", "slow-pattern", 2),
    ("x = 7 ** 30000000\n", "huge-constant", 1),
    ("x = pow(7, 30000000)\n", "huge-constant", 1),
    ("x = 1\nx = -(10) ** 10**7\n", "huge-constant", 2),
    ("x = 3\nx **= 10 ** 7\n", "huge-constant", 2),
    ("s = 'ab' * 10 ** 9\n", "huge-constant", 1),
    ("import math\nmath.factorial(10 ** 7)\n", "huge-constant", 2),
    ("def g():\n    try:\n        yield 1\n    finally:\n        print('late')\n", "deferred-code", 3),
    ("def g():\n    with cm():\n        yield 1\n", "deferred-code", 3),
    ("async def c():\n    try:\n        await x\n    except Exception:\n        pass\n", "deferred-code", 3),
    ("async def c():\n    async with x:\n        pass\n", "deferred-code", 2),
]


@pytest.mark.parametrize("code,rule,line", REFUSED)
def test_refused_before_it_runs_naming_rule_and_line(session, code: str, rule: str, line: int) -> None:
    result = session.run("s", code)
    assert not result.ok
    assert "rejected by the gate" in result.error
    assert f"line {line}" in result.error and f"[{rule}]" in result.error, result.error
    assert session.run("s", "1 + 1").value == "2"  # nothing ran; the session goes on
    findings = check_ast(code, Policy())
    assert any(f.rule == rule and f.line == line for f in findings), findings


ALLOWED = [
    ("import re\nre.findall(r'(\\d{1,3}\\.){3}\\d{1,3}', 'ip 10.0.0.1')\n", "['0.']"),
    ("import re\nre.match(r'(a|b)*c', 'abc') is not None\n", "True"),
    ("len(str(2 ** 64)), 1 << 10, len('-' * 80), len([0] * 10 ** 6)\n", "(20, 1024, 80, 1000000)"),
    ("def g():\n    yield 1\n    yield 2\nlist(g())\n", "[1, 2]"),
    ("def g():\n    for i in range(2):\n        yield i\n    try:\n        pass\n    finally:\n        pass\nlist(g())\n",
     "[0, 1]"),
]


@pytest.mark.parametrize("code,value", ALLOWED)
def test_harmless_neighbours_run(session, code: str, value: str | None) -> None:
    result = session.run("s", code)
    assert result.ok, result.error
    if value is not None:
        assert result.value == value
