// CheckCell against a corpus of attack cells (each must be rejected by the
// named rule) and benign cells (each must be allowed), in every category of
// docs/gate.md.
#include "sandbox/check_cell.h"

#include <gtest/gtest.h>

#include "sandbox/prescan.h"
#include "sandbox/source_text.h"

#include <string>
#include <vector>

namespace dolsot::sandbox {
namespace {

struct Attack {
  const char* name;
  std::string code;
  const char* rule;  // a finding with this rule id must be present
};

std::ostream& operator<<(std::ostream& out, const Attack& attack) { return out << attack.name; }

Policy TestPolicy() {
  Policy policy = DefaultPolicy();
  policy.AllowToolbox("tb", "mytools.api");
  return policy;
}

std::string Describe(const std::vector<Finding>& findings) {
  return findings.empty() ? "(no findings)" : FormatFindings(findings);
}

const std::vector<Attack>& Attacks() {
  static const std::vector<Attack> attacks = {
      // imports
      {"import_os", "import os\nos.system('id')\n", "import-denied"},
      {"import_in_function", "def f():\n    import subprocess\n    return subprocess\n", "import-denied"},
      {"from_import", "from os import system\n", "import-denied"},
      {"dotted_import", "import os.path\n", "import-denied"},
      {"importlib", "import importlib\nimportlib.import_module('os')\n", "import-denied"},
      {"relative_import", "from . import secrets\n", "import-denied"},
      {"wildcard_import", "from math import *\n", "import-denied"},
      {"import_submodule_of_alias_lookalike", "import tbx\n", "import-denied"},
      {"leaked_module_import", "from dataclasses import sys\n", "attribute-denied"},
      {"import_private_name", "from random import _os\n", "private-attribute"},
      {"import_type_hints", "from typing import get_type_hints\n", "attribute-denied"},
      // code-running and name-reaching builtins
      {"eval", "eval('1+1')\n", "name-denied"},
      {"exec", "exec('x=1')\n", "name-denied"},
      {"exec_with_space", "exec ('x=1')\n", "name-denied"},
      {"compile", "c = compile('1', 'f', 'eval')\n", "name-denied"},
      {"dunder_import", "__import__('os')\n", "name-denied"},
      {"open", "open('/etc/passwd').read()\n", "name-denied"},
      {"breakpoint", "breakpoint()\n", "name-denied"},
      {"globals", "g = globals()\n", "name-denied"},
      {"locals", "print(locals())\n", "name-denied"},
      {"vars", "vars(obj)\n", "name-denied"},
      {"getattr_string_built", "getattr(x, '_' * 2 + 'class' + '_' * 2)\n", "name-denied"},
      {"setattr", "setattr(x, 'y', 1)\n", "name-denied"},
      {"delattr", "delattr(x, 'y')\n", "name-denied"},
      {"hasattr", "hasattr(x, '__globals__')\n", "name-denied"},
      {"input", "input()\n", "name-denied"},
      {"help", "help(len)\n", "name-denied"},
      {"builtins_dunder", "__builtins__['eval']('1')\n", "name-denied"},
      {"alias_of_eval", "e = eval\n", "name-denied"},
      {"eval_as_attribute", "import enum\nenum.bltns.eval('1')\n", "attribute-denied"},
      {"eval_attribute", "x.eval('1')\n", "name-denied"},
      {"lambda_default", "f = lambda x=getattr: x\n", "name-denied"},
      {"decorator", "@exec\ndef f(): pass\n", "name-denied"},
      {"decorator_attribute", "@x.__class__\ndef f(): pass\n", "dunder-attribute"},
      {"default_argument", "def f(g=globals): pass\n", "name-denied"},
      {"kwarg_value", "f(key=eval)\n", "name-denied"},
      {"in_fstring", "f'{eval(\"1\")}'\n", "name-denied"},
      {"in_nested_fstring_spec", "f'{x:{eval(\"1\")}}'\n", "name-denied"},
      {"in_comprehension", "[eval(s) for s in xs]\n", "name-denied"},
      {"in_class_body", "class A:\n    x = open\n", "name-denied"},
      {"in_match_guard", "match x:\n    case 1 if eval('1'): pass\n", "name-denied"},
      {"in_type_parameter_bound", "class A[T: eval]: pass\n", "name-denied"},
      {"in_function_type_parameter", "def f[T: (open, int)](): pass\n", "name-denied"},
      {"in_type_annotation", "x: eval('1') = 1\n", "name-denied"},
      {"line_continuation", "x = 1 \\\n    + eval('2')\n", "name-denied"},
      {"semicolons", "x = 1; y = eval('2')\n", "name-denied"},
      {"policy_denied_name", "dangerous()\n", "name-denied"},
      // unicode spellings (CPython folds identifiers with NFKC)
      {"fullwidth_eval", "\xef\xbd\x85\xef\xbd\x96\xef\xbd\x81\xef\xbd\x8c('1')\n", "name-denied"},
      {"math_italic_exec", "\xf0\x9d\x91\x92xec('1')\n", "name-denied"},
      {"script_e_exec", "\xe2\x84\xafxec('1')\n", "name-denied"},
      {"fullwidth_dunder", "x._\xef\xbc\xbf" "class__\n", "dunder-attribute"},
      // CPython folds `＿_class__` to `__class__`; tree-sitter cannot parse a
      // leading U+FF3F: rejected either way (fail closed).
      {"fullwidth_leading_underscore", "x.\xef\xbc\xbf_class__\n", "syntax-error"},
      {"import_as_toolbox_alias", "import json as tb\n", "rebind-toolbox"},
      {"ligature_attribute", "x.\xef\xac\x81le\n" "import o\xe2\x82\x9b\n", "import-denied"},
      {"long_s_sys", "import enum\nenum.\xc5\xbfys\n", "attribute-denied"},
      // dunders and private attributes
      {"class_subclasses", "().__class__.__base__.__subclasses__()\n", "dunder-attribute"},
      {"type_subclasses", "type(x).__subclasses__()\n", "dunder-attribute"},
      {"func_globals", "f.__globals__['os']\n", "dunder-attribute"},
      {"dict_of_module", "import json\njson.__dict__\n", "dunder-attribute"},
      {"getattribute", "object.__getattribute__(x, '_y')\n", "dunder-attribute"},
      {"code_object", "f.__code__\n", "dunder-attribute"},
      {"traceback_dunder", "e.__traceback__\n", "dunder-attribute"},
      {"dunder_name_load", "__loader__\n", "name-denied"},
      {"dunder_name_class_cell", "class A:\n    def f(self):\n        return __class__\n", "dunder-name"},
      {"define_getattr", "class A:\n    def __getattr__(self, n): pass\n", "dunder-name"},
      {"define_reduce", "class A:\n    def __reduce__(self): pass\n", "dunder-name"},
      {"private_attribute", "import random\nrandom._os.system('id')\n", "private-attribute"},
      {"private_on_self", "class A:\n    def m(self):\n        return self._os\n", "private-attribute"},
      {"mangled_attribute", "x.__secret\n", "private-attribute"},
      // interpreter internals
      {"gi_frame", "g = (i for i in [1])\ng.gi_frame.f_back.f_globals\n", "internal-attribute"},
      {"f_globals", "frame.f_globals\n", "internal-attribute"},
      {"tb_frame", "try:\n    1/0\nexcept Exception as e:\n    e.args[0].tb_frame\n", "internal-attribute"},
      {"cr_frame", "async def c(): pass\nc().cr_frame\n", "internal-attribute"},
      {"ag_frame", "agen.ag_frame\n", "internal-attribute"},
      {"gi_code", "g.gi_code\n", "internal-attribute"},
      {"leaked_sys", "import dataclasses\ndataclasses.sys.modules\n", "attribute-denied"},
      {"leaked_os", "import uuid\nuuid.os.system('id')\n", "attribute-denied"},
      {"leaked_codecs", "import json\njson.codecs.open('/etc/passwd')\n", "attribute-denied"},
      {"leaked_types", "import typing\ntyping.types.CodeType\n", "attribute-denied"},
      {"get_type_hints", "import typing\ntyping.get_type_hints(C)\n", "attribute-denied"},
      // format strings
      {"format_class", "'{0.__class__}'.format(x)\n", "dunder-attribute"},
      {"format_escaped", "'{0.\\x5f_class__}'.format(x)\n", "dunder-attribute"},
      {"format_octal", "'{0.\\137\\137globals__}'.format(f)\n", "dunder-attribute"},
      {"format_nested_spec", "'{0:{1.__globals__}}'.format(x, f)\n", "dunder-attribute"},
      {"format_concatenated", "('{0.' '__class__}').format(x)\n", "format-string"},
      {"format_implicit_concat", "'{0.' '__class__}'.format(x)\n", "dunder-attribute"},
      {"format_variable", "t = '{0.__class__}'\nt.format(x)\n", "format-string"},
      {"format_map", "'{x.gi_frame}'.format_map(d)\n", "internal-attribute"},
      {"format_via_str", "str.format('{0.__class__}', x)\n", "format-string"},
      {"format_fstring_receiver", "f'{{0.{a}}}'.format(x)\n", "format-string"},
      {"format_named_escape", "'{0.\\N{LOW LINE}_class__}'.format(x)\n", "format-string"},
      {"format_private", "'{0._secret}'.format(x)\n", "private-attribute"},
      // rebinding builtins and toolboxes
      {"rebind_print", "print = lambda *a: None\n", "rebind-builtin"},
      {"rebind_len_tuple", "a, len = 1, 2\n", "rebind-builtin"},
      {"rebind_for", "for str in ['a']: pass\n", "rebind-builtin"},
      {"rebind_walrus", "(isinstance := 1)\n", "rebind-builtin"},
      {"rebind_walrus_in_comprehension", "[(print := x) for x in y]\n", "rebind-builtin"},
      {"rebind_def", "def print(*a): pass\n", "rebind-builtin"},
      {"rebind_class", "class list: pass\n", "rebind-builtin"},
      {"rebind_import_as", "import math as print\n", "rebind-builtin"},
      {"rebind_with_as", "with ctx() as print: pass\n", "rebind-builtin"},
      {"rebind_except_as", "try:\n    pass\nexcept Exception as len:\n    pass\n", "rebind-builtin"},
      {"rebind_global", "def f():\n    global print\n    print = 1\n", "rebind-builtin"},
      {"rebind_del", "del print\n", "rebind-builtin"},
      {"rebind_augmented", "sum += 1\n", "rebind-builtin"},
      {"rebind_match_capture", "match x:\n    case print: pass\n", "rebind-builtin"},
      {"rebind_match_as", "match x:\n    case [1] as len: pass\n", "rebind-builtin"},
      {"rebind_match_star", "match x:\n    case [*list]: pass\n", "rebind-builtin"},
      {"rebind_type_alias", "type int = str\n", "rebind-builtin"},
      {"rebind_toolbox", "tb = None\n", "rebind-toolbox"},
      {"del_toolbox", "del tb\n", "rebind-toolbox"},
      {"assign_into_toolbox", "tb.fetch = lambda *a: None\n", "module-assignment"},
      {"assign_into_toolbox_deep", "tb.client.session = None\n", "module-assignment"},
      {"del_from_toolbox", "del tb.fetch\n", "module-assignment"},
      {"augassign_toolbox", "tb.counter += 1\n", "module-assignment"},
      {"assign_into_module", "import math\nmath.pi = 3\n", "module-assignment"},
      {"assign_into_module_later_import", "def f():\n    json.loads = None\nimport json\n", "module-assignment"},
      // attribute stores as comprehension for-targets, in any bracket (red team H1)
      {"comp_target_0", "import math\nsum(0 for math.pi in [1])", "module-assignment"},
      {"comp_target_1", "import math\n{0 for math.pi in [2]}", "module-assignment"},
      {"comp_target_2", "import math\n{0: 0 for math.pi in [1]}", "module-assignment"},
      {"comp_target_3", "import math\nx = f'{[0 for math.pi in [3]]}'", "module-assignment"},
      {"comp_target_4", "import math\nd = {}\nd[[0 for math.pi in [5]][0]] = 1", "module-assignment"},
      {"comp_target_5", "import math\nx[[0 for math.pi in [1]]]", "module-assignment"},
      {"comp_target_6", "import math\n@dec(*[0 for math.pi in [1]])\ndef f(): pass", "module-assignment"},
      {"comp_target_7", "import math\ndef f(a=[0 for math.pi in [1]]): pass", "module-assignment"},
      {"comp_target_8", "import math\nclass C(*[0 for math.pi in [1]]): pass", "module-assignment"},
      {"comp_target_9", "import math\nprint([0 for y in [1] for math.pi in [1]])", "module-assignment"},
      {"comp_target_10", "import math\nprint([0 for x, math.pi in [(1, 2)]])", "module-assignment"},
      {"comp_target_11", "import math\nprint([0 for *math.pi, in [[1]]])", "module-assignment"},
      {"comp_target_12", "import json as j\nprint({0 for j.dumps in [1]})", "module-assignment"},
      {"comp_target_13", "from json import dumps\nprint({0 for dumps.x in [1]})", "module-assignment"},
      {"comp_target_14", "sum(0 for tb.x in [1])", "module-assignment"},
      {"comp_target_15", "print([0 for tb.x in [1]])", "module-assignment"},
      {"comp_target_16", "x = lambda: {0 for tb.x in [1]}", "module-assignment"},
      {"comp_target_17", "def f():\n    sum(0 for tb.x in [1])", "module-assignment"},
      {"comp_target_18", "import math\n[0 for math.pi in [6]]", "module-assignment"},
      {"comp_target_19", "import json\nprint({0 for json.dumps in [lambda *a, **k: 'PWNED']})", "module-assignment"},
      {"comp_target_20", "sum(0 for tb.secret_limit in [10**9])", "module-assignment"},
      // attribute stores whose object is not a plain name chain (red team H2)
      {"nonname_object_0", "import math\n(math).pi = 1", "module-assignment"},
      {"nonname_object_1", "import math\n((math)).pi += 1", "module-assignment"},
      {"nonname_object_2", "import math\ndel (math).pi", "module-assignment"},
      {"nonname_object_3", "import math\nfor (math).pi in range(3): pass", "module-assignment"},
      {"nonname_object_4", "import math\nfor x, (math).pi in [(1, 2)]: pass", "module-assignment"},
      {"nonname_object_5", "import math\nwith c as (x, (math).pi): pass", "module-assignment"},
      {"nonname_object_6", "import math\n[(math).pi] = [1]", "module-assignment"},
      {"nonname_object_7", "import math\nx = (math).pi = 2", "module-assignment"},
      {"nonname_object_8", "import math\n(\nmath\n).pi = 1", "module-assignment"},
      {"nonname_object_9", "import math\n(  # c\nmath).pi = 1", "module-assignment"},
      {"nonname_object_10", "def f():\n    (tb).x = 1", "module-assignment"},
      {"nonname_object_11", "(tb or 0).x = 1", "module-assignment"},
      {"nonname_object_12", "(tb if 1 else 0).x = 1", "module-assignment"},
      {"nonname_object_13", "(0 or tb).x = 1", "module-assignment"},
      {"nonname_object_14", "import math\n(math or 0).pi = 1", "module-assignment"},
      {"nonname_object_15", "import math\n[math][0].pi = 1", "module-assignment"},
      {"nonname_object_16", "print({0 for (tb).x in [1]})", "module-assignment"},
      {"nonname_object_17", "import math\n(math).pi = 3", "module-assignment"},
      {"nonname_object_18", "(tb).x = 1", "module-assignment"},
      {"nonname_object_19", "import math\n(m := math).pi = 1", "module-assignment"},
      {"nonname_object_20", "def f():\n    del (tb).x", "module-assignment"},
      {"nonname_object_21", "import math\nmath.x[0].y = 1", "module-assignment"},
      {"nonname_object_22", "tb.f(x).y = 3", "module-assignment"},
      {"nonname_object_display", "{tb: 1}.x = 1\n", "module-assignment"},
      {"nonname_object_fstring", "f'{tb}'.x = 1\n", "module-assignment"},
      {"nonname_object_del_statement_end", "import math\ndel x, [math][0].pi\n", "module-assignment"},
      {"nonname_object_with_as", "import math\nwith c as (math).pi: pass\n", "module-assignment"},
      {"nonname_object_annotated", "import math\n[math][0].pi: int = 1\n", "module-assignment"},
      {"nonname_object_annotated_in_body", "import math\nif x: f(math).pi: int = 1\n", "module-assignment"},
      // tree-sitter reads `type` + a bracket and the next line as one alias
      // statement; CPython runs two statements, the second a store
      {"type_alias_misparse_module_store", "import math\ntype[1]\n[math.pi] = [1]\n", "syntax-error"},
      {"type_alias_misparse_toolbox", "type[1]\n[tb] = [1]\n", "syntax-error"},
      {"type_alias_misparse_call", "type(1)\n[list] = [1]\n", "syntax-error"},
      // allowed functions that write attributes into their argument (red team H4)
      {"attribute_writer_0", "import json, functools\ndef f(): pass\nf.dumps = lambda *a, **k: 'PWNED2'\nfunctools.update_wrapper(json, f)\n", "attribute-denied"},
      {"attribute_writer_1", "import json, functools\ndef f(): pass\nfunctools.wraps(f)(json)\n", "attribute-denied"},
      {"attribute_writer_2", "import functools\ndef f(): pass\nfunctools.update_wrapper(tb, f)\n", "attribute-denied"},
      {"attribute_writer_3", "from functools import wraps\n", "attribute-denied"},
      {"attribute_writer_4", "from functools import update_wrapper as u\n", "attribute-denied"},
      {"attribute_writer_5", "import enum\nclass C(enum.Enum):\n    __module__ = 'json'\n    dumps = 1\nenum.global_enum(C)\n", "attribute-denied"},
      {"attribute_writer_6", "from enum import global_enum\n", "attribute-denied"},
      {"match_keyword_dunder", "match x:\n    case str(__class__=c): pass\n", "dunder-attribute"},
      {"match_value_dunder", "match x:\n    case a.__class__: pass\n", "dunder-attribute"},
      // source the gate must read exactly as CPython does
      {"lone_cr_comment", "# note\rimport os\n", "invalid-source"},
      {"nul_byte", std::string("x = 1\0import os\n", 16), "invalid-source"},
      {"invalid_utf8", "x = '\xff'\n", "invalid-source"},
      {"overlong_utf8", "x = '\xc0\xaf'\n", "invalid-source"},
      {"surrogate_utf8", "x = '\xed\xa0\x80'\n", "invalid-source"},
      {"coding_cookie", "# -*- coding: rot13 -*-\nvzcbeg bf\n", "invalid-source"},
      {"coding_cookie_line2", "#!/bin/python\n# vim: set fileencoding=utf-7 :\nx = 1\n", "invalid-source"},
      {"syntax_error", "x = (1,\n", "syntax-error"},
      {"missing_colon", "def f()\n    return 1\n", "syntax-error"},
      {"python2_exec", "exec 'import os'\n", "syntax-error"},
      {"python2_print_chevron", "print >>f, x\n", "syntax-error"},
      {"garbage", "@@@ !!! $$$\n", "syntax-error"},
      {"unterminated_string", "x = 'abc\n", "syntax-error"},
  };
  return attacks;
}

class AttackTest : public ::testing::TestWithParam<Attack> {};

TEST_P(AttackTest, IsRejectedByTheNamedRule) {
  Policy policy = TestPolicy();
  policy.denied_names.insert("dangerous");
  const Attack& attack = GetParam();
  std::vector<Finding> findings = CheckCell(attack.code, policy);
  bool found = false;
  for (const Finding& finding : findings) found |= finding.rule_id() == attack.rule;
  EXPECT_TRUE(found) << "expected [" << attack.rule << "], got:\n" << Describe(findings);
}

// The fast path never accepts an attack, and the full path alone (no fast
// path) rejects it by the same rule.
TEST_P(AttackTest, FastPathNeverAcceptsIt) {
  Policy policy = TestPolicy();
  policy.denied_names.insert("dangerous");
  const Attack& attack = GetParam();
  // The fast path runs only on cells the source checks accept.
  if (!CheckSourceText(attack.code, policy)) {
    EXPECT_FALSE(PrescanProvesAllowed(attack.code, policy));
  }
  std::vector<Finding> findings = CheckCellFullPath(attack.code, policy);
  bool found = false;
  for (const Finding& finding : findings) found |= finding.rule_id() == attack.rule;
  EXPECT_TRUE(found) << "expected [" << attack.rule << "], got:\n" << Describe(findings);
}

INSTANTIATE_TEST_SUITE_P(Corpus, AttackTest, ::testing::ValuesIn(Attacks()),
                         [](const auto& info) { return std::string(info.param.name); });

struct Benign {
  const char* name;
  const char* code;
};

std::ostream& operator<<(std::ostream& out, const Benign& benign) { return out << benign.name; }

const std::vector<Benign>& BenignCells() {
  static const std::vector<Benign> cells = {
      {"arithmetic", "x = 1 + 2 * 3\nx\n"},
      {"data_work",
       "rows = [{'name': 'a', 'score': 3}, {'name': 'b', 'score': 5}]\n"
       "best = max(rows, key=lambda r: r['score'])\n"
       "total = sum(r['score'] for r in rows)\n"
       "print(f\"{best['name']}: {total / len(rows):.2f}\")\n"},
      {"allowed_imports",
       "import math, json, re\nfrom collections import Counter, defaultdict\n"
       "from dataclasses import dataclass, field\nimport collections.abc\n"
       "from __future__ import annotations\nimport statistics as st\n"},
      {"class_with_dunders",
       "class Point:\n"
       "    __slots__ = ('x', 'y')\n"
       "    def __init__(self, x, y):\n"
       "        self.x = x\n        self.y = y\n"
       "    def __repr__(self):\n        return f'Point({self.x}, {self.y})'\n"
       "    def __eq__(self, other):\n        return (self.x, self.y) == (other.x, other.y)\n"
       "    def __hash__(self):\n        return hash((self.x, self.y))\n"},
      {"subclass_init", "class B(A):\n    def __init__(self):\n        super().__init__()\n"},
      {"dataclass",
       "from dataclasses import dataclass, field\n"
       "@dataclass(frozen=True)\nclass Item:\n    id: int\n    type: str = 'x'\n"
       "    tags: list = field(default_factory=list)\n"
       "    def __post_init__(self):\n        pass\n"},
      {"comprehensions",
       "squares = {n: n * n for n in range(10)}\nevens = [n for n in range(10) if n % 2 == 0]\n"
       "pairs = {(a, b) for a in range(3) for b in range(3)}\ngen = sum(x for x in range(5))\n"},
      {"fstrings", "name = 'x'\nprint(f'{name!r:>10} {obj.attr} {d[\"k\"]} {n:{width}.{prec}f}')\n"},
      {"toolbox_calls", "r = tb.fetch('https://example.com', timeout=3)\nitems = tb.client.list()\n"},
      {"import_toolbox", "import tb\nimport mytools.api\nfrom mytools.api import fetch\n"},
      {"strings_mention_danger",
       "msg = 'do not call eval() or open() or __import__'\n"
       "doc = \"\"\"exec, __builtins__, gi_frame, f_globals\"\"\"\nb = b'__class__'\n"},
      {"comments_mention_danger", "# import os; eval(x); obj.__class__\nx = 1  # __subclasses__\n"},
      {"dict_keys_with_underscores",
       "d = {'__class__': 1, '_private': 2, 'f_globals': 3}\nv = d['__class__']\nd['_x'] = 4\n"},
      {"keyword_arguments_named_like_builtins", "f(open=True, type='x', id=3, input=None)\n"},
      {"parameters_shadow_builtins",
       "def f(type=None, id=0, *, input='a', **kwargs):\n    list = [type]\n    return list\n"},
      {"local_rebinding", "def f():\n    max = 3\n    for str in ['a']:\n        pass\n    return max\n"},
      {"class_attributes_named_like_builtins", "class Cfg:\n    type = 'a'\n    id = 1\n    format = 'json'\n"},
      {"comprehension_variable_named_like_builtin", "[id for id in range(3)]\n"},
      {"private_module_level_name", "_cache = {}\n_tmp = 1\n__version = 2\n"},
      {"name_main", "if __name__ == '__main__':\n    print(__name__, __doc__)\n"},
      {"format_literal", "'{:.2f} and {0} and {name}'.format(1.5, name='x')\n'{}'.format(3)\n"},
      {"format_index", "'{0[key]} {0[1]}'.format(d)\n"},
      {"format_ok_attribute", "'{0.real}'.format(3)\n"},
      {"percent_format", "'%(a)s %d' % {'a': 1}\n"},
      {"match_statement",
       "match cmd:\n    case {'action': 'go', 'to': place}:\n        print(place)\n"
       "    case Point(x=0, y=yy):\n        pass\n    case [first, *rest]:\n        pass\n"
       "    case Color.RED | None:\n        pass\n    case _:\n        pass\n"},
      {"walrus_local", "def f(xs):\n    if (n := len(xs)) > 3:\n        return n\n"},
      {"async_code", "async def main():\n    await tb.fetch()\n    async for row in tb.rows():\n        print(row)\n"},
      {"lambda_sort", "data.sort(key=lambda row: (row[1], -row[0]))\n"},
      {"try_except", "try:\n    x = int('a')\nexcept ValueError as err:\n    print(err)\nfinally:\n    pass\n"},
      {"with_statement", "with tb.session() as s, tb.lock() as l:\n    s.get()\n"},
      {"global_ordinary", "counter = 0\ndef bump():\n    global counter\n    counter += 1\n"},
      {"unicode_identifiers", "caf\xc3\xa9 = 1\n\xce\xbb = caf\xc3\xa9 + 1\nprint(\xce\xbb)\n"},
      {"unicode_strings", "s = '\xed\x95\x9c\xea\xb5\xad\xec\x96\xb4 \xf0\x9f\x8e\x89'\n"},
      {"type_hints", "from typing import Optional\ndef f(x: Optional[int] = None) -> list[str]:\n    return []\n"},
      {"decorators", "import functools\n@functools.lru_cache(maxsize=None)\ndef fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n"},
      {"module_read", "import math\nr = math.pi * 2\nimport json\njson.dumps({'a': 1})\n"},
      {"assign_attribute_on_object", "obj.value = 3\nself_like.items[0] = 1\ncfg.opts.depth = 2\n"},
      {"coding_cookie_utf8", "# -*- coding: utf-8 -*-\nx = 1\n"},
      {"crlf_newlines", "x = 1\r\ny = 2\r\n"},
      {"empty", ""},
      {"only_comment", "# nothing\n"},
      {"bom", "\xef\xbb\xbfx = 1\n"},
      {"tabs_and_formfeed", "if x:\n\ty = 1\n\x0c\nz = 2\n"},
      {"print_call", "print('a', 'b', sep=', ', end='\\n')\n"},
      {"exceptions", "raise ValueError('bad input')\n"},
      {"enum_class", "import enum\nclass Color(enum.Enum):\n    RED = 1\n    GREEN = 2\n"},
      {"generators", "def gen():\n    yield 1\n    yield from range(3)\nlist(gen())\n"},
      {"allowed_dunder_attribute", "print(f.__name__, cls.__qualname__, mod.__version__)\n"},
  };
  return cells;
}

class BenignTest : public ::testing::TestWithParam<Benign> {};

TEST_P(BenignTest, IsAllowed) {
  std::vector<Finding> findings = CheckCell(GetParam().code, TestPolicy());
  EXPECT_TRUE(findings.empty()) << Describe(findings);
}

TEST_P(BenignTest, IsAllowedByTheFullPath) {
  std::vector<Finding> findings = CheckCellFullPath(GetParam().code, TestPolicy());
  EXPECT_TRUE(findings.empty()) << Describe(findings);
}

INSTANTIATE_TEST_SUITE_P(Corpus, BenignTest, ::testing::ValuesIn(BenignCells()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace dolsot::sandbox
