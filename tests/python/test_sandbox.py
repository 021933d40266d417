"""dolsot.sandbox: the AST gate from Python (run with PYTHONPATH=<build>/python).

Besides a corpus of attack and benign cells, a differential test generates
cells from fragments that confuse lexers (quotes, prefixes, backslashes, CR,
comments, braces, unicode spellings) and checks that whenever CPython's own
parser sees a denied construct, the gate rejects the cell.
"""

from __future__ import annotations

import importlib
import ast
import random
import threading
import types
import unicodedata
import warnings

import pytest

from dolsot import sandbox
from dolsot.sandbox import AstGate, Finding, Policy, check_ast

TOOLBOX_POLICY = Policy(toolboxes={"tb": "mytools.api"})

ATTACKS = [
    ("import os\nos.system('id')", "import-denied"),
    ("def f():\n    import subprocess", "import-denied"),
    ("from . import x", "import-denied"),
    ("from math import *", "import-denied"),
    ("from dataclasses import sys", "attribute-denied"),
    ("eval('1')", "name-denied"),
    ("exec('x = 1')", "name-denied"),
    ("__import__('os')", "name-denied"),
    ("open('/etc/passwd')", "name-denied"),
    ("getattr(x, '_' * 2 + 'class' + '_' * 2)", "name-denied"),
    ("f = lambda g=globals: g", "name-denied"),
    ("@vars\ndef f(): pass", "name-denied"),
    ("\uff45\uff56\uff41\uff4c('1')", "name-denied"),  # fullwidth eval
    ("\u212fxec('1')", "name-denied"),  # script small e
    ("().__class__.__base__.__subclasses__()", "dunder-attribute"),
    ("type(x).__subclasses__()", "dunder-attribute"),
    ("f.__globals__", "dunder-attribute"),
    ("import random\nrandom._os", "private-attribute"),
    ("g.gi_frame.f_back.f_globals", "internal-attribute"),
    ("e.__traceback__.tb_frame", "dunder-attribute"),
    ("c.cr_frame", "internal-attribute"),
    ("import uuid\nuuid.os", "attribute-denied"),
    ("'{0.__class__}'.format(x)", "dunder-attribute"),
    ("'{0.\\x5f_class__}'.format(x)", "dunder-attribute"),
    ("t.format(x)", "format-string"),
    ("print = None", "rebind-builtin"),
    ("[(len := 1) for _ in 'a']", "rebind-builtin"),
    ("match x:\n    case print: pass", "rebind-builtin"),
    ("match x:\n    case str(__class__=c): pass", "dunder-attribute"),
    ("del print", "rebind-builtin"),
    ("tb = 1", "rebind-toolbox"),
    ("tb.fetch = None", "module-assignment"),
    ("import math\nmath.pi = 3", "module-assignment"),
    ("# c\rimport os", "invalid-source"),
    ("x = 1\0", "invalid-source"),
    ("# coding: latin-1\nx = 1", "invalid-source"),
    ("x = (", "syntax-error"),
    ("exec 'x'", "syntax-error"),
]

BENIGN = [
    "x = 1\nx",
    "import math, json\nfrom collections import Counter\nfrom dataclasses import dataclass",
    "rows = [{'a': 1}]\ntotal = sum(r['a'] for r in rows)\nprint(f'{total:.2f}')",
    "class P:\n    def __init__(self, x):\n        self.x = x\n    def __repr__(self):\n"
    "        return f'P({self.x!r})'",
    "from dataclasses import dataclass\n@dataclass\nclass Item:\n    id: int\n    type: str = 'a'",
    "class B(A):\n    def __init__(self):\n        super().__init__()",
    "squares = {n: n * n for n in range(9)}\nodd = [n for n in range(9) if n % 2]",
    "r = tb.fetch('u', timeout=3)\ntb.client.list()",
    "msg = 'never call eval() or open() or __import__ or x.__class__'",
    "# import os; eval(x)\nx = 2  # __subclasses__",
    "d = {'__class__': 1, '_private': 2}\nd['_x'] = d['__class__']",
    "def f(type=None, input=None):\n    list = [type]\n    return list",
    "'{:.2f} {0} {name}'.format(1.0, name='n')",
    "if __name__ == '__main__':\n    pass",
    "match cmd:\n    case {'go': where}:\n        pass\n    case [first, *rest]:\n        pass",
    "caf\u00e9 = 1\n\u03bb = caf\u00e9",
]


@pytest.mark.parametrize("code,rule", ATTACKS, ids=[a[1] + ":" + a[0][:30] for a in ATTACKS])
def test_attack_is_rejected_by_the_named_rule(code: str, rule: str) -> None:
    findings = check_ast(code, TOOLBOX_POLICY)
    assert rule in {f.rule for f in findings}, sandbox.format_findings(findings)


@pytest.mark.parametrize("code", BENIGN, ids=[b[:30] for b in BENIGN])
def test_benign_cell_is_allowed_and_is_valid_python(code: str) -> None:
    ast.parse(code)
    assert check_ast(code, TOOLBOX_POLICY) == []


def test_finding_fields_and_text() -> None:
    (finding,) = check_ast("x = 1\ny = eval('2')\n")
    assert isinstance(finding, Finding)
    assert (finding.rule, finding.line, finding.column) == ("name-denied", 2, 5)
    assert finding.message == "name `eval` is denied"
    assert (finding.start_byte, finding.end_byte) == (10, 14)
    assert str(finding) == "line 2, col 5: [name-denied] name `eval` is denied"
    assert "name-denied" in repr(finding)
    assert finding == check_ast("x = 1\ny = eval('2')\n")[0]


def test_bytes_and_invalid_text_give_findings_not_errors() -> None:
    assert check_ast(b"x = 1\n") == []
    assert [f.rule for f in check_ast(b"x = '\xff'")] == ["invalid-source"]
    assert [f.rule for f in check_ast("x = '\ud800'")] == ["invalid-source"]
    with pytest.raises(TypeError, match="str or bytes"):
        check_ast(42)  # type: ignore[arg-type]


def test_huge_and_deep_inputs_terminate_with_findings() -> None:
    assert check_ast("x = " + "(" * 100_000 + "1" + ")" * 100_000)[0].rule == "source-limit"
    assert check_ast("x = 1\n" * 10, Policy(max_source_bytes=16))[0].rule == "source-limit"
    many = check_ast("eval\n" * 1000)
    assert len(many) == 51 and many[-1].message == "950 more finding(s) not shown"


def test_policy_defaults_and_overrides() -> None:
    default = Policy()
    assert "json" in default.allowed_modules and "os" not in default.allowed_modules
    assert "__init__" in default.allowed_dunders
    assert sandbox.DEFAULT_ALLOWED_MODULES == default.allowed_modules
    numpy_ok = Policy(allowed_modules=sandbox.DEFAULT_ALLOWED_MODULES | {"numpy"})
    assert check_ast("import numpy.linalg", numpy_ok) == []
    assert check_ast("import numpy") != []
    strict = Policy(denied_names=["print"], allowed_dunders=[])
    assert {f.rule for f in check_ast("print(1)\nclass A:\n    def __init__(s): pass", strict)} == {
        "name-denied",
        "dunder-name",
    }
    with_module = Policy(toolboxes={"tb": types})
    assert "types" in with_module.allowed_modules and with_module.toolbox_aliases == {"tb"}
    with pytest.raises(TypeError):
        Policy(allowed_modules="os")
    with pytest.raises(TypeError):
        Policy(toolboxes={"tb": 3})
    with pytest.raises(ValueError):
        Policy(denied_names=[""])


def test_ast_gate_callable() -> None:
    gate = AstGate(toolboxes=["tb"])
    assert gate("tb.run()") == []
    assert [f.rule for f in gate("tb = 2")] == ["rebind-toolbox"]
    assert gate.policy.toolbox_aliases == {"tb"}
    with pytest.raises(TypeError):
        AstGate(Policy(), toolboxes=["tb"])


def test_every_rule_is_documented() -> None:
    assert set(sandbox.RULES) >= {"syntax-error", "name-denied", "dunder-attribute"}
    assert all(summary for summary in sandbox.RULES.values())


def test_concurrent_checks_agree() -> None:
    cells = [a[0] for a in ATTACKS] + BENIGN
    expected = [check_ast(c, TOOLBOX_POLICY) for c in cells]
    errors: list[str] = []

    def worker() -> None:
        for _ in range(20):
            for code, want in zip(cells, expected):
                if check_ast(code, TOOLBOX_POLICY) != want:
                    errors.append(code)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


# --- differential: whatever CPython sees, the gate must see -------------------

DENIED_CALLS = {"eval", "exec", "open", "getattr", "__import__", "compile", "globals"}

FRAGMENTS = [
    "'", '"', "'''", '"""', "r'", 'r"', "f'", 'f"', "rf'", "b'", "u'", "\\", "\\\n", "\n",
    "\r\n", "\r", "#", " ", "\t", "\f", "{", "}", "{{", "}}", "(", ")", "[", "]", ":", "=",
    ",", ";", "x", "x.y", "\\'", '\\"', "\\N{DIGIT ONE}", "eval(1)", "exec('')", "open",
    "x.__class__", "x._p", "g.gi_frame", "import os", "from os import path", "\uff45\uff56\uff41\uff4c(1)",
    "lambda a=getattr: a", "print", " if 1 else ", "!r", ":>{w}", "\u00e9", "pass",
    "def f():", "class C:", "    ", "@", "*", "**", ":=", "match", "case", "yield", "async",
]


class CpythonSees(ast.NodeVisitor):
    """Whether CPython's AST contains something the default policy denies."""

    def __init__(self) -> None:
        self.denied = False

    def visit_Name(self, node: ast.Name) -> None:
        if node.id in DENIED_CALLS:
            self.denied = True

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if node.attr.startswith("_") or node.attr in {"gi_frame", "f_globals"}:
            self.denied = True
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.denied = True

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        self.denied = True


def cpython_sees_denied(code: str) -> bool | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return None  # CPython will not run it either
    seer = CpythonSees()
    seer.visit(tree)
    return seer.denied


def test_gate_sees_what_cpython_sees() -> None:
    rng = random.Random(20261202)
    runnable = denied = 0
    for _ in range(40_000):
        code = "".join(rng.choice(FRAGMENTS) for _ in range(rng.randint(1, 12)))
        verdict = cpython_sees_denied(code)
        if verdict is None:
            continue
        runnable += 1
        if verdict:
            denied += 1
            assert check_ast(code) != [], f"the gate allowed {code!r}, which CPython runs"
    assert runnable > 1000 and denied > 200  # the generator reaches both kinds


def test_identifier_folding_matches_cpython_nfkc() -> None:
    # Every non-ASCII letter that CPython folds to an ASCII letter, in a name.
    folded = 0
    for cp in range(0x80, 0x30000):
        ch = chr(cp)
        target = unicodedata.normalize("NFKC", ch)
        if target not in ("e",) or not ("a" + ch).isidentifier():
            continue
        code = "\uff45v\uff41l(1)".replace("\uff45", ch, 1)  # <ch>v<fullwidth a>l(1)
        if cpython_sees_denied(code):
            folded += 1
            assert check_ast(code) != [], f"U+{cp:04X} spelled eval past the gate"
    assert folded > 10


# --- end to end: a gate on either backend --------------------------------------


def _make_backend(kind: str, gate):
    if kind == "inprocess":
        inprocess = importlib.import_module("dolsot.inprocess")
        return inprocess.InProcessSession(inject={"m": "math"}, gate=gate)
    repl = importlib.import_module("dolsot.repl")
    store = importlib.import_module("dolsot.store")
    # A store of its own: session "s" in the default store may hold what an
    # earlier run (or a person's CLI) left there.
    return repl.Repl(inject={"m": "math"}, gate=gate, store=store.MemoryStore())


@pytest.mark.parametrize("kind", ["inprocess", "repl"])
@pytest.mark.parametrize(
    "gate", [check_ast, AstGate(toolboxes={"m": "math"})], ids=["check_ast", "AstGate"]
)
def test_rejected_cell_fails_and_has_no_effect(kind: str, gate) -> None:
    backend = _make_backend(kind, gate)
    try:
        assert backend.run("s", "x = m.sqrt(16)\nx").value == "4.0"
        rejected = backend.run("s", "x = 99\nprint('ran')\n().__class__.__subclasses__()")
        assert (rejected.ok, rejected.exit_code, rejected.stdout) == (False, 1, "")
        assert "line 3, col 4: [dunder-attribute]" in rejected.error
        assert backend.run("s", "x").value == "4.0"  # the rejected cell had no effect
    finally:
        backend.close()
