// The AST gate's per-session memory (#23 §5): a class whose plain methods read
// `self._x` is sealed in the cell that defines it and, through the memory, in
// every later cell of the session; the memory only grows (core/gate_memory.h),
// and the pipeline adds to it only what allowed cells seal.
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "core/cell_pipeline.h"
#include "core/gate_memory.h"
#include "sandbox/ast_gate.h"
#include "sandbox/check_cell.h"
#include "sandbox/prescan.h"

namespace dolsot::sandbox {
namespace {

bool Has(const std::vector<Finding>& findings, std::string_view rule) {
  for (const Finding& finding : findings) {
    if (finding.rule_id() == rule) return true;
  }
  return false;
}

Policy TestPolicy() {
  Policy policy = DefaultPolicy();
  policy.AllowToolbox("tb", "mytools.api");
  return policy;
}

// A session as the pipeline keeps it: each allowed cell's learned names join
// the memory. Both paths must agree on every cell.
class Session {
 public:
  // Findings of the cell (empty: allowed, and the memory learned from it).
  std::vector<Finding> Run(const std::string& code) {
    GateMemory learned_fast, learned_full;
    std::vector<Finding> fast = CheckSessionCell(code, policy_, memory_, &learned_fast);
    std::vector<Finding> full = CheckSessionCellFullPath(code, policy_, memory_, &learned_full);
    EXPECT_EQ(fast.empty(), full.empty()) << code << "\nfast:\n"
                                          << FormatFindings(fast) << "full:\n"
                                          << FormatFindings(full);
    if (fast.empty() && full.empty()) {
      EXPECT_EQ(learned_fast, learned_full) << code;
      memory_.Merge(learned_full);
    }
    return full;
  }
  bool Allows(const std::string& code) {
    std::vector<Finding> findings = Run(code);
    EXPECT_TRUE(findings.empty()) << code << "\n" << FormatFindings(findings);
    return findings.empty();
  }
  bool Refuses(const std::string& code, std::string_view rule = "private-attribute") {
    std::vector<Finding> findings = Run(code);
    EXPECT_TRUE(Has(findings, rule)) << "expected [" << rule << "] for:\n" << code << "\ngot:\n"
                                     << FormatFindings(findings);
    return Has(findings, rule);
  }
  GateMemory& memory() { return memory_; }

 private:
  Policy policy_ = TestPolicy();
  GateMemory memory_;
};

const char* kAccount =
    "class A:\n"
    "    LIMIT = 3\n"
    "    def __init__(self):\n"
    "        self._items = []\n"
    "    def m(self):\n"
    "        self._items.append(1)\n"
    "        return len(self._items)\n";

TEST(GateMemory, ASealedClassIsUsableInLaterCells) {
  Session session;
  ASSERT_TRUE(session.Allows(kAccount));
  EXPECT_TRUE(session.memory().sealed_classes.contains("A"));
  EXPECT_TRUE(session.memory().sealed_methods.contains("m"));
  EXPECT_TRUE(session.Allows("a = A()\nprint(a.m(), A.LIMIT, A.__name__)\n"
                             "print(isinstance(a, A), type(a) is A)\n"
                             "try:\n    pass\nexcept A:\n    pass\n"
                             "match a:\n    case A():\n        pass\n"
                             "def f(x: A) -> int:\n    return x.m()\n"));
  // A subclass with own bases only: sealed in turn.
  EXPECT_TRUE(session.Allows("class D(A):\n    def extra(self):\n        return 1\n"
                             "d = D()\nd.m()\n"));
  EXPECT_TRUE(session.memory().sealed_classes.contains("D"));
}

struct Attack {
  const char* name;
  const char* code;
  const char* rule;
};

std::ostream& operator<<(std::ostream& out, const Attack& a) { return out << a.name; }

// Each after kAccount in an earlier cell (and `a = A()`, `Base = tb.Base`).
const std::vector<Attack>& LaterCellAttacks() {
  static const std::vector<Attack> attacks = {
      {"method_off_the_class", "import copy\nA.m(copy)\n", "private-attribute"},
      {"method_kept", "f = A.m\n", "private-attribute"},
      {"method_in_value_pattern", "match 1:\n    case A.m:\n        pass\n", "private-attribute"},
      {"class_aliased", "B = A\n", "private-attribute"},
      {"class_rebound_to_itself", "A = A\n", "private-attribute"},
      {"class_walrus", "(B := A)\n", "private-attribute"},
      {"class_in_list", "x = [A]\n", "private-attribute"},
      {"class_iterated", "for A in [A]:\n    pass\n", "private-attribute"},
      {"class_passed", "import copy\nc = copy.copy(A)\n", "private-attribute"},
      {"class_returned", "def f():\n    return A\n", "private-attribute"},
      {"class_in_lambda", "f = lambda: A\n", "private-attribute"},
      {"class_subscripted", "x = A[int]\n", "private-attribute"},
      {"super_two_args", "s = super(A, a).m\n", "private-attribute"},
      {"type_of_instance", "import copy\ntype(a).m(copy)\n", "private-attribute"},
      {"type_of_instance_in_function", "def f(o):\n    return type(o).m\n", "private-attribute"},
      {"classmethod_of_subclass",
       "class D(A):\n    @classmethod\n    def c(cls):\n        return cls.m\n", "private-attribute"},
      {"super_in_classmethod",
       "class D(A):\n    @classmethod\n    def c(cls):\n        return super().m\n",
       "private-attribute"},
      {"subclass_with_host_base", "class D(A, Base):\n    pass\n", "private-attribute"},
      {"subclass_with_toolbox_base", "import tb\nclass D(A, tb.Base):\n    pass\n",
       "construct-denied"},
      {"subclass_with_metaclass", "class D(A, metaclass=Meta):\n    pass\n", "private-attribute"},
      {"subclass_decorated", "@keep\nclass D(A):\n    pass\n", "private-attribute"},
      {"subclass_of_subclass_with_host_base",
       "class D(A):\n    pass\nclass E(D, Base):\n    pass\n", "private-attribute"},
      {"subclass_kept", "class D(A):\n    pass\nX = D\n", "private-attribute"},
  };
  return attacks;
}

class GateMemoryAttack : public ::testing::TestWithParam<Attack> {};

TEST_P(GateMemoryAttack, IsRefusedInALaterCellAndLeavesTheMemory) {
  Session session;
  ASSERT_TRUE(session.Allows(kAccount));
  ASSERT_TRUE(session.Allows("a = A()\n"));
  const GateMemory before = session.memory();
  EXPECT_TRUE(session.Refuses(GetParam().code, GetParam().rule));
  EXPECT_EQ(session.memory(), before);
  // What the memory adds: in a session that never sealed A, where `A` is
  // just a name, no private-attribute finding.
  Session fresh;
  std::vector<Finding> findings = fresh.Run(GetParam().code);
  EXPECT_FALSE(Has(findings, "private-attribute")) << FormatFindings(findings);
}

INSTANTIATE_TEST_SUITE_P(LaterCells, GateMemoryAttack, ::testing::ValuesIn(LaterCellAttacks()),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(GateMemory, WithoutTheMemoryTheSameCellsPass) {
  // What the memory closes: a fresh session sees `A.m(copy)` as a method call.
  Session fresh;
  EXPECT_TRUE(fresh.Allows("import copy\nA.m(copy)\n"));
  EXPECT_TRUE(fresh.Allows("f = A.m\n"));
}

TEST(GateMemory, ANameStaysSealedWhateverItIsBoundToLater) {
  Session session;
  ASSERT_TRUE(session.Allows(kAccount));
  // Binding the name anew is allowed (a store, not a use of the class) ...
  EXPECT_TRUE(session.Allows("A = 5\n"));
  EXPECT_TRUE(session.Allows("del A\n"));
  EXPECT_TRUE(session.Allows("import json as A\n"));
  EXPECT_TRUE(session.Allows("class A:\n    pass\n"));
  // ... but the name keeps the sealed uses only: the gate cannot see which
  // binding a later cell reads.
  EXPECT_TRUE(session.Refuses("x = A\n"));
  EXPECT_TRUE(session.Refuses("f = A.m\n"));
  EXPECT_TRUE(session.Allows("print(A.dumps)\n"));
}

TEST(GateMemory, TheFastPathNeverAcceptsACellNamingASealedName) {
  Session session;
  ASSERT_TRUE(session.Allows(kAccount));
  // Both would take the fast path in a fresh session.
  Policy policy = TestPolicy();
  EXPECT_TRUE(CheckCell("import copy\nA.m(copy)\n", policy).empty());
  EXPECT_TRUE(session.Refuses("import copy\nA.m(copy)\n"));
  // A mention in a string only costs the full path, which allows it.
  EXPECT_TRUE(session.Allows("print('A.m')\n"));
  // Every spelling the fast path could take is seen (Session::Run also
  // checks that the fast and the full path agree on each).
  for (const char* code : {"import copy\n(A).m(copy)\n", "import copy\nA .m(copy)\n",
                           "import copy\nA\\\n.m(copy)\n", "import copy\nx=[A][0]\n",
                           "import copy\nf=A.m;f(copy)\n", "import copy\ntype(a).m(copy)\n"}) {
    EXPECT_TRUE(session.Refuses(code)) << code;
  }
  // Names that only contain a remembered one: the fast path, allowed.
  EXPECT_TRUE(session.Allows("Alpha = 1\nmA = 2\nprint(Alpha + mA, 0xA)\n"));
  EXPECT_TRUE(PrescanProvesAllowed("Alpha = 1\nmA = 2\nprint(Alpha + mA, 0xA)\n", policy));
}

TEST(GateMemory, SealedMethodNamesCountForEveryClassRead) {
  Session session;
  ASSERT_TRUE(session.Allows(kAccount));
  // Another class's method of the same name, read off `type(x)`: refused
  // (the gate cannot tell the classes apart from a name).
  EXPECT_TRUE(session.Refuses("class B:\n    def m(self):\n        return 1\nb = B()\n"
                              "f = type(b).m\n"));
  // Read off B by name: B is no sealed class, so that is allowed.
  EXPECT_TRUE(session.Allows("f = B.m\n"));
}

TEST(GateMemory, AnIncompleteMemoryRefusesPlainMethodsOnly) {
  Session session;
  session.memory().complete = false;
  EXPECT_TRUE(session.Refuses(kAccount));
  EXPECT_TRUE(session.Allows("class C:\n    def __init__(self):\n        self._n = 0\n"
                             "    def __len__(self):\n        return self._n\n"));
  EXPECT_FALSE(session.memory().complete);
}

TEST(GateMemory, TheFlagOffRefusesPlainMethodsWithAnyMemory) {
  Policy policy = TestPolicy();
  policy.private_in_plain_methods = false;
  GateMemory memory, learned;
  EXPECT_TRUE(Has(CheckSessionCell(kAccount, policy, memory, &learned), "private-attribute"));
}

TEST(GateMemory, EncodesAndDecodes) {
  GateMemory memory;
  memory.sealed_classes = {"A", "D", "Ünïcode"};
  memory.sealed_methods = {"m"};
  for (bool complete : {true, false}) {
    memory.complete = complete;
    StatusOr<GateMemory> back = GateMemory::Decode(memory.Encode());
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(*back, memory);
  }
  EXPECT_EQ(*GateMemory::Decode(GateMemory().Encode()), GateMemory());
  const std::string good = memory.Encode();
  EXPECT_FALSE(GateMemory::Decode("").ok());
  EXPECT_FALSE(GateMemory::Decode(good + "x").ok());
  for (std::size_t cut = 0; cut < good.size(); ++cut) {
    EXPECT_FALSE(GateMemory::Decode(good.substr(0, cut)).ok()) << cut;
  }
  std::string bad_flag = good;
  bad_flag[1] = 2;
  EXPECT_FALSE(GateMemory::Decode(bad_flag).ok());
}

TEST(GateMemory, MergeUnitesAndStaysIncomplete) {
  GateMemory a, b;
  a.sealed_classes = {"A"};
  b.sealed_classes = {"B"};
  b.sealed_methods = {"m"};
  b.complete = false;
  a.Merge(b);
  EXPECT_EQ(a.sealed_classes, (GateMemory::Names{"A", "B"}));
  EXPECT_EQ(a.sealed_methods, (GateMemory::Names{"m"}));
  EXPECT_FALSE(a.complete);
}

// The pipeline: what an allowed cell seals joins the session's memory before
// it runs; a refused cell (by any gate) adds nothing.
TEST(GateMemoryPipeline, LearnsFromAllowedCellsOnly) {
  bool caller_allows = true;
  GateSet gates;
  gates.ast_gate = MakeAstGate(TestPolicy());
  gates.caller_gate = [&](const GateRequest&) {
    GateVerdict verdict;
    verdict.allowed = caller_allows;
    verdict.message = "no";
    return verdict;
  };
  CellPipeline pipeline(std::move(gates));
  SessionGateMemory memory;
  static const std::vector<std::string> kNoNames;
  auto run = [&](const std::string& code) {
    GateRequest request{code, kNoNames, std::chrono::steady_clock::now() + std::chrono::seconds(30)};
    int ran = 0;
    Result result = pipeline.Run(request, memory, [&] {
      ++ran;
      return Result();
    });
    EXPECT_EQ(ran, result.outcome() == Outcome::kRejected ? 0 : 1);
    return result;
  };
  caller_allows = false;  // the AST gate allows it, the caller's gate does not
  EXPECT_EQ(run(kAccount).outcome(), Outcome::kRejected);
  EXPECT_TRUE(memory.Get().empty());
  caller_allows = true;
  EXPECT_EQ(run(kAccount).outcome(), Outcome::kOk);
  EXPECT_TRUE(memory.Get().sealed_classes.contains("A"));
  EXPECT_EQ(run("import copy\nA.m(copy)\n").outcome(), Outcome::kRejected);
  EXPECT_EQ(run("class D(A, Base):\n    pass\n").outcome(), Outcome::kRejected);
  EXPECT_FALSE(memory.Get().sealed_classes.contains("D"));
}

TEST(GateMemoryPipeline, AGateWithoutTheSessionsMemoryAssumesTheWorst) {
  CellGate gate = MakeAstGate(TestPolicy());
  static const std::vector<std::string> kNoNames;
  GateRequest request{kAccount, kNoNames, std::chrono::steady_clock::now()};
  EXPECT_FALSE(gate(request).allowed);
  GateMemory fresh;
  request.memory = &fresh;
  GateVerdict verdict = gate(request);
  EXPECT_TRUE(verdict.allowed) << verdict.message;
  EXPECT_TRUE(verdict.learned.sealed_classes.contains("A"));
}

}  // namespace
}  // namespace dolsot::sandbox
