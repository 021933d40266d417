// The per-cell entry points (Repl.run, InProcessSession.run) bound as
// METH_FASTCALL methods, without pybind11's dispatcher.
//
// Why: a paced cell (the agent thinks between cells) meets every cache cold.
// pybind11's generic dispatcher (the overload loop, argument loaders, keyword
// matching) cost ~34 µs there before the C++ call began, about a tenth of the
// whole cell. Parsing run's three arguments by hand costs a few µs. Every
// other method keeps pybind11's binding: they are not on a cell's path.
#pragma once

#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <string_view>

namespace dolsot::bindings {

// run(session_id, code, *, timeout=None, variables=None), as passed by vectorcall.
struct RunArguments {
  std::string_view session_id;
  std::string_view code;
  std::optional<double> timeout;
  PyObject* variables = nullptr;  // a dict (borrowed), or nullptr
  PyObject* on_output = nullptr;  // a callable (borrowed), or nullptr
  PyObject* on_image = nullptr;   // a callable (borrowed), or nullptr
  // UTF-8 of a str that holds a lone surrogate (encoded with surrogatepass, so
  // the core names the bad byte instead of this call raising).
  std::string session_id_storage;
  std::string code_storage;
};

// Fills `out`; raises TypeError (py::error_already_set) for a call a Python
// function with that signature would refuse.
void ParseRunArguments(PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames,
                       RunArguments& out);

// Calls `body` (returning a py::object) as a CPython method body: a new
// reference, or nullptr with the Python error set, C++ exceptions translated
// as pybind11 translates them.
template <typename Body>
PyObject* CallAsMethod(Body&& body) noexcept {
  try {
    return body().release().ptr();
  } catch (pybind11::error_already_set& e) {
    e.restore();
  } catch (...) {
    pybind11::detail::try_translate_exceptions();
  }
  return nullptr;
}

// The C++ object behind `self`, an instance of the class bound for T (or of a
// Python subclass). Raises TypeError naming `method` when it holds none (made
// with __new__, __init__ never ran): there pybind11 would hand the method
// freshly allocated, uninitialized memory (and the method would crash).
// An instance with one C++ base keeps it in its first slot (pybind11's
// "simple layout"); that slot is read directly, skipping the type lookups
// (~9 µs with caches cold) pybind11 makes for a subclass's instance.
template <typename T>
T& SelfAs(PyObject* self, const char* method = "run") {
  namespace detail = pybind11::detail;
  static const detail::type_info* const bound = detail::get_type_info(typeid(T));
  auto* instance = reinterpret_cast<detail::instance*>(self);
  detail::value_and_holder holder;
  if (bound != nullptr && instance->simple_layout && PyObject_TypeCheck(self, bound->type)) {
    holder = detail::value_and_holder(instance, bound, 0, 0);
  } else {
    holder = instance->get_value_and_holder(bound, /*throw_if_missing=*/false);
  }
  if (!holder.inst || holder.value_ptr() == nullptr || !holder.holder_constructed()) {
    PyErr_Format(PyExc_TypeError, "%s.%s() called on an instance whose __init__ did not run",
                 Py_TYPE(self)->tp_name, method);
    throw pybind11::error_already_set();
  }
  return *holder.template value_ptr<T>();
}

namespace detail {
template <typename T, typename F, typename R, typename... Args>
auto Checked(const char* method, F body, R (F::*)(T&, Args...) const) {
  return [method, body](pybind11::handle self, Args... args) -> R {
    return body(SelfAs<T>(self.ptr(), method), std::forward<Args>(args)...);
  };
}
}  // namespace detail

// `body` (a lambda taking T& first) as a pybind11 method that takes self as a
// handle and resolves it through SelfAs: `.def("close", Checked<Repl>("close",
// [](Repl& r) {...}))`. For every method of a class whose methods would crash
// on an instance never initialized.
template <typename T, typename F>
auto Checked(const char* method, F body) {
  return detail::Checked<T>(method, std::move(body), &F::operator());
}

// Installs `def` (METH_FASTCALL | METH_KEYWORDS, static storage) as a method
// of the bound class `cls`.
void AddFastMethod(pybind11::handle cls, PyMethodDef* def);

}  // namespace dolsot::bindings
