"""Benign cells the default gate refused before #38 ("Fewer false alarms"):
each runs through ``InProcessSession(gate=AstGate(Policy()))`` and gives the
expected value, and its dangerous neighbours are still refused, by the named
rule. The C++ side (both paths, many more spellings) is
tests/sandbox/gate_false_alarms_test.cc."""

from __future__ import annotations

import pytest

from dolsot.inprocess import InProcessSession
from dolsot.sandbox import AstGate, Policy, check_ast


@pytest.fixture
def session():
    with InProcessSession(gate=AstGate(Policy()), typecheck=False) as s:
        yield s


BENIGN = [
    ("import re\nre.compile(r'\\d+').findall('a1b22')\n", "['1', '22']"),
    ("from collections import namedtuple\nP = namedtuple('P', 'x y')\np = P(1, 2)\n"
     "(p._replace(x=3), p._asdict(), P._fields, P._make([5, 6]), P._field_defaults)\n",
     "(P(x=3, y=2), {'x': 1, 'y': 2}, ('x', 'y'), P(x=5, y=6), {})"),
    ("try:\n    raise ValueError('bad', 3)\nexcept ValueError as err:\n"
     "    found = err.args[0] == 'bad' and len(err.args) == 2\nfound\n", "True"),
    ("try:\n    raise ValueError('bad', 3)\nexcept ValueError as err:\n    err.args[0]\n", None),
    ("class Image:\n    format = 'png'\no = Image()\n"
     "(o.format == 'png', o.format in ('png', 'jpeg'), str(o.format), f'{o.format}')\n",
     "(True, True, 'png', 'png')"),
    ("import csv, io\nlist(csv.reader(io.StringIO('a,b\\n1,2')))\n", "[['a', 'b'], ['1', '2']]"),
    ("import csv, io\nout = io.StringIO()\ncsv.writer(out).writerow([1, 'x'])\nout.getvalue()\n",
     "'1,x\\r\\n'"),
    ("import io\nb = io.BytesIO(b'abc')\nb.seek(1, io.SEEK_SET)\nb.read()\n", "b'bc'"),
]


@pytest.mark.parametrize("code,value", BENIGN)
def test_benign_cells_run_and_give_their_value(session, code: str, value: str | None) -> None:
    assert check_ast(code, Policy()) == []
    result = session.run("s", code)
    assert result.ok, result.error
    if value is not None:
        assert result.value == value


def test_a_caught_exception_payload_is_shown_in_its_own_cell(session) -> None:
    result = session.run("s", "try:\n    raise ValueError('bad', 3)\nexcept ValueError as err:\n"
                              "    print(err.args[0], err.args[1] == 3)\n")
    assert result.ok, result.error
    assert result.stdout == "bad True\n"


REFUSED = [
    ("c = compile('1', 'f', 'eval')\n", "name-denied", 1),
    ("from re import compile\n", "name-denied", 1),
    ("p._source\n", "private-attribute", 1),
    ("try:\n    int('x')\nexcept ValueError as err:\n    kept = err.args[0]\n", "attribute-denied", 4),
    ("try:\n    int('x')\nexcept ValueError as err:\n    same = err.args[0] == other\n", "attribute-denied", 4),
    ("f = o.format\n", "format-string", 1),
    ("o.format('{0.__class__}')\n", "format-string", 1),
    ("import io\nio.open('/etc/passwd').read()\n", "attribute-denied", 2),
    ("from io import open as o\n", "attribute-denied", 1),
    ("import io\nm = io\n", "attribute-denied", 2),
    ("import io as i\n", "import-denied", 1),
    ("import io\nclass S(io.StringIO):\n    def close(self):\n        pass\n", "attribute-denied", 2),
    ("import csv\ncsv.register_dialect('excel', delimiter=';')\n", "attribute-denied", 2),
    ("open('/etc/passwd')\n", "name-denied", 1),
]


@pytest.mark.parametrize("code,rule,line", REFUSED)
def test_dangerous_neighbours_are_still_refused(session, code: str, rule: str, line: int) -> None:
    result = session.run("s", code)
    assert not result.ok
    assert "rejected by the gate" in result.error
    assert f"line {line}" in result.error and f"[{rule}]" in result.error, result.error
    assert [f.rule for f in check_ast(code, Policy())].count(rule) >= 1
