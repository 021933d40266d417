"""The gate's bypass classes (#21 §1, #23 §5) end to end: each attack does its
harm in an InProcessSession without a gate, and is refused with one."""

from __future__ import annotations

import copy
import html.entities
import importlib
import math
import types

import pytest

from dolsot.sandbox import AstGate, Policy, check_ast

POLICY = Policy(toolboxes={"tb": "mytools_api"})
# `self._x` in plain methods of sealed classes: on by default, in a session
# (its gate remembers the sealed classes, see test_gate_memory.py); a cell
# checked on its own (check_ast) is refused them.
PLAIN = Policy(toolboxes={"tb": "mytools_api"}, private_in_plain_methods=True)
NO_PLAIN = Policy(toolboxes={"tb": "mytools_api"}, private_in_plain_methods=False)

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


def harms_without_the_gate_and_is_refused_with_it(code, harmed, make_api, undo, policy=POLICY) -> None:
    """Runs `code` in an InProcessSession without a gate (it must do its harm,
    seen through `harmed(api)`), then with the gate (refused, no harm)."""
    inprocess = importlib.import_module("dolsot.inprocess")
    api = make_api()
    open_session = inprocess.InProcessSession(inject={"tb": api})
    try:
        result = open_session.run("s", code)
        assert result.ok, result.error
        assert harmed(api), "the attack did no harm without the gate"
    finally:
        open_session.close()
        undo()
    api = make_api()
    # The session's own AST gate (native, with the session's gate memory).
    gated = inprocess.InProcessSession(inject={"tb": api}, gate=AstGate(policy))
    try:
        result = gated.run("s", code)
        assert not result.ok and "rejected by the gate" in result.error
        assert not harmed(api)
    finally:
        gated.close()
        undo()
    assert check_ast(code, policy) != []


@pytest.mark.parametrize("code,harmed", ATTACKS)
def test_attack_harms_without_the_gate_and_is_refused_with_it(code, harmed) -> None:
    tau = math.tau

    def undo() -> None:
        math.tau = tau

    harms_without_the_gate_and_is_refused_with_it(
        code, harmed, lambda: types.ModuleType("mytools_api"), undo)


def make_toolbox() -> types.ModuleType:
    """A toolbox with what #23 §5's attacks go after: private state, an account
    class that checks its owner in __init__, internals in exceptions."""
    api = types.ModuleType("mytools_api")

    class Internal:  # hashable: a dict key inside the toolbox
        key = "host"

    api.internal = Internal()
    api.reads = []

    class Account:
        _owner = "guest"

        def __init__(self, owner: str) -> None:
            if owner != "guest":
                raise PermissionError(owner)
            self._owner = owner

        def read(self) -> str:
            api.reads.append(self._owner)
            return self._owner

    def lookup(key):
        return {}[api.internal]  # KeyError carries the internal object

    def rows():
        yield 1
        return api.internal  # StopIteration.value carries it

    api.Account, api.guest, api.lookup, api.rows = Account, Account("guest"), lookup, rows
    return api


# (cell, how to see its harm in the host, how to undo it)
CLASS_ATTACKS = [
    (  # self._x in a regular method, called with a module as self
        "class A:\n    def m(self):\n        self._deepcopy_dispatch[int] = lambda x, memo: 'pwned'\n"
        "import copy\nA.m(copy)\n",
        lambda api: copy.deepcopy(1) == "pwned",
        lambda: copy._deepcopy_dispatch.__setitem__(int, copy._deepcopy_atomic),
    ),
    (  # a caught exception's args hand back what the toolbox raised with
        "try:\n    tb.lookup(1)\nexcept KeyError as e:\n    e.args[0].key = 'pwned'\n",
        lambda api: api.internal.key == "pwned",
        lambda: None,
    ),
    (  # StopIteration.value: a generator's return value
        "g = tb.rows()\nnext(g)\ntry:\n    next(g)\nexcept StopIteration as s:\n    s.value.key = 'pwned'\n",
        lambda api: api.internal.key == "pwned",
        lambda: None,
    ),
    (  # deepcopy's memo forges an Account the toolbox never made
        "import copy\nclass M(dict):\n    def __init__(self):\n        self.calls = 0\n"
        "    def get(self, k, d=None):\n        self.calls += 1\n"
        "        return {'_owner': 'admin'} if self.calls == 3 else d\n"
        "forged = copy.deepcopy(tb.guest, M())\nforged.read()\n",
        lambda api: "admin" in api.reads,
        lambda: None,
    ),
]


# A method that reads `self._x`, handed a module as self (the first attack
# above), reached as a plain function in each way the gate seals off.
PWN = "        self._deepcopy_dispatch[int] = lambda x, memo: 'pwned'\n"
SEALED_ATTACKS = [
    "class A:\n    def m(self):\n" + PWN + "import copy\nB = A\nB.m(copy)\n",
    "class A:\n    def m(self):\n" + PWN + "import copy\ntype(A()).m(copy)\n",
    "class A:\n    def m(self):\n" + PWN + "class B(A):\n    def n(self, o):\n        super(B, B).m(o)\n"
    "import copy\nB().n(copy)\n",
    "class A:\n    def m(self):\n" + PWN + "    @classmethod\n    def c(cls, o):\n        cls.m(o)\n"
    "import copy\nA.c(copy)\n",
    "import copy\ndef seal(k):\n    k.m(copy)\n    return k\n@seal\nclass A:\n    def m(self):\n" + PWN,
    "from dataclasses import dataclass, fields\nimport copy\nclass A:\n    def m(self):\n" + PWN
    + "@dataclass\nclass D:\n    a: A\nfields(D)[0].type.m(copy)\n",
    "from enum import Enum\nimport copy\nclass C(Enum):\n    R = 1\n    def _missing_(self):\n" + PWN
    + "try:\n    C(copy)\nexcept ValueError:\n    pass\n",
    # a "setter" of something that is no property keeps the function
    "import copy\nclass Keep:\n    def __init__(self, f):\n        self.f = f\n    def setter(self, g):\n"
    "        self.g = g\n        return self\nclass A:\n    @Keep\n    def n(self):\n        return 1\n"
    "    @n.setter\n    def n(self, v):\n" + PWN + "A.n.g(copy, 0)\n",
]


@pytest.mark.parametrize("code", SEALED_ATTACKS)
def test_plain_method_reached_off_its_class_harms_and_is_refused(code) -> None:
    harms_without_the_gate_and_is_refused_with_it(
        code, lambda api: copy.deepcopy(1) == "pwned", make_toolbox, undo_deepcopy, PLAIN)


def undo_deepcopy() -> None:
    copy._deepcopy_dispatch[int] = copy._deepcopy_atomic


TWO_CELLS = ("class A:\n    def m(self):\n" + PWN, "import copy\nA.m(copy)\n")


def test_plain_methods_two_cells() -> None:
    """The gate sees one cell; in the second `A` is just a name. A session's
    AST gate remembers that the first cell sealed `A` and refuses the second;
    a cell checked on its own (check_ast, no memory) is refused the first."""
    inprocess = importlib.import_module("dolsot.inprocess")
    assert [f.rule for f in check_ast(TWO_CELLS[0], POLICY)] == ["private-attribute"]
    assert "without a session's gate memory" in check_ast(TWO_CELLS[0], POLICY)[0].message
    assert check_ast(TWO_CELLS[1], PLAIN) == []  # alone, a method call
    session = inprocess.InProcessSession(gate=AstGate(POLICY))
    try:
        assert session.run("s", TWO_CELLS[0]).ok
        second = session.run("s", TWO_CELLS[1])
        assert not second.ok and "private-attribute" in second.error, second.error
        assert copy.deepcopy(1) == 1
        assert session.run("s", "print(isinstance(A(), A))").stdout == "True\n"
    finally:
        session.close()
        undo_deepcopy()
    assert copy.deepcopy(1) == 1


@pytest.mark.parametrize("code,harmed,undo", CLASS_ATTACKS)
def test_class_attack_harms_without_the_gate_and_is_refused_with_it(code, harmed, undo) -> None:
    harms_without_the_gate_and_is_refused_with_it(code, harmed, make_toolbox, undo)


BENIGN = [
    "mt.help('top')",
    "from dataclasses import dataclass\n@dataclass\nclass B:\n    open: float\nb = B(1.0)\nb.open",
    "class C:\n    def __init__(self):\n        self._n = 1\n    @property\n    def n(self):\n        return self._n\n"
    "    def __len__(self):\n        return self._n\nC().n",
    "try:\n    int('x')\nexcept ValueError as e:\n    print(str(e), type(e).__name__)",
    "import copy\nc = copy.deepcopy({'a': [1]})\nprint(type(c).__name__, type(c) is dict)",
    "def f(x: 'C') -> 'C':\n    return x",
    # #23 §5 follow-up: class methods, shown exception args, type tests
    "class Registry:\n    _items = {}\n    @classmethod\n    def add(cls, k, v):\n        cls._items[k] = v\n"
    "    def __len__(self):\n        return len(self._items)\nRegistry.add('a', 1)\nprint(len(Registry()))",
    "try:\n    int('x')\nexcept ValueError as e:\n    print(e.args, len(e.args), f'{e.args[0]}')",
    "def f(v):\n    return isinstance(v, type)\nprint(f(int), type(1) == int, type(1) in (int, float))",
]


@pytest.mark.parametrize("code", BENIGN)
def test_former_false_alarms_are_allowed(code) -> None:
    assert check_ast(code, Policy(toolboxes={"mt": "mytools"})) == []


def test_plain_methods_of_a_sealed_class_with_the_policy() -> None:
    code = ("class Counter:\n    def __init__(self):\n        self._n = 0\n    def bump(self):\n"
            "        self._n += 1\n        return self._n\n    @classmethod\n    def fresh(cls):\n"
            "        return cls()\nc = Counter.fresh()\nc.bump()\n"
            "print(isinstance(c, Counter), type(c) is Counter, Counter.__name__)")
    inprocess = importlib.import_module("dolsot.inprocess")
    for policy, allowed in ((POLICY, True), (PLAIN, True), (NO_PLAIN, False)):
        session = inprocess.InProcessSession(gate=AstGate(policy))
        try:
            result = session.run("s", code)
            assert result.ok == allowed, result.error
            if not allowed:
                assert result.error.count("private-attribute") == 2, result.error
        finally:
            session.close()
    assert [f.rule for f in check_ast(code, POLICY)] == ["private-attribute"] * 2
    assert POLICY.private_in_plain_methods and not NO_PLAIN.private_in_plain_methods
