// The bypass classes of #21 §1 and #23 §5, each both ways: attack cells the
// fast path never accepts and the full path refuses by the named rule, and a
// similar harmless cell both paths allow (the false alarms fixed with them).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "sandbox/check_cell.h"
#include "sandbox/prescan.h"

namespace dolsot::sandbox {
namespace {

struct Case {
  const char* name;
  const char* code;
  const char* rule;  // nullptr: allowed
};

std::ostream& operator<<(std::ostream& out, const Case& c) { return out << c.name; }

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      // 1. code an allowed module evaluates: string annotations, ForwardRef, register
      {"singledispatch_string_annotation",
       "import functools\n@functools.singledispatch\ndef f(x): pass\n"
       "def g(x: \"__import__('os').system('id') or int\"): pass\n", "construct-denied"},
      {"register_evaluates_annotations", "f.register(g)\n", "attribute-denied"},
      {"forward_ref_in_subscript", "import typing\nT = typing.ForwardRef('x')\n", "attribute-denied"},
      {"return_annotation_string", "def f() -> 'list[eval]': pass\n", "construct-denied"},
      {"variable_annotation_string", "x: 'open(1)' = 1\n", "construct-denied"},
      {"nested_annotation_string", "def f(x: list['a b']): pass\n", "construct-denied"},
      {"make_dataclass", "import dataclasses\nC = dataclasses.make_dataclass('C', ['x'])\n", "attribute-denied"},
      {"forward_reference_by_name", "def f(x: 'Node') -> 'Node': pass\n", nullptr},
      {"unquoted_annotations", "from __future__ import annotations\ndef f(x: Node) -> list[int]: pass\n", nullptr},
      {"singledispatch_explicit_type_is_refused_too", "import functools\nf = functools.singledispatch(len)\n", nullptr},
      // 2. submodules and attributes of allowed packages that reach denied ones
      {"import_json_tool", "import json.tool\n", "import-denied"},
      {"from_json_import_tool", "from json import tool\n", "import-denied"},
      {"json_tool_attribute", "import json\njson.tool.Path('/etc/passwd').read_text()\n", "import-denied"},
      {"json_tool_alias", "import json as j\nj.tool\n", "import-denied"},
      {"re_copyreg", "import re\nre.copyreg.dispatch_table\n", "attribute-denied"},
      {"dataclasses_keyword", "import dataclasses\ndataclasses.keyword\n", "attribute-denied"},
      {"json_decoder_is_fine", "import json.decoder\nfrom json import decoder\njson.decoder.JSONDecodeError\n", nullptr},
      // 3. attribute access by string: __match_args__, ABC.register
      {"match_args_in_class", "class P:\n    __match_args__ = ('__globals__',)\n", "dunder-name"},
      {"match_args_store", "P.__match_args__ = ('_secret',)\n", "dunder-attribute"},
      {"abc_register", "import abc\nclass P(abc.ABC): pass\nP.register(type(f))\n", "attribute-denied"},
      {"class_pattern_on_dataclass", "match p:\n    case Point(x, y):\n        print(x, y)\n", nullptr},
      // 4. classes from dicts, process-wide tables
      {"type_three_arguments", "X = type('X', (), {'__reduce__': f})\n", "construct-denied"},
      {"type_splat", "X = type(*args)\n", "construct-denied"},
      {"enum_functional", "import enum\nE = enum.Enum('E', [('__reduce_ex__', f)])\n", "construct-denied"},
      {"enum_functional_by_name", "from enum import Enum\nE = Enum('E', 'A B')\n", "construct-denied"},
      {"copy_dispatch_table_store", "import copy\ncopy.dispatch_table[int] = f\n", "module-assignment"},
      {"copy_dispatch_table_update", "import copy\ncopy.dispatch_table.update({int: f})\n", "module-assignment"},
      {"html5_store", "import html.entities\nhtml.entities.html5['amp;'] = '<'\n", "module-assignment"},
      {"html5_imported_table", "from html.entities import html5\nhtml5['amp;'] = '<'\n", "module-assignment"},
      {"html5_imported_clear", "from html.entities import html5\nprint(html5.clear())\n", "module-assignment"},
      {"del_module_table", "import copy\ndel copy.dispatch_table[complex]\n", "module-assignment"},
      {"toolbox_table_store", "tb.items[0] = 2\n", "module-assignment"},
      {"type_of_one_argument_in_place", "print(type(x).__name__, type(x))\nok = type(x) is int\n", nullptr},
      {"type_of_one_argument_kept", "t = type(x)\n", "construct-denied"},
      {"type_of_one_argument_passed_on", "def g(k):\n    return k('X', (), d)\ng(type(int))\n", "construct-denied"},
      {"type_parameter_shadows", "def f(type=None):\n    return [type]\n", nullptr},
      {"type_parameter_default_is_outside", "def f(type=type):\n    return type\n", "construct-denied"},
      {"copies_of_tables", "import copy\nt = dict(copy.dispatch_table)\nt[int] = 1\nt.update({})\n", nullptr},
      {"enum_class_and_lookup", "import enum\nclass C(enum.Enum):\n    A = 1\nC(1)\n", nullptr},
      // #23 §5 holes
      {"object_new_of_toolbox_class", "o = object.__new__(tb.Account)\n", "dunder-attribute"},
      {"exception_obj", "try:\n    tb.x\nexcept AttributeError as e:\n    o = e.obj\n", "attribute-denied"},
      {"except_star", "try:\n    pass\nexcept* ValueError:\n    pass\n", "construct-denied"},
      {"exception_group_subclass", "class G(ExceptionGroup): pass\n", "construct-denied"},
      {"exception_group_itself", "try:\n    raise ExceptionGroup('x', [ValueError()])\nexcept ExceptionGroup as g:\n    print(g.exceptions)\n", nullptr},
      // false alarms, fixed
      {"toolbox_help", "mt.help('top')\ntb.help()\n", nullptr},
      {"dataclass_fields_named_like_builtins",
       "from dataclasses import dataclass\n@dataclass\nclass B:\n    open: float\n    input: str\n"
       "b = B(1.0, 'x')\nprint(b.open, b.input)\n", nullptr},
      {"self_private_in_regular_method",
       "class Counter:\n    def __init__(self):\n        self._n = 0\n"
       "    def bump(self):\n        self._n += 1\n        return self._n\nc = Counter()\nc.bump()\n", nullptr},
      {"import_csv_io_allowed", "import csv, io\n", nullptr},  // #38: narrowed (gate_false_alarms_test.cc)
      {"help_as_a_name_still_refused", "help(len)\n", "name-denied"},
      {"open_as_a_name_still_refused", "open('/etc/passwd')\n", "name-denied"},
      {"self_private_module_name", "class A:\n    def m(self):\n        return self._os\n", "private-attribute"},
      {"self_private_outside_method", "def m(self):\n    return self._x\n", "private-attribute"},
      {"self_private_other_param", "class A:\n    def m(self, o):\n        return o._x\n", "private-attribute"},
      {"self_rebound", "class A:\n    def m(self):\n        self = tb\n        return self._key\n", "private-attribute"},
      {"self_in_comprehension", "class A:\n    def m(self):\n        return [self._key for self in [tb]]\n", "private-attribute"},
      {"self_private_in_nested_function",
       "class A:\n    def m(self):\n        def g(self):\n            return self._key\n        return g\n", "private-attribute"},
      // #23 §5 as classes. Allocators: instances made without the class's own __init__.
      {"new_through_the_class", "o = tb.Account.__new__(tb.Account)\n", "dunder-attribute"},
      {"init_on_a_toolbox_object", "tb.Account.__init__(acct, 'admin')\n", "dunder-attribute"},
      {"deepcopy_hook_called", "c = acct.__deepcopy__({})\n", "dunder-attribute"},
      {"deepcopy_with_memo", "import copy\nc = copy.deepcopy(acct, {})\n", "construct-denied"},
      {"deepcopy_memo_keyword", "from copy import deepcopy\nc = deepcopy(acct, memo=m)\n", "construct-denied"},
      {"deepcopy_as_value", "import copy, functools\nf = functools.partial(copy.deepcopy, memo=m)\n", "construct-denied"},
      {"subclass_of_toolbox_class", "class E(tb.Account):\n    def __init__(self):\n        pass\n", "construct-denied"},
      {"subclass_of_imported_toolbox_class", "from tb import Account\nclass E(Account): pass\n", "construct-denied"},
      {"subclass_of_toolbox_alias", "A = tb.Account\nclass E(A): pass\n", "construct-denied"},
      {"subclass_of_type_of", "class E(type(acct)): pass\n", "construct-denied"},
      {"subclass_of_type_alias", "T = type(acct)\nclass E(T): pass\n", "construct-denied"},
      {"copies_without_memo", "import copy\nc = copy.deepcopy({'a': [1]})\nd = copy.copy([1])\n", nullptr},
      {"super_init_in_init", "class B(dict):\n    def __init__(self):\n        super().__init__()\n", nullptr},
      {"type_of_in_expressions", "n = type(acct).__name__\nok = type(1) is int\nv = type(acct)(1)\n", nullptr},
      // Exceptions: attributes that hand back what the raising code held.
      {"key_error_args", "try:\n    tb.lookup(1)\nexcept KeyError as e:\n    k = e.args[0]\n", "attribute-denied"},
      {"stop_iteration_value", "try:\n    next(g)\nexcept StopIteration as s:\n    v = s.value\n", "attribute-denied"},
      {"caught_then_aliased", "try:\n    next(g)\nexcept Exception as e:\n    err = e\nv = err.value\n", "attribute-denied"},
      {"group_members_args", "try:\n    f()\nexcept ExceptionGroup as g:\n    for sub in g.exceptions:\n        a = sub.args\n", "attribute-denied"},
      {"exit_parameters", "class C:\n    def __enter__(self):\n        return self\n    def __exit__(self, t, v, trace):\n        self.a = v.args\n", "attribute-denied"},
      {"unicode_error_object", "try:\n    b.decode()\nexcept UnicodeError as u:\n    d = u.object\n", "attribute-denied"},
      {"caught_in_keyword_pattern", "try:\n    f()\nexcept Exception as e:\n    match e:\n        case KeyError(args=a):\n            pass\n", "attribute-denied"},
      {"exception_context", "try:\n    f()\nexcept Exception as e:\n    c = e.__context__\n", "dunder-attribute"},
      {"exception_traceback_frame", "try:\n    f()\nexcept Exception as e:\n    c = e.__traceback__.tb_frame\n", "dunder-attribute"},
      {"caught_as_text", "try:\n    f()\nexcept Exception as e:\n    print(str(e), repr(e), type(e).__name__)\n", nullptr},
      {"value_without_catching", "import enum\nclass C(enum.Enum):\n    A = 1\nprint(C.A.value)\n", nullptr},
      // Exception groups: no subclass, no split()/derive() of the cell's.
      {"exception_group_alias", "EG = ExceptionGroup\n", "construct-denied"},
      {"exception_group_alias_as_base", "EG = BaseExceptionGroup\nclass G(EG): pass\n", "construct-denied"},
      {"exception_group_type_of", "class G(type(eg)): pass\n", "construct-denied"},
      {"exception_group_split_assigned", "eg = ExceptionGroup('x', [ValueError()])\neg.split = f\n", "construct-denied"},
      {"exception_group_raised_and_caught",
       "try:\n    raise ExceptionGroup('x', [ValueError()])\nexcept (ExceptionGroup, ValueError) as g:\n    print(str(g))\n", nullptr},
      {"str_split", "parts = 'a,b'.split(',')\n", nullptr},
      // Dynamic classes: any metaclass called with a dict.
      {"type_alias_called", "T = type\nX = T('X', (), {'__reduce__': f})\n", "construct-denied"},
      {"type_of_a_class_called", "X = type(int)('X', (), d)\n", "construct-denied"},
      {"type_subscript_called", "X = type[int]('X', (), d)\n", "construct-denied"},
      {"type_in_partial", "import functools\nmk = functools.partial(type, 'X')\n", "construct-denied"},
      {"abcmeta_called", "import abc\nX = abc.ABCMeta('X', (), d)\n", "attribute-denied"},
      {"abcmeta_imported", "from abc import ABCMeta\n", "attribute-denied"},
      {"enum_type_called", "import enum\nX = enum.EnumType('X', (), d)\n", "attribute-denied"},
      {"metaclass_of_the_cell", "class M(type): pass\n", "construct-denied"},
      {"bases_by_mro", "B = type(acct).mro()[0]\n", "attribute-denied"},
      {"type_in_annotations", "def f(cls: type) -> type[int]:\n    return cls\n", nullptr},
      {"abc_base", "import abc\nclass Shape(abc.ABC):\n    @abc.abstractmethod\n    def area(self): ...\n", nullptr},
      // self._x: instance-only methods of the cell's own classes.
      {"self_private_in_dunders_and_properties",
       "class Counter:\n    def __init__(self):\n        self._n = 0\n    def __len__(self):\n        return self._n\n"
       "    @property\n    def n(self):\n        return self._n\n    @n.setter\n    def n(self, v):\n        self._n = v\n", nullptr},
      {"self_private_with_bases_from_this_cell",
       "import enum\nclass Base:\n    def __init__(self):\n        self._x = 1\nclass Child(Base):\n"
       "    def __init__(self):\n        super().__init__()\n        self._y = self._x\n"
       "class Color(enum.Enum):\n    RED = 1\n    def __str__(self):\n        return self._name_\n", nullptr},
      {"regular_method_called_on_a_toolbox", "class A:\n    def m(self):\n        return self._secret\nA.m(tb)\n", "private-attribute"},
      {"dunder_method_leaked_by_the_class_body", "class A:\n    def __len__(self):\n        return self._secret\n    leak = __len__\n", "private-attribute"},
      {"init_called_on_a_toolbox", "class A:\n    def __init__(self):\n        self._key = 0\nA.__init__(tb)\n", "dunder-attribute"},
      {"property_rebound_in_the_class", "class A:\n    property = staticmethod\n    @property\n    def n(self):\n        return self._secret\n", "private-attribute"},
      {"property_function_taken", "class A:\n    @property\n    def n(self):\n        return self._secret\nA.n.fget(tb)\n", "attribute-denied"},
      {"setter_of_something_else", "class A:\n    n = tb\n    @n.setter\n    def n(self, v):\n        self._key = v\n", "private-attribute"},
      {"base_from_an_earlier_cell", "class B(Base):\n    def __init__(self):\n        self._x = 1\n", "private-attribute"},
      {"base_imported_after_the_class", "class C(Enum):\n    def __str__(self):\n        return self._name_\nfrom enum import Enum\n", "private-attribute"},
      {"base_rebound_in_the_cell", "from enum import Enum\nEnum = tb.Account\nclass C(Enum):\n    def __str__(self):\n        return self._secret\n", "private-attribute"},
      {"toolbox_base_reads_private", "class E(tb.Account):\n    def __repr__(self):\n        return self._secret\n", "private-attribute"},
      {"super_dunder_in_regular_method", "class B(A):\n    def m(self, h):\n        super().__init__(h)\n", "dunder-attribute"},
      {"decorated_dunder", "class A:\n    @stash\n    def __len__(self):\n        return self._secret\n", "private-attribute"},
      {"class_inside_a_function", "def f():\n    class A:\n        def __init__(self):\n            self._x = 1\n", "private-attribute"},
      {"super_rebound", "class A:\n    def __init__(self, super):\n        super().__init__(tb)\n", "dunder-attribute"},
      {"explicit_dunder_call", "n = xs.__len__()\n", "dunder-attribute"},
      // #23 §5 follow-up: self._x in plain methods of sealed classes (docs/gate.md).
      {"sealed_class_aliased", "class A:\n    def m(self):\n        return self._x\nB = A\n", "private-attribute"},
      {"sealed_class_in_a_list", "class A:\n    def m(self):\n        return self._x\nks = [A]\nks[0].m(tb)\n", "private-attribute"},
      {"sealed_class_returned", "class A:\n    def m(self):\n        return self._x\ndef f():\n    return A\n", "private-attribute"},
      {"sealed_class_passed", "class A:\n    def m(self):\n        return self._x\ndef f(k):\n    return k.m(tb)\nf(A)\n", "private-attribute"},
      {"sealed_class_subscripted", "import typing\nclass A:\n    def m(self):\n        return self._x\ntyping.get_args(list[A])[0].m(tb)\n", "private-attribute"},
      {"sealed_class_in_a_field_annotation",
       "from dataclasses import dataclass, fields\nclass A:\n    def m(self):\n        return self._x\n"
       "@dataclass\nclass D:\n    a: A\nfields(D)[0].type.m(tb)\n", "private-attribute"},
      {"sealed_subclass_method", "class A:\n    def m(self):\n        return self._x\nclass B(A):\n    pass\nB.m(tb)\n", "private-attribute"},
      {"sealed_base_name_bound_twice", "X = 1\nclass X:\n    def m(self):\n        return self._x\nclass B(X):\n    pass\nB.m(tb)\n", "private-attribute"},
      {"method_read_off_type_of", "class A:\n    def m(self):\n        return self._x\ntype(A()).m(tb)\n", "private-attribute"},
      {"method_read_off_super_with_arguments",
       "class A:\n    def m(self):\n        return self._x\nclass B(A):\n    def n(self):\n        return super(B, B).m(tb)\n", "private-attribute"},
      {"method_read_off_super_in_class_method",
       "class A:\n    def m(self):\n        return self._x\n    @classmethod\n    def c(cls):\n        return super().m(tb)\n", "private-attribute"},
      {"method_read_off_cls", "class A:\n    def m(self):\n        return self._x\n    @classmethod\n    def c(cls):\n        return cls.m(tb)\n", "private-attribute"},
      {"cls_handed_out", "class A:\n    def m(self):\n        return self._x\n    @classmethod\n    def c(cls):\n        return cls\n", "private-attribute"},
      {"super_parameter_in_plain_method", "class A:\n    def m(self, super):\n        return super().n(tb)\n    def n(self):\n        return self._x\n", "private-attribute"},
      {"plain_method_leaked_by_the_class_body", "class A:\n    def m(self):\n        return self._x\n    n = m\n", "private-attribute"},
      {"plain_method_as_a_default", "class A:\n    def m(self):\n        return self._x\n    def k(self, f=m):\n        return f\n", "private-attribute"},
      {"static_method_private", "class A:\n    @staticmethod\n    def s(self):\n        return self._x\n", "private-attribute"},
      {"other_decorator_private", "import functools\nclass A:\n    @functools.cache\n    def m(self):\n        return self._x\n", "private-attribute"},
      {"class_decorator_gets_the_class", "def deco(c):\n    return c\n@deco\nclass A:\n    def m(self):\n        return self._x\n", "private-attribute"},
      {"nonlocal_self_in_plain_method",
       "class A:\n    def m(self):\n        def g():\n            nonlocal self\n            self = tb\n        g()\n        return self._x\n", "private-attribute"},
      {"nonlocal_self_in_dunder",
       "class A:\n    def __init__(self):\n        def g():\n            nonlocal self\n            self = tb\n        g()\n        self._x = 1\n", "private-attribute"},
      {"enum_sunder_hook", "from enum import Enum\nclass C(Enum):\n    R = 1\n    def _missing_(self):\n        return self._x\n", "private-attribute"},
      {"subclass_with_unknown_base", "class A:\n    def __len__(self):\n        return len(self._secret)\nclass D(A, Base):\n    pass\n", "private-attribute"},
      {"class_method_with_unknown_subclass",
       "class A:\n    _r = {}\n    @classmethod\n    def reg(cls, k):\n        cls._r[k] = 1\nclass D(A, Base):\n    pass\n", "private-attribute"},
      {"sealed_class_uses",
       "from dataclasses import dataclass\n@dataclass\nclass A:\n    n: int = 0\n    def m(self):\n        return self._x\n"
       "    def k(self):\n        return A(self.n)\nclass B(A):\n    pass\na = B()\na.m()\n"
       "print(A, f'{A}', A.__name__, type(a).__name__, isinstance(a, (A, int)), type(a) is A, type(a) == A)\n"
       "def f(x: A) -> A:\n    return x\ntry:\n    pass\nexcept A:\n    pass\nmatch a:\n    case A():\n        pass\n", nullptr},
      {"setter_of_a_decorated_def", "class A:\n    @stash\n    def n(self):\n        return 1\n    @n.setter\n    def n(self, v):\n        self._key = v\n", "private-attribute"},
      {"decorator_named_like_dataclass", "from html import escape as dataclass\n@dataclass\nclass A:\n    def m(self):\n        return self._x\n", "private-attribute"},
      {"known_class_decorators",
       "import dataclasses, functools\nfrom enum import Enum, unique\n@dataclasses.dataclass(frozen=True)\nclass A:\n    n: int = 0\n"
       "    def m(self):\n        return self._x\n@functools.total_ordering\nclass B:\n    def __lt__(self, o):\n        return self._k < o.k\n"
       "    def m(self):\n        return self._x\n@unique\nclass C(Enum):\n    R = 1\n    def m(self):\n        return self._value_\n", nullptr},
      {"class_method_private",
       "class Registry:\n    _items = {}\n    @classmethod\n    def add(cls, k, v):\n        cls._items[k] = v\n        return cls()\n"
       "    def get(self, k):\n        return self._items[k]\nRegistry.add('a', 1).get('a')\n", nullptr},
      // Caught exceptions: .args shown, never kept.
      {"args_kept", "try:\n    tb.lookup(1)\nexcept KeyError as e:\n    k = e.args[0]\n", "attribute-denied"},
      {"args_element_used", "try:\n    tb.lookup(1)\nexcept KeyError as e:\n    print(e.args[0].key)\n", "attribute-denied"},
      {"args_to_a_local_print", "def f(print):\n    try:\n        tb.lookup(1)\n    except KeyError as e:\n        print(e.args)\n", "attribute-denied"},
      {"args_shown",
       "try:\n    int('x')\nexcept ValueError as e:\n    print(e.args)\n    print('failed:', e.args[0], len(e.args))\n"
       "    msg = f'{e.args[0]!r}: {e.args}'\n    s = str(e.args) + repr(e.args[1:])\n", nullptr},
      // type as a value and type(x) results.
      {"isinstance_type", "def f(v):\n    return isinstance(v, type) or issubclass(v, (type, int))\n", nullptr},
      {"isinstance_shadowed", "def f(isinstance, v):\n    return isinstance(v, type)\n", "construct-denied"},
      {"type_of_compared", "print(type(x) == int, type(x) in (int, float), type(x) != type(1))\n", nullptr},
      {"type_of_compared_with_an_instance", "class C:\n    def __eq__(self, o):\n        return o('X', (), {})\ntype(int) == C()\n", "construct-denied"},
      {"type_of_in_an_instance_list", "ok = type(int) in [c]\n", "construct-denied"},
      {"type_of_to_a_local_str", "def f(str):\n    return str(type(int))\n", "construct-denied"},
  };
  return cases;
}

// The cases run with `self._x` in plain methods turned on (the sealing rules);
// the default policy refuses every attack as well (it only refuses more).
Policy TestPolicy(bool private_in_plain_methods = true) {
  Policy policy = DefaultPolicy();
  policy.AllowToolbox("tb", "mytools.api");
  policy.AllowToolbox("mt", "mytools");
  policy.private_in_plain_methods = private_in_plain_methods;
  return policy;
}

bool Has(const std::vector<Finding>& findings, std::string_view rule) {
  for (const Finding& finding : findings) {
    if (finding.rule_id() == rule) return true;
  }
  return false;
}

class GateClassTest : public ::testing::TestWithParam<Case> {};

TEST_P(GateClassTest, BothPathsGiveTheExpectedVerdict) {
  const Case& c = GetParam();
  Policy policy = TestPolicy();
  const GateMemory fresh;  // the first cell of a session
  std::vector<Finding> full = CheckSessionCellFullPath(c.code, policy, fresh, nullptr);
  std::vector<Finding> gate = CheckSessionCell(c.code, policy, fresh, nullptr);
  if (c.rule == nullptr) {
    EXPECT_TRUE(full.empty()) << FormatFindings(full);
    EXPECT_TRUE(gate.empty()) << FormatFindings(gate);
  } else {
    EXPECT_FALSE(PrescanProvesAllowed(c.code, policy));
    EXPECT_TRUE(Has(full, c.rule)) << "expected [" << c.rule << "]:\n" << FormatFindings(full);
    EXPECT_TRUE(Has(gate, c.rule)) << "expected [" << c.rule << "]:\n" << FormatFindings(gate);
  }
}

TEST(GatePlainMethods, TheDefaultPolicyRefusesEveryAttackToo) {
  Policy policy = TestPolicy(false);
  const GateMemory fresh;
  for (const Case& c : Cases()) {
    if (c.rule == nullptr) continue;
    std::vector<Finding> gate = CheckSessionCell(c.code, policy, fresh, nullptr);
    EXPECT_TRUE(Has(gate, c.rule)) << c.name << ": expected [" << c.rule << "]:\n"
                                   << FormatFindings(gate);
  }
}

// On by default since a session's gate remembers sealed classes
// (gate_memory_test.cc); a caller can still turn it off. A cell checked on its
// own (no session memory) cannot know what later cells do: refused.
TEST(GatePlainMethods, DefaultPolicyAllowsSelfPrivateInPlainMethodsInASession) {
  const char* code = "class Counter:\n    def __init__(self):\n        self._n = 0\n"
                     "    def bump(self):\n        self._n += 1\n";
  const GateMemory fresh;
  EXPECT_TRUE(DefaultPolicy().private_in_plain_methods);
  EXPECT_TRUE(CheckSessionCell(code, DefaultPolicy(), fresh, nullptr).empty());
  EXPECT_TRUE(Has(CheckSessionCell(code, TestPolicy(false), fresh, nullptr), "private-attribute"));
  EXPECT_TRUE(Has(CheckCell(code, DefaultPolicy()), "private-attribute"));
}

INSTANTIATE_TEST_SUITE_P(Classes, GateClassTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace dolsot::sandbox
