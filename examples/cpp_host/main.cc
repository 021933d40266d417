// A C++ host of dolsot: it starts CPython, binds a stateful C++ class (an
// in-memory inventory table) with pybind11, injects one live instance into an
// InProcessSession, lets cells query and change it, and then checks in C++
// that the very same object changed. Past Create, it knows only dolsot's one
// seam, the Backend interface (core/backend.h). Exits non-zero on any mismatch.
#include <pybind11/embed.h>
#include <pybind11/stl.h>

#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend_inprocess/in_process_session.h"
#include "core/backend.h"
#include "host_checks.h"

namespace py = pybind11;

// The host's own state: lives in C++, never copied into Python.
class Inventory {
 public:
  void Set(const std::string& item, int quantity) { rows_[item] = quantity; }
  int Get(const std::string& item) const {
    auto found = rows_.find(item);
    return found == rows_.end() ? 0 : found->second;
  }
  std::vector<std::string> Items() const {
    std::vector<std::string> items;
    for (const auto& row : rows_) items.push_back(row.first);
    return items;
  }
  int Total() const {
    int total = 0;
    for (const auto& row : rows_) total += row.second;
    return total;
  }

 private:
  std::map<std::string, int> rows_;
};

PYBIND11_EMBEDDED_MODULE(host_app, m) {
  py::class_<Inventory>(m, "Inventory", "The host's in-memory inventory table.")
      .def("set", &Inventory::Set, py::arg("item"), py::arg("quantity"))
      .def("get", &Inventory::Get, py::arg("item"))
      .def("items", &Inventory::Items)
      .def("total", &Inventory::Total);
}

using host_checks::Expect;
using host_checks::Run;

int main() {
  py::scoped_interpreter python;  // this host starts CPython itself
  py::module_::import("host_app");  // registers the Inventory type

  Inventory inventory;
  inventory.Set("apples", 3);

  dolsot::InProcessOptions options;
  py::object handle = py::cast(&inventory, py::return_value_policy::reference);
  options.objects.emplace_back("inv", handle.ptr());  // by reference: the same object
  auto created = dolsot::InProcessSession::Create(std::move(options));
  if (!created.ok()) {
    std::printf("cannot create the session: %s\n", created.status().ToString().c_str());
    return 2;
  }
  std::unique_ptr<dolsot::Backend> backend = std::move(created).value();
  dolsot::Backend& session = *backend;
  Expect(session.capabilities().live_objects, "this backend shares live objects");

  {
    py::gil_scoped_release release;  // cells run on dolsot's worker threads
    dolsot::Result read = Run(session, "inv.get('apples')");
    Expect(read.ok && read.value == "3", "a cell reads the host's table");
    dolsot::Result write = Run(session,
                               "inv.set('pears', 5)\n"
                               "inv.set('apples', inv.get('apples') + 1)\n"
                               "print(sorted(inv.items()))\n"
                               "inv.total()");
    Expect(write.ok && write.value == "9", "a cell changes it and sees the total");
    Expect(write.stdout_text == "['apples', 'pears']\n", "the cell's print is captured");
    dolsot::Result bad = Run(session, "inv.get(42)");
    Expect(!bad.ok && bad.outcome() == dolsot::Outcome::kError &&
               bad.error->find("TypeError") != std::string::npos,
           "a bad call is a failed Result, not a crash");
    Run(session, "report = {'lines': len(inv.items())}");
  }
  {
    // What a cell made comes out by reference, through the same interface.
    dolsot::StatusOr<PyObject*> ns = session.Namespace("agent");
    Expect(ns.ok(), "the session's namespace is reachable");
    if (ns.ok()) {
      py::dict names = py::reinterpret_steal<py::dict>(*ns);
      py::dict report = names["report"];
      Expect(report["lines"].cast<int>() == 2, "C++ reads the dict a cell made");
      Expect(py::object(names["inv"]).is(handle), "the injected object is the very same object");
    }
  }

  Expect(inventory.Get("apples") == 4, "C++ sees apples == 4");
  Expect(inventory.Get("pears") == 5, "C++ sees pears == 5");
  Expect(inventory.Total() == 9, "C++ sees total == 9");

  (void)session.Close();  // before the interpreter ends
  handle = py::object();
  const bool passed = host_checks::failures == 0;
  std::printf("%s\n", passed ? "cpp_host: all checks passed" : "cpp_host: FAILED");
  return passed ? 0 : 1;
}
