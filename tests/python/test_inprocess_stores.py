"""The AST gate's module-assignment rule held at run time (docs/gate.md, "The
runtime half"): in an InProcessSession with an AST gate, a cell cannot change
a module, a class it did not define, a table a module holds or a dataclass
Field, whatever name it reaches them by. Each attack runs in a child process
(a broken host cannot poison pytest), which then checks the host's own state
and another session's, and prints what it saw as JSON."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.timeout(120)

# The child: runs CELLS (list of (session, code)) through a gated session and
# reports the last Result, the host's state (compared with a snapshot taken
# before) and a fresh session's view of the same modules.
CHILD = r'''
import collections.abc, copy, dataclasses, fractions, hashlib, html, html.entities, json
import random, sys, textwrap, time, uuid, types, collections, weakref
report = repr  # the parent reads it back with ast.literal_eval: json itself may be broken
from dolsot.inprocess import InProcessSession
from dolsot.sandbox import AstGate, Policy

class Host:
    x = 1

CACHE = []

# A host module holding one table of each kind (injected as `hm`).
hm = types.ModuleType("hostmod")
hm.q = collections.deque([1, 2])
hm.dd = collections.defaultdict(list, a=[1])
hm.od = collections.OrderedDict(a=1, b=2)
hm.counter = collections.Counter("aab")
hm.bs = bytearray(b"ab")
hm.st = {1, 2}
hm.keep = [Host]  # keeps the WeakValueDictionary's value alive
hm.wv = weakref.WeakValueDictionary({"host": Host})

def hm_state():
    return [list(hm.q), {k: list(v) for k, v in hm.dd.items()}, list(hm.od.items()),
            dict(hm.counter), bytes(hm.bs), sorted(hm.st), dict(hm.wv)]

def make_class():  # a host factory that makes a class once and keeps it
    if not CACHE:
        CACHE.append(type("Made", (), {"x": 1}))
    return CACHE[0]

MODULES = [json, json.decoder, hashlib, html, uuid, time, random, copy, textwrap, fractions]
CLASSES = [json.JSONDecoder, json.JSONEncoder, random.Random, uuid.UUID, uuid.SafeUUID,
           fractions.Fraction, textwrap.TextWrapper, collections.abc.Mapping, Host]

def snapshot():
    return {
        "modules": {m.__name__: dict(vars(m)) for m in MODULES},
        "classes": {c.__qualname__: dict(vars(c)) for c in CLASSES},
        "tables": [dict(copy.dispatch_table), dict(html.entities.html5), list(json.__all__),
                   hm_state()],
    }

def same(before, after):
    changed = []
    for kind in ("modules", "classes"):
        for name, attrs in before[kind].items():
            now = after[kind][name]
            for key in set(attrs) | set(now):
                if key not in attrs or key not in now or attrs[key] is not now[key]:
                    changed.append(f"{name}.{key}")
    if before["tables"] != after["tables"]:
        changed.append("a table")
    return changed

def behaves():
    return {
        "dumps": json.dumps({"a": 1}),
        "loads": json.loads("[1]"),
        "sha256": hashlib.sha256(b"").hexdigest(),
        "escape": html.escape("<"),
        "uuid4_differ": uuid.uuid4() != uuid.uuid4(),
        "choice": random.Random(1).choice([1, 2, 3]) in (1, 2, 3),
    }

OTHER = "import json, hashlib, html\n(json.dumps({'a': 1}), hashlib.sha256(b'').hexdigest(), html.escape('<'))"

spec = json.loads(sys.argv[1])
before = snapshot()
expected = behaves()
sleep = time.sleep
policy = Policy()
if spec.get("allow"):
    policy = Policy(allowed_modules=set(policy.allowed_modules) | set(spec["allow"]))
with InProcessSession({"tb": "json", "Host": Host, "make_class": make_class, "hm": hm},
                      gate=AstGate(policy), typecheck=False,
                      timeout=60) as s:
    other_before = s.run("other", OTHER).value
    variables = {}
    if spec.get("foreign_session_class"):
        s.run("b", "class Shared:\n    n = 1")
        variables["S"] = s.namespace("b")["Shared"]
    results = [s.run("a", code, variables=variables) for code in spec["cells"]]
    r = results[-1]
    for name in spec.get("drop", []):  # the host lets go of it: its finalizer runs here
        s.namespace("a").pop(name, None)
    refused_later = []
    for name in spec.get("call_later", []):  # the host calls a function the cell made
        try:
            s.namespace("a")[name]()
        except Exception as e:  # the guard's refusal, raised in the host's call
            refused_later.append(type(e).__name__ + ": " + str(e))
    other_after = s.run("other", OTHER).value
    checks = {}
    if spec.get("call_later"):
        checks["later"] = refused_later
    if spec.get("foreign_session_class"):
        checks["shared_n"] = s.namespace("b")["Shared"].n
    if CACHE:
        checks["made_x"] = CACHE[0].x
    if spec.get("view_check"):
        ns = s.namespace("a")
        checks["view"] = [isinstance(ns["json"], types.ModuleType), type(ns["json"]) is types.ModuleType,
                          isinstance(ns["tb"], types.ModuleType), ns["json"] is ns["tb"],
                          ns["json"].__spec__ is None and ns["json"].__loader__ is None,
                          ns["json"].__name__ == "json"]
    if spec.get("field"):
        A = s.namespace("a")["A"]
        checks["field_names"] = [f.name for f in dataclasses.fields(A)]
    stdout = "".join(x.stdout for x in results)
print(report({
    "ok": r.ok, "outcome": str(r.outcome), "error": r.error, "error_type": r.error_type,
    "value": r.value, "stdout": stdout,
    "changed": same(before, snapshot()),
    "behaves": behaves() == expected, "sleep_same": time.sleep is sleep,
    "other_same": other_before == other_after and other_before is not None,
    "checks": checks,
}))
'''


def run_child(cells: list[str], **extra) -> dict:
    spec = json.dumps({"cells": cells, **extra})
    done = subprocess.run([sys.executable, "-c", CHILD, spec], capture_output=True, text=True,
                          timeout=100)
    assert done.returncode == 0, done.stderr
    return ast.literal_eval(done.stdout.strip().splitlines()[-1])


def cell(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


# (id, cell): the offending store is on the cell's last line.
MODULE_ALIASES = [
    ("assignment", "import json\nj = json\nj.dumps = lambda *a, **k: 'X'"),
    ("for-loop", "import json\nfor m in (json,):\n    m.loads = lambda *a, **k: 'X'"),
    ("function-return", "import hashlib\ndef get():\n    return hashlib\nget().sha256 = hashlib.md5"),
    ("object-attribute", "import html\nclass Box:\n    pass\nb = Box()\nb.m = html\nb.m.escape = lambda s, quote=True: s"),
    ("dict-value", "import uuid\nd = {'m': uuid}\nd['m'].uuid4 = lambda: 1"),
    ("list-item", "import time\nl = [time]\nl[0].sleep = lambda s: None"),
    ("lambda-default", "import json\nf = lambda m=json: m\nf().dumps = str"),
    ("walrus", "import json\nif (m := json):\n    m.dumps = str"),
    ("toolbox-alias", "t = tb\nt.dumps = str"),
    ("from-import-submodule", "from json import decoder\nd = decoder\nd.scanstring = None"),
    ("attribute-submodule", "import json\nd = json.decoder\nd.JSONArray = None"),
    ("import-as", "import hashlib as h\nk = h\nk.sha256 = h.md5"),
    ("del", "import json\nj = json\ndel j.dumps"),
    ("augmented", "import random\nr = random\nr.BPF += 1"),
    ("in-a-function", "import time\ndef patch(m):\n    m.sleep = print\n    return m\n\n\npatch(time)"),
]

FOREIGN_CLASSES = [
    ("JSONDecoder.decode", "import json\nD = json.JSONDecoder\nD.decode = lambda self, s, *a, **k: {'pwned': 1}"),
    ("Random.choice", "import random\nR = random.Random\nR.choice = lambda self, seq: seq[0]"),
    ("UUID.hex", "import uuid\nU = uuid.UUID\nU.hex = property(lambda self: '0' * 32)"),
    ("Fraction", "from fractions import Fraction\nF = Fraction\nF.limit_denominator = lambda self, *a: self"),
    ("TextWrapper", "import textwrap\nT = textwrap.TextWrapper\nT.wrap = lambda self, text: [text]"),
    ("enum-class", "import uuid\nS = uuid.SafeUUID\nS.extra = 1"),
    ("abc-class", "import collections.abc as cabc\nM = cabc.Mapping\nM.get = lambda self, k, d=None: 'X'"),
    ("host-injected-class", "H = Host\nH.x = 2"),
    ("del", "import json\nD = json.JSONDecoder\ndel D.decode"),
    ("dataclass-decorator-on-it", "import dataclasses, json\ndataclasses.dataclass(json.JSONDecoder)"),
    ("update-abstractmethods-on-it", "import abc, collections.abc as cabc\nabc.update_abstractmethods(cabc.Mapping)"),
    ("claim-it-with-the-sessions-marker", "import json\nD = json.JSONDecoder\nD.__module__ = __name__"),
    ("comprehension", "import json\nB = [c for c in (json.JSONDecoder,)][0]\nB.raw_decode = None"),
]

TABLES = [
    ("item-store", "import html.entities\nt = html.entities.html5\nt['amp;'] = '&&'"),
    ("item-del", "from html.entities import html5\nx = html5\ndel x['amp;']"),
    ("update", "import copy\nt = copy.dispatch_table\nt.update({int: None})"),
    ("clear", "import copy\nt = copy.dispatch_table\nt.clear()"),
    ("pop", "import html.entities as e\nt = e.html5\nt.pop('amp;')"),
    ("setdefault", "import html.entities as e\nt = e.html5\nt.setdefault('zzz;', 'x')"),
    ("ior", "import html.entities as e\nt = e.html5\nt |= {'zzz;': 'x'}"),
    ("list-append", "import json\na = json.__all__\na.append('evil')"),
    ("list-iadd", "import json\na = json.__all__\na += ['evil']"),
    ("shuffle", "import json, random\nrandom.shuffle(json.__all__)"),
    ("insort", "import json, bisect\nbisect.insort(json.__all__, 'a')"),
    ("escape-table", "import json.encoder as enc\nt = enc.ESCAPE_DCT\nt['\"'] = 'X'"),
    ("inner-value", "import html.entities as e\nrows = [e.codepoint2name, e.name2codepoint]\nrows[1]['amp'] = 0"),
    ("deque-appendleft", "q = hm.q\nq.appendleft(0)"),
    ("deque-rotate", "q = hm.q\nq.rotate(1)"),
    ("defaultdict-inner-list", "d = hm.dd\nd['a'].append(2)"),
    ("ordereddict-move", "o = hm.od\no.move_to_end('a')"),
    ("counter-update", "c = hm.counter\nc.update('zz')"),
    ("bytearray-iadd", "b = hm.bs\nb += b'x'"),
    ("bytearray-item", "b = hm.bs\nb[0] = 65"),
    ("set-add", "t = hm.st\nt.add(3)"),
    ("set-ior", "t = hm.st\nt |= {3}"),
    ("weakvaluedict-store", "w = hm.wv\nw['other'] = Host"),
    ("kept-across-names", "import copy\nkeep = {'t': copy.dispatch_table}\nkeep['t'][complex] = None"),
]


def store_line(code: str) -> int:
    """The line of the offending store: the last line, or the one a function
    body holds (its first indented line) when the cell ends with a call."""
    lines = code.splitlines()
    if lines[-1].startswith("patch("):
        return next(i for i, line in enumerate(lines, 1) if line.startswith("    "))
    return len(lines)


def assert_refused(out: dict, cells: list[str]) -> None:
    assert out["outcome"] == "Outcome.ERROR", out  # ran: the static gate let it through
    assert out["error_type"] in ("AttributeError", "TypeError"), out
    line = store_line(cells[-1])
    assert f"line {line}, col " in out["error"], out["error"]
    assert "[module-assignment]" in out["error"], out["error"]
    assert out["changed"] == [], out["changed"]
    assert out["behaves"] and out["sleep_same"] and out["other_same"], out


@pytest.mark.parametrize("code", [c for _, c in MODULE_ALIASES], ids=[i for i, _ in MODULE_ALIASES])
def test_a_module_cannot_be_changed_through_an_alias(code):
    assert_refused(run_child([code]), [code])


@pytest.mark.parametrize("code", [c for _, c in FOREIGN_CLASSES], ids=[i for i, _ in FOREIGN_CLASSES])
def test_a_class_the_session_did_not_define_cannot_be_changed(code):
    assert_refused(run_child([code]), [code])


def test_a_class_another_session_defined_cannot_be_changed():
    code = "S.n = 2"
    out = run_child([code], foreign_session_class=True)
    assert_refused(out, [code])
    assert out["checks"]["shared_n"] == 1


@pytest.mark.parametrize("code", [c for _, c in TABLES], ids=[i for i, _ in TABLES])
def test_a_table_a_module_holds_cannot_be_changed(code):
    assert_refused(run_child([code]), [code])


FIELD_ATTACKS = [
    ("through-fields", [
        "import dataclasses\n@dataclasses.dataclass\nclass A:\n    x: int = 1",
        "import dataclasses\nfs = dataclasses.fields(A)\nfs[0].name = \"x=print('PWNED') or 1\"",
    ]),
    ("kept-field", [
        "from dataclasses import dataclass, field\nf = field(default=1)\n@dataclass\nclass A:\n    x: int = f",
        "g = f\ng.name = \"x=print('PWNED') or 1\"",
    ]),
    ("delete", [
        "import dataclasses\n@dataclasses.dataclass\nclass A:\n    x: int = 1",
        "import dataclasses\nf = dataclasses.fields(A)[0]\ndel f.name",
    ]),
]


@pytest.mark.parametrize("cells", [c for _, c in FIELD_ATTACKS], ids=[i for i, _ in FIELD_ATTACKS])
def test_a_dataclass_field_cannot_be_rewritten(cells):
    subclass = "from dataclasses import dataclass\n@dataclass\nclass B(A):\n    y: int = 2\nB().x"
    out = run_child(cells + [subclass], field=True)
    assert out["ok"], out  # the subclass is made from the untouched field
    assert "PWNED" not in out["stdout"]
    assert out["checks"]["field_names"] == ["x"]
    refused = run_child(cells, field=True)
    assert_refused(refused, cells)


BENIGN = [
    ("own-class-counter", "class C:\n    n = 0\nC.n += 1\nC.n += 1\nC.n", "2"),
    ("own-class-later-cell", ["class C:\n    n = 0", "C.n = 5\ndel C.n\nC.m = 1\nC.m"], "1"),
    ("dataclass", "from dataclasses import dataclass, field\n@dataclass(order=True)\nclass P:\n    x: int\n    y: list = field(default_factory=list)\nP(1) < P(2), P(3).y", "(True, [])"),
    ("dataclass-slots-frozen", "from dataclasses import dataclass\n@dataclass(slots=True, frozen=True)\nclass P:\n    x: int\nP(1).x, P.__slots__", "(1, ('x',))"),
    ("enum", "from enum import Enum, IntFlag, auto\nclass E(Enum):\n    A = auto()\n    B = auto()\nclass F(IntFlag):\n    R = 1\n    W = 2\nE.B.value, int(F.R | F.W), F(3).name is None or True", "(2, 3, True)"),
    ("abc", "from abc import ABC, abstractmethod\nclass Base(ABC):\n    @abstractmethod\n    def f(self): ...\nclass Impl(Base):\n    def f(self):\n        return 7\nImpl().f(), isinstance(Impl(), Base)", "(7, True)"),
    ("namedtuple", "from collections import namedtuple\nP = namedtuple('P', 'x y')\nP(1, 2).x + P(3, 4).y, P(5, 6)", "(5, P(x=5, y=6))"),
    ("typing-namedtuple", "from typing import NamedTuple\nclass P(NamedTuple):\n    x: int\n    y: int = 2\nP(1)", "P(x=1, y=2)"),
    ("protocol-generic", "from typing import Generic, Protocol, TypeVar, runtime_checkable\nT = TypeVar('T')\n@runtime_checkable\nclass HasLen(Protocol):\n    def size(self) -> int: ...\nclass Box(Generic[T]):\n    def __init__(self, v: T):\n        self.v = v\n    def size(self):\n        return 1\nisinstance(Box(1), HasLen), Box[int](2).v", "(True, 2)"),
    ("functools", "import functools\n@functools.total_ordering\nclass V:\n    def __init__(self, v):\n        self.v = v\n    def __eq__(self, o):\n        return self.v == o.v\n    def __lt__(self, o):\n        return self.v < o.v\n    @functools.cached_property\n    def double(self):\n        return self.v * 2\n@functools.singledispatch\ndef show(x):\n    return 'x'\nV(1) >= V(0), V(4).double, show(1)", "(True, 8, 'x')"),
    ("subclass-of-foreign", "import json\nclass D(json.JSONDecoder):\n    pass\nD.extra = 1\nD().decode('[1]'), D.extra", "([1], 1)"),
    ("read-tables", "import copy\nfrom html.entities import html5\nlen(html5) > 2000, 'amp;' in html5, html5['amp;'], html5.get('nope;', 0), sorted(html5)[0] == sorted(html5.keys())[0], len(dict(copy.dispatch_table)) == len(copy.dispatch_table.copy())", "(True, True, '&', 0, True, True)"),
    ("read-list-table", "import json\na = json.__all__\nlen(a) > 3, 'dumps' in a, a[0] == list(a)[0], a.index(a[1]), a == list(a), a + ['x'] == list(a) + ['x']", "(True, True, True, 1, True, True)"),
    ("read-kinds", "q, d, o, c, b, t, w = hm.q, hm.dd, hm.od, hm.counter, hm.bs, hm.st, hm.wv\n"
                   "(list(q), q[0], d['missing'], 'missing' in d, d.get('a'), list(o), c['zz'], c['a'], b[0], 2 in t, len(w), "
                   "sorted(t | {3}), list(reversed(q)))",
     "([1, 2], 1, [], False, [1], ['a', 'b'], 0, 2, 97, True, 1, [1, 2, 3], [2, 1])"),
    ("modules-work", "import json, hashlib\nfrom collections import OrderedDict\nfrom html import escape\nimport html.entities\njson.dumps(OrderedDict(a=1)), hashlib.sha256(b'').hexdigest()[:8], escape('<'), html.entities.name2codepoint['amp']", "('{\"a\": 1}', 'e3b0c442', '&lt;', 38)"),
    ("module-view-reads", "import json\nimport json as again\nj = json\nj is json, again is json, json.__name__, 'dumps' in dir(json), json.decoder.__name__", "(True, True, 'json', True, 'json.decoder')"),
    ("toolbox", "tb.dumps([1]), tb.__name__", "('[1]', 'json')"),
    ("caught", "import json\nj = json\ntry:\n    j.dumps = str\nexcept AttributeError as e:\n    print(str(e).split(':')[0])\njson.dumps([2])", "'[2]'"),
]


@pytest.mark.parametrize("cells,expected", [(c if isinstance(c, list) else [c], v) for _, c, v in BENIGN],
                         ids=[i for i, _, _ in BENIGN])
def test_benign_cells_give_their_values(cells, expected):
    out = run_child(cells)
    assert out["ok"], out
    assert out["value"] == expected
    assert out["changed"] == [] and out["behaves"] and out["other_same"]


def test_a_caught_refusal_is_the_finding_and_the_store_did_not_happen():
    out = run_child(["import json\nj = json\ntry:\n    j.dumps = str\nexcept AttributeError as e:\n"
                     "    print(str(e).split(' assigning')[0])\nj.dumps is str"])
    assert out["ok"], out
    assert out["value"] == "False"
    assert out["stdout"].startswith("line 4, col ")
    assert out["stdout"].rstrip().endswith(": [module-assignment]")
    assert out["changed"] == [] and out["behaves"]


UNGATED = r'''
import dataclasses, json, sys, types
from dolsot.inprocess import InProcessSession
with InProcessSession(typecheck=False, timeout=30) as s:
    r = s.run("a", "import json\nj = json\nj.dolsot_mark = 1\njson.JSONDecoder.dolsot_mark = 2\n"
                   "type(json) is type(sys) if False else type(j).__name__")
    print(r.value, json.dolsot_mark, json.JSONDecoder.dolsot_mark,
          type(s.namespace("a")["json"]) is types.ModuleType,
          "__setattr__" in vars(dataclasses.Field))
'''


def test_an_ungated_session_is_untouched():
    done = subprocess.run([sys.executable, "-c", UNGATED], capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["'module'", "1", "2", "True", "False"]


MIXED = r'''
import json
from dolsot.inprocess import InProcessSession
from dolsot.sandbox import AstGate, Policy
with InProcessSession(gate=AstGate(Policy()), typecheck=False) as gated, \
     InProcessSession(typecheck=False) as plain:
    refused = gated.run("a", "import json\nj = json\nj.dumps = str")
    allowed = plain.run("a", "import json\nD = json.JSONDecoder\nD.dolsot_mark = 3\nD.dolsot_mark")
    print(refused.error_type, allowed.value, json.JSONDecoder.dolsot_mark)
'''


def test_an_ungated_session_beside_a_gated_one_is_not_guarded():
    done = subprocess.run([sys.executable, "-c", MIXED], capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["AttributeError", "3", "3"]


def test_a_gated_session_holds_module_views():
    out = run_child(["import json\nj = json"], view_check=True)
    assert out["ok"], out
    # a ModuleType, not the module itself; the toolbox alias is the same view;
    # no loader that would hand out the module (load_module)
    assert out["checks"]["view"] == [True, False, True, True, True, True]


def test_numpy_and_pandas_first_imported_in_a_gated_cell_work():
    pytest.importorskip("numpy")
    pytest.importorskip("pandas")
    cells = [
        "import numpy as np\na = np.arange(6).reshape(2, 3)\nint(a.sum()), a.T.shape",
        "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3], 'b': ['x', 'y', 'x']})\n"
        "df['c'] = df.a * 2\nint(df.groupby('b').c.sum()['x']), df.describe().shape",
    ]
    out = run_child(cells, allow=["numpy", "pandas"])
    assert out["ok"], out
    assert out["value"] == "(8, (8, 2))"
    # What pandas' own import does to the process (time.tzset, copyreg
    # registrations) is the module's top level, not the cell's: let through.
    assert out["behaves"] and out["other_same"]


DEFERRED = [
    ("generator-finally", "import json\nD = json.JSONDecoder\ndef g():\n    try:\n        yield 1\n"
                          "    finally:\n        D.decode = lambda self, s, *a, **k: 'X'\nit = g()\nnext(it)"),
    ("generator-finally-module", "import json\nj = json\ndef g():\n    try:\n        yield 1\n"
                                 "    finally:\n        j.dumps = str\nit = g()\nnext(it)"),
]


@pytest.mark.parametrize("code", [c for _, c in DEFERRED], ids=[i for i, _ in DEFERRED])
def test_cell_code_run_later_by_the_host_is_still_refused(code):
    # A generator's finally would run on the host's thread when the host
    # drops it, outside any cell. The static gate refuses the pattern first
    # (deferred-code); whatever gets through, the store is refused all the same.
    out = run_child([code], drop=["it"])
    assert out["ok"] or "[deferred-code]" in out["error"], out
    assert out["changed"] == [] and out["behaves"] and out["other_same"], out


@pytest.mark.parametrize("code", [
    "import json\nj = json\ndef later():\n    j.dumps = str",
    "import json\nD = json.JSONDecoder\ndef later():\n    D.decode = lambda self, s, *a, **k: 'X'",
    "import copy\nt = copy.dispatch_table\ndef later():\n    t[int] = None",
], ids=["module", "foreign-class", "table"])
def test_a_function_the_cell_made_and_the_host_calls_later_is_refused(code):
    # The cell passes both gates and returns; the host then calls its
    # function on the host's own thread, outside any cell.
    out = run_child([code], call_later=["later"])
    assert out["ok"], out
    assert len(out["checks"]["later"]) == 1 and "[module-assignment]" in out["checks"]["later"][0], out
    assert out["changed"] == [] and out["behaves"] and out["other_same"], out


@pytest.mark.skipif(sys.version_info < (3, 11), reason="3.10 code objects hold no columns")
def test_the_column_counts_code_points_as_the_gate_does():
    out = run_child(["import json\nj = json\né = 'é'; j.dumps = str"])
    assert out["error_type"] == "AttributeError"
    assert "line 3, col 10: [module-assignment]" in out["error"], out["error"]


def test_a_class_a_host_function_makes_during_the_cell_is_the_hosts():
    code = "K = make_class()\nK.x = 2"
    out = run_child([code])
    assert_refused(out, [code])
    assert out["checks"]["made_x"] == 1
