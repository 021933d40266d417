"""The gate's bypass classes (#21 §1, #23 §5) end to end: each attack does its
harm in an InProcessSession without a gate, and is refused with one."""

from __future__ import annotations

import copy
import html.entities
import importlib
import math
import types

import pytest

from dolsot.sandbox import Policy, check_ast

POLICY = Policy(toolboxes={"tb": "mytools_api"})

# (cell, how to see its harm in the host, how to undo it)
ATTACKS = [
    (  # 1: a string annotation evaluated by functools.singledispatch
        "import functools\n@functools.singledispatch\ndef f(x): pass\n"
        "def g(x: \"tb.__dict__.__setitem__('pwned', 1) or int\"): pass\nf.register(g)\n",
        lambda api: getattr(api, "pwned", None) == 1,
    ),
    (  # 4: a process-wide table of an allowed module
        "import copy\ncopy.dispatch_table[type(tb)] = len\n",
        lambda api: copy.dispatch_table.pop(types.ModuleType, None) is not None,
    ),
    (
        "from html.entities import html5\nhtml5['dolsotpwn;'] = '<'\n",
        lambda api: html.entities.html5.pop("dolsotpwn;", None) is not None,
    ),
    (  # 5: tree-sitter reads one subscript store, CPython a store into math
        "import math\na, b = 1, 2\na, b\n[math.tau] = [3]\n",
        lambda api: math.tau == 3,
    ),
]


@pytest.mark.parametrize("code,harmed", ATTACKS)
def test_attack_harms_without_the_gate_and_is_refused_with_it(code, harmed) -> None:
    inprocess = importlib.import_module("dolsot.inprocess")
    tau = math.tau
    api = types.ModuleType("mytools_api")
    open_session = inprocess.InProcessSession(inject={"tb": api})
    try:
        assert open_session.run("s", code).ok
        assert harmed(api), "the attack did no harm without the gate"
    finally:
        open_session.close()
        math.tau = tau
    api = types.ModuleType("mytools_api")
    gated = inprocess.InProcessSession(inject={"tb": api}, gate=lambda c: check_ast(c, POLICY))
    try:
        result = gated.run("s", code)
        assert not result.ok and "rejected by the gate" in result.error
        assert not harmed(api)
    finally:
        gated.close()
        math.tau = tau
    assert check_ast(code, POLICY) != []


BENIGN = [
    "mt.help('top')",
    "from dataclasses import dataclass\n@dataclass\nclass B:\n    open: float\nb = B(1.0)\nb.open",
    "class C:\n    def __init__(self):\n        self._n = 1\n    def n(self):\n        return self._n\nC().n()",
    "def f(x: 'C') -> 'C':\n    return x",
]


@pytest.mark.parametrize("code", BENIGN)
def test_former_false_alarms_are_allowed(code) -> None:
    assert check_ast(code, Policy(toolboxes={"mt": "mytools"})) == []
