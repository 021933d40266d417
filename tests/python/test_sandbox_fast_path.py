"""dolsot.sandbox: the gate's fast path (a token-level proof that a cell is
allowed, which skips the parse). Run with PYTHONPATH=<build>/python.

The fast path must never accept what CPython runs as a denied construct,
however it is spelled; and a syntax error it lets through must be refused by
CPython before anything of the cell runs (docs/gate.md, "The fast path").
"""

from __future__ import annotations

import importlib
import ast
import random
import warnings

import pytest

from dolsot.sandbox import Policy, check_ast

TOOLBOX_POLICY = Policy(toolboxes={"tb": "mytools.api"})

# Spellings aimed at a token-level check: each is valid Python that CPython
# runs with a denied construct in it, and the gate must reject it.
FAST_PATH_ATTACKS = [
    ("\uff45\uff56\uff41\uff4c('1')", "name-denied"),  # fullwidth eval
    ("\u212fval('1')", "name-denied"),  # script small e
    ("x = \u212fval", "name-denied"),
    ("import math\nmath.\u017fin(1)\nx = tb.\u017fys", "attribute-denied"),  # long s
    ("x = y._\uff3fclass__", "dunder-attribute"),  # fullwidth low line
    ("tb\\\n.x = 1", "module-assignment"),
    ("(tb  # comment\n .x) = 1", "module-assignment"),
    ("tb.x \\\n  += 1", "module-assignment"),
    ("a, tb.x = 1, 2", "module-assignment"),
    ("def f():\n    del tb.x", "module-assignment"),
    ("Counter.x = 1\nfrom collections import Counter", "module-assignment"),
    ("x = 1; import os", "import-denied"),
    ("if x: import os", "import-denied"),
    ("a.\\\n_x", "private-attribute"),
    ("a . _x", "private-attribute"),
    ("f'{x._y}'", "private-attribute"),
    ("f'{x:{eval}}'", "name-denied"),
    ("f'{x!r:>{y.__class__}}'", "dunder-attribute"),
    ("f'{t.format(x)}'", "format-string"),
    ("rf'{eval}'", "name-denied"),
    ("x = list = []", "rebind-builtin"),
    ("a, list = 1, 2", "rebind-builtin"),
    ("(list) = 1", "rebind-builtin"),
    ("[a, list] = 1, 2", "rebind-builtin"),
    ("*list, = [1]", "rebind-builtin"),
    ("list: int = 3", "rebind-builtin"),
    ("list += [1]", "rebind-builtin"),
    ("for list in x: pass", "rebind-builtin"),
    ("with x as list: pass", "rebind-builtin"),
    ("try: pass\nexcept E as list: pass", "rebind-builtin"),
    ("def list(): pass", "rebind-builtin"),
    ("class list: pass", "rebind-builtin"),
    ("f(list := 3)", "rebind-builtin"),
    ("def f():\n    global list\n    list = 1", "rebind-builtin"),
    ("if 1: list = 2", "rebind-builtin"),
    ("class A: pass\nlist = 1", "rebind-builtin"),
    ("def f():\n    pass\nlist = 1", "rebind-builtin"),
    ("import math as tb", "rebind-toolbox"),
    ("from math import pi as print", "rebind-builtin"),
]


# The red team's findings (docs/gate.md, "Known limits" and "Stores"): each cell
# is valid Python that CPython runs as a store into a module or the toolbox, or
# as a call that writes into one. Both paths must reject it by the rule named.
# H1: attribute targets of comprehensions, in any bracket.
COMPREHENSION_TARGET_STORES = [
    ('import math\nsum(0 for math.pi in [1])', 'module-assignment'),
    ('import math\n{0 for math.pi in [2]}', 'module-assignment'),
    ('import math\n{0: 0 for math.pi in [1]}', 'module-assignment'),
    ("import math\nx = f'{[0 for math.pi in [3]]}'", 'module-assignment'),
    ('import math\nd = {}\nd[[0 for math.pi in [5]][0]] = 1', 'module-assignment'),
    ('import math\nx[[0 for math.pi in [1]]]', 'module-assignment'),
    ('import math\n@dec(*[0 for math.pi in [1]])\ndef f(): pass', 'module-assignment'),
    ('import math\ndef f(a=[0 for math.pi in [1]]): pass', 'module-assignment'),
    ('import math\nclass C(*[0 for math.pi in [1]]): pass', 'module-assignment'),
    ('import math\nprint([0 for y in [1] for math.pi in [1]])', 'module-assignment'),
    ('import math\nprint([0 for x, math.pi in [(1, 2)]])', 'module-assignment'),
    ('import math\nprint([0 for *math.pi, in [[1]]])', 'module-assignment'),
    ('import json as j\nprint({0 for j.dumps in [1]})', 'module-assignment'),
    ('from json import dumps\nprint({0 for dumps.x in [1]})', 'module-assignment'),
    ('sum(0 for tb.x in [1])', 'module-assignment'),
    ('print([0 for tb.x in [1]])', 'module-assignment'),
    ('x = lambda: {0 for tb.x in [1]}', 'module-assignment'),
    ('def f():\n    sum(0 for tb.x in [1])', 'module-assignment'),
    ('import math\n[0 for math.pi in [6]]', 'module-assignment'),
    ("import json\nprint({0 for json.dumps in [lambda *a, **k: 'PWNED']})", 'module-assignment'),
    ('sum(0 for tb.secret_limit in [10**9])', 'module-assignment'),
]
# H2: attribute stores whose object is not a plain name chain.
NON_NAME_OBJECT_STORES = [
    ('import math\n(math).pi = 1', 'module-assignment'),
    ('import math\n((math)).pi += 1', 'module-assignment'),
    ('import math\ndel (math).pi', 'module-assignment'),
    ('import math\nfor (math).pi in range(3): pass', 'module-assignment'),
    ('import math\nfor x, (math).pi in [(1, 2)]: pass', 'module-assignment'),
    ('import math\nwith c as (x, (math).pi): pass', 'module-assignment'),
    ('import math\n[(math).pi] = [1]', 'module-assignment'),
    ('import math\nx = (math).pi = 2', 'module-assignment'),
    ('import math\n(\nmath\n).pi = 1', 'module-assignment'),
    ('import math\n(  # c\nmath).pi = 1', 'module-assignment'),
    ('def f():\n    (tb).x = 1', 'module-assignment'),
    ('(tb or 0).x = 1', 'module-assignment'),
    ('(tb if 1 else 0).x = 1', 'module-assignment'),
    ('(0 or tb).x = 1', 'module-assignment'),
    ('import math\n(math or 0).pi = 1', 'module-assignment'),
    ('import math\n[math][0].pi = 1', 'module-assignment'),
    ('print({0 for (tb).x in [1]})', 'module-assignment'),
    ('import math\n(math).pi = 3', 'module-assignment'),
    ('(tb).x = 1', 'module-assignment'),
    ('import math\n(m := math).pi = 1', 'module-assignment'),
    ('def f():\n    del (tb).x', 'module-assignment'),
    ('import math\nmath.x[0].y = 1', 'module-assignment'),
    ('tb.f(x).y = 3', 'module-assignment'),
]
# Found while fuzzing the fixes: tree-sitter reads `type[1]` and the next line
# as one `type` alias statement; CPython runs two statements (the second stores
# into math on 3.10-3.13). The full path fails closed.
TYPE_ALIAS_MISPARSES = [
    ("import math\ntype[1]\n[math.pi] = [1]", "syntax-error"),
    ("type[1]\n[tb] = [1]", "syntax-error"),
    ("type(1)\n[list] = [1]", "syntax-error"),
]
# H4: allowed-module functions that write attributes into their argument.
ATTRIBUTE_WRITERS = [
    ("import json, functools\ndef f(): pass\nf.dumps = lambda *a, **k: 'PWNED2'\nfunctools.update_wrapper(json, f)\n", 'attribute-denied'),
    ('import json, functools\ndef f(): pass\nfunctools.wraps(f)(json)\n', 'attribute-denied'),
    ('import functools\ndef f(): pass\nfunctools.update_wrapper(tb, f)\n', 'attribute-denied'),
    ('from functools import wraps\n', 'attribute-denied'),
    ('from functools import update_wrapper as u\n', 'attribute-denied'),
    ("import enum\nclass C(enum.Enum):\n    __module__ = 'json'\n    dumps = 1\nenum.global_enum(C)\n", 'attribute-denied'),
    ('from enum import global_enum\n', 'attribute-denied'),
]


@pytest.mark.parametrize(
    "code,rule",
    COMPREHENSION_TARGET_STORES + NON_NAME_OBJECT_STORES + ATTRIBUTE_WRITERS + TYPE_ALIAS_MISPARSES,
)
def test_red_team_cell_is_rejected_by_both_paths(code: str, rule: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ast.parse(code)  # valid Python: CPython would run it
    fast = check_ast(code, TOOLBOX_POLICY)
    assert rule in {f.rule for f in fast}, fast
    # `global _` first: the fast path leaves the cell to the parse and walk.
    full = check_ast("global _\n" + code, TOOLBOX_POLICY)
    assert rule in {f.rule for f in full}, full


def test_comprehension_and_parenthesised_stores_never_reach_the_host() -> None:
    """End to end (the red team's repro): the rejected cells change nothing."""
    inprocess = importlib.import_module("dolsot.inprocess")
    import json
    import math
    import types

    api = types.ModuleType("mytools_api")
    api.secret_limit = 10
    session = inprocess.InProcessSession(
        inject={"tb": api}, gate=lambda code: check_ast(code, TOOLBOX_POLICY)
    )
    pi = math.pi
    try:
        for code in [
            "import json\nprint({0 for json.dumps in [lambda *a, **k: 'PWNED']})",
            "sum(0 for tb.secret_limit in [10**9])",
            "import math\n(math).pi = 3",
            "import json, functools\ndef f(): pass\nf.dumps = lambda *a, **k: 'PWNED2'\n"
            "functools.update_wrapper(json, f)\n",
        ]:
            result = session.run("s", code)
            assert not result.ok, code
        assert json.dumps({}) == "{}"
        assert api.secret_limit == 10
        assert math.pi == pi
    finally:
        session.close()


# Cells where the full path reports a binding the fast path does not: CPython
# refuses the cell (D1) or binds nothing (D2, D3), so nothing of it runs as a
# binding. These are the only disagreements tolerated.
BENIGN_DIFFERENTIALS = [
    "def f():\n    pass\n  list = 1",
    "def f(): pass\n    list = 1",
    "class A: pass\n\n    list = 1",
    "def f():\n    if 1:\n        pass\n  list = 1",
    "x = f'{list:=1}'",
]
# (`type[list] = 1` was one; `type` as a value now sends it to the full path.)


@pytest.mark.parametrize("code", BENIGN_DIFFERENTIALS)
def test_benign_differentials_bind_nothing_in_cpython(code: str) -> None:
    assert check_ast(code, TOOLBOX_POLICY) == []
    full = {f.rule for f in check_ast("global _\n" + code, TOOLBOX_POLICY)}
    assert full <= {"rebind-builtin", "syntax-error"}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(code)
    except SyntaxError:
        return  # CPython refuses the cell: nothing runs
    stores = [
        node.id for node in ast.walk(tree)
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load)
    ]
    assert "list" not in stores, ast.dump(tree)


@pytest.mark.parametrize("code,rule", FAST_PATH_ATTACKS)
def test_fast_path_attack_is_rejected(code: str, rule: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            ast.parse(code)
        except SyntaxError:
            assert rule == "syntax-error", "the attack must be valid Python"
    findings = check_ast(code, TOOLBOX_POLICY)
    assert rule in {f.rule for f in findings}, findings


def test_typical_cells_are_allowed() -> None:
    cells = [
        "import math, json as j\nfrom collections import (Counter,\n    defaultdict,)\n"
        "r = math.pi * 2\nprint(j.dumps({'a': Counter('ab')}))\n",
        "class C:\n    id: int = 0\n    def __init__(self):\n        self.type = 'x'\n",
        "s = f'{a!r:>{w}} {b[\"k\"]} {c:.2f} {{eval}} {d=}'\n",
        "x = tb.fetch('u')\nn = len(x)\nprint(sorted(x, key=lambda r: r[1]))\n",
    ]
    for code in cells:
        assert check_ast(code, TOOLBOX_POLICY) == [], code


def test_syntax_error_passed_by_the_fast_path_never_runs() -> None:
    """The fast path does not prove validity: `x = = 1` has no finding, and
    CPython refuses to compile it, so none of the cell runs."""
    inprocess = importlib.import_module("dolsot.inprocess")
    code = "ran = True\nx = = 1\n"
    assert check_ast(code) == []
    session = inprocess.InProcessSession(gate=check_ast)
    try:
        result = session.run("s", code)
        assert not result.ok
        assert "SyntaxError" in result.error
        assert session.run("s", "'ran' in dir()").value == "False"
    finally:
        session.close()


def test_fast_path_agrees_with_cpython_on_generated_cells() -> None:
    """Cells of tokens the fast path handles: whenever CPython's AST has a
    denied name, a module-level rebinding of a builtin or a toolbox store, the
    gate rejects the cell."""
    fragments = [
        "print", "list", "tb", "x", "y", "eval", "_p", "=", "+=", ":=", ".", ",", "(", ")",
        "[", "]", ":", ";", "*", "for", "in", "del", "as", "with", "return", "if", "else",
        "def", "f", "lambda", "'a'", "f'{x}'", "\n", "\n    ", "\\\n", "# c\n", "1", " ",
        "pass", "not", "->", "@", "class",
    ]
    builtins = {"print", "list"}
    rng = random.Random(20261203)
    runnable = denied = 0

    def sees_denied(tree: ast.AST) -> bool:
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id == "eval":
                return True
            if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
                return True
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, (ast.Store, ast.Del)):
                root = node.value
                while isinstance(root, ast.Attribute):
                    root = root.value
                if isinstance(root, ast.Name) and root.id == "tb":
                    return True
        for stmt in tree.body:  # module level bindings of builtins / the toolbox
            for node in ast.walk(stmt):
                if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Lambda)):
                    if (getattr(node, "name", None) in builtins | {"tb"}
                            and _at_module_level(stmt, node)):
                        return True
                    continue
                if (isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del))
                        and node.id in builtins | {"tb"} and _at_module_level(stmt, node)):
                    return True
        return False

    for _ in range(20_000):
        code = "".join(rng.choice(fragments) for _ in range(rng.randint(1, 10)))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tree = ast.parse(code)
        except (SyntaxError, ValueError):
            continue
        runnable += 1
        if sees_denied(tree):
            denied += 1
            assert check_ast(code, TOOLBOX_POLICY) != [], f"the gate allowed {code!r}"
    assert runnable > 1000 and denied > 50


def _at_module_level(stmt: ast.stmt, target: ast.AST) -> bool:
    """Whether `target` inside `stmt` is outside every function, class and lambda."""
    def search(node: ast.AST) -> bool | None:
        if node is target:
            return True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            return None
        children = list(ast.iter_child_nodes(node))
        if isinstance(node, ast.comprehension):  # its target is local to the comprehension
            children = [node.iter, *node.ifs]
        for child in children:
            found = search(child)
            if found is not None:
                return found
        return None
    return bool(search(stmt))


def test_fast_path_never_allows_what_the_full_path_rejects() -> None:
    """Generated cells: when a valid cell has no finding, the full path (forced
    by a first line `global _`, which the gate allows and the fast path leaves
    to the parser) finds nothing but syntax errors in it either."""
    fragments = [
        "print", "list", "tb", "math", "x", "_p", "__init__", "eval", "format", "type",
        "=", "+=", ":=", ".", ",", "(", ")", "[", "]", "{", "}", ":", ";", "*", "**", "for",
        "in", "del", "as", "with", "return", "if", "else", "def f", "class C", "lambda",
        "import math", "from math import pi", "'a'", "f'{x}'", "f'{x!r:>{y}}'", "rb'x'",
        "\n", "\n    ", "\\\n", "# c\n", "1", "1.5e3", " ", "@", "yield", "not", "->",
    ]
    rng = random.Random(20261204)
    compared = 0
    for _ in range(20_000):
        code = "".join(rng.choice(fragments) for _ in range(rng.randint(1, 10)))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ast.parse(code)
        except (SyntaxError, ValueError):
            continue
        if check_ast(code, TOOLBOX_POLICY):
            continue
        compared += 1
        full = check_ast("global _\n" + code, TOOLBOX_POLICY)
        assert {f.rule for f in full} <= {"syntax-error"}, (code, full)
    assert compared > 500
