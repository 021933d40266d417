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
      {"type_of_one_argument", "t = type(x)\nprint(type(x).__name__)\n", nullptr},
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
      {"self_private_in_own_class",
       "class Counter:\n    def __init__(self):\n        self._n = 0\n"
       "    def bump(self):\n        self._n += 1\n        return self._n\n", nullptr},
      {"import_csv_io_still_refused", "import csv, io\n", "import-denied"},
      {"help_as_a_name_still_refused", "help(len)\n", "name-denied"},
      {"open_as_a_name_still_refused", "open('/etc/passwd')\n", "name-denied"},
      {"self_private_module_name", "class A:\n    def m(self):\n        return self._os\n", "private-attribute"},
      {"self_private_outside_method", "def m(self):\n    return self._x\n", "private-attribute"},
      {"self_private_other_param", "class A:\n    def m(self, o):\n        return o._x\n", "private-attribute"},
      {"self_rebound", "class A:\n    def m(self):\n        self = tb\n        return self._key\n", "private-attribute"},
      {"self_in_comprehension", "class A:\n    def m(self):\n        return [self._key for self in [tb]]\n", "private-attribute"},
      {"self_private_in_nested_function",
       "class A:\n    def m(self):\n        def g(self):\n            return self._key\n        return g\n", "private-attribute"},
  };
  return cases;
}

Policy TestPolicy() {
  Policy policy = DefaultPolicy();
  policy.AllowToolbox("tb", "mytools.api");
  policy.AllowToolbox("mt", "mytools");
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
  std::vector<Finding> full = CheckCellFullPath(c.code, policy);
  std::vector<Finding> gate = CheckCell(c.code, policy);
  if (c.rule == nullptr) {
    EXPECT_TRUE(full.empty()) << FormatFindings(full);
    EXPECT_TRUE(gate.empty()) << FormatFindings(gate);
  } else {
    EXPECT_FALSE(PrescanProvesAllowed(c.code, policy));
    EXPECT_TRUE(Has(full, c.rule)) << "expected [" << c.rule << "]:\n" << FormatFindings(full);
    EXPECT_TRUE(Has(gate, c.rule)) << "expected [" << c.rule << "]:\n" << FormatFindings(gate);
  }
}

INSTANTIATE_TEST_SUITE_P(Classes, GateClassTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace dolsot::sandbox
