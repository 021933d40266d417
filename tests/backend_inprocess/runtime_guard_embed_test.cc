// A C++ host's InProcessSession with an AST gate holds the gate's
// module-assignment rule at run time (docs/gate.md, "The runtime half"):
// stores through an alias of a module, into a class the session did not
// define, into a module's table or a dataclass Field fail in the cell with
// the finding; the session's own classes and an ungated session are free.
#include <gtest/gtest.h>
#include <pybind11/embed.h>

#include <memory>
#include <string>

#include "backend_inprocess/in_process_session.h"
#include "sandbox/ast_gate.h"

namespace py = pybind11;

namespace dolsot {
namespace {

std::unique_ptr<InProcessSession> MakeSession(bool gated) {
  InProcessOptions options;
  options.config.typecheck = false;
  if (gated) options.ast_gate = MakeAstGate();
  auto created = InProcessSession::Create(std::move(options));
  EXPECT_TRUE(created.ok()) << created.status().ToString();
  return created.ok() ? std::move(*created) : nullptr;
}

Result MustRun(InProcessSession& session, std::string_view id, std::string_view code) {
  StatusOr<Result> result = session.Run(id, code, RunOptions{});
  EXPECT_TRUE(result.ok()) << result.status().ToString();
  return result.ok() ? *result : Result{};
}

void ExpectRefused(const Result& r, const std::string& where) {
  EXPECT_FALSE(r.ok);
  EXPECT_EQ(r.outcome(), Outcome::kError) << "the static gate let it through; the run refused it";
  ASSERT_TRUE(r.error.has_value());
  EXPECT_NE(r.error->find(where + ", col "), std::string::npos) << *r.error;
  EXPECT_NE(r.error->find("[module-assignment]"), std::string::npos) << *r.error;
}

TEST(RuntimeGuard, AnAliasOfAModuleIsRefused) {
  auto session = MakeSession(true);
  ExpectRefused(MustRun(*session, "a", "import json\nj = json\nj.dumps = str"), "line 3");
  EXPECT_EQ(*MustRun(*session, "a", "json.dumps([1])").value, "'[1]'");
  py::gil_scoped_acquire gil;
  EXPECT_EQ(py::module_::import("json").attr("dumps")(py::make_tuple(1)).cast<std::string>(),
            "[1]");
}

TEST(RuntimeGuard, AClassTheSessionDidNotDefineIsRefused) {
  auto session = MakeSession(true);
  ExpectRefused(MustRun(*session, "a", "import random\nR = random.Random\nR.choice = min"),
                "line 3");
  ExpectRefused(MustRun(*session, "a", "import json\nD = json.JSONDecoder\ndel D.decode"),
                "line 3");
  py::gil_scoped_acquire gil;
  py::object decoder = py::module_::import("json").attr("JSONDecoder");
  EXPECT_TRUE(py::hasattr(decoder, "decode"));
}

TEST(RuntimeGuard, ATableAModuleHoldsIsRefused) {
  auto session = MakeSession(true);
  ExpectRefused(MustRun(*session, "a", "import copy\nt = copy.dispatch_table\nt.clear()"),
                "line 3");
  EXPECT_EQ(*MustRun(*session, "a", "len(t) == len(dict(t))").value, "True");
}

TEST(RuntimeGuard, ADataclassFieldIsRefused) {
  auto session = MakeSession(true);
  EXPECT_TRUE(MustRun(*session, "a", "import dataclasses\n@dataclasses.dataclass\nclass A:\n"
                                     "    x: int = 1")
                  .ok);
  ExpectRefused(MustRun(*session, "a", "f = dataclasses.fields(A)[0]\nf.name = 'y'"), "line 2");
}

TEST(RuntimeGuard, OwnClassesStayFree) {
  auto session = MakeSession(true);
  Result r = MustRun(*session, "a",
                     "from collections import namedtuple\nfrom enum import Enum\nclass C:\n"
                     "    n = 0\nC.n += 1\nP = namedtuple('P', 'x')\nclass E(Enum):\n    A = 1\n"
                     "(C.n, P(2).x, E.A.value)");
  ASSERT_TRUE(r.ok) << r.error.value_or("");
  EXPECT_EQ(*r.value, "(1, 2, 1)");
  EXPECT_EQ(*MustRun(*session, "a", "C.n = 5\nC.n").value, "5");
}

TEST(RuntimeGuard, AnUngatedSessionIsFree) {
  auto gated = MakeSession(true);  // the guard is installed in this interpreter
  auto plain = MakeSession(false);
  Result r = MustRun(*plain, "a",
                     "import json\nclass Box:\n    pass\nj = json\nj.dolsot_mark = 1\n"
                     "json.JSONDecoder.dolsot_mark = 2\n(j.dolsot_mark, json.JSONDecoder.dolsot_mark)");
  ASSERT_TRUE(r.ok) << r.error.value_or("");
  EXPECT_EQ(*r.value, "(1, 2)");
  py::gil_scoped_acquire gil;
  py::module_ json = py::module_::import("json");
  py::delattr(json, "dolsot_mark");
  py::delattr(json.attr("JSONDecoder"), "dolsot_mark");
}

}  // namespace
}  // namespace dolsot
