// InternedName across interpreter lifetimes: the one interned str per
// interpreter, found again without a lookup, and never the freed str of an
// interpreter that was finalized (the next one, often at the same address,
// interns its own).
#include <Python.h>

#include <gtest/gtest.h>

#include <string>

#include "embedded/interned_name.h"

namespace dolsot {
namespace {

constinit const InternedName kProbe("dolsot_interned_name_probe");

// What the interpreter's own interning gives for the same text (a new
// reference).
PyObject* InternedByPython(const char* text) { return PyUnicode_InternFromString(text); }

TEST(InternedName, IsTheInterpretersInternedStrOfItsText) {
  Py_InitializeEx(0);
  PyObject* name = kProbe.get();
  ASSERT_NE(name, nullptr);
  EXPECT_TRUE(PyUnicode_CheckExact(name));
  EXPECT_STREQ(PyUnicode_AsUTF8(name), "dolsot_interned_name_probe");
  PyObject* theirs = InternedByPython("dolsot_interned_name_probe");
  EXPECT_EQ(theirs, name);  // the one interned str: the type attribute cache matches it
  Py_DECREF(theirs);
  EXPECT_EQ(kProbe.get(), name);
  // Usable as an attribute name: found on an object that has it.
  PyObject* globals = PyDict_New();
  PyObject* run = PyRun_String(
      "class C: pass\nc = C()\nc.dolsot_interned_name_probe = 7\n", Py_file_input, globals,
      globals);
  ASSERT_NE(run, nullptr);
  Py_DECREF(run);
  PyObject* value = PyObject_GetAttr(PyDict_GetItemString(globals, "c"), kProbe.get());
  ASSERT_NE(value, nullptr);
  EXPECT_EQ(PyLong_AsLong(value), 7);
  Py_DECREF(value);
  Py_DECREF(globals);
  ASSERT_EQ(Py_FinalizeEx(), 0);
}

TEST(InternedName, EachInterpreterGetsItsOwnStr) {
  for (int round = 0; round < 3; ++round) {
    Py_InitializeEx(0);
    // Fresh objects churn the allocator, so a stale pointer would point at
    // something else (or at freed memory, which ASan and valgrind report).
    PyObject* churn = PyList_New(0);
    for (int i = 0; i < 1000; ++i) {
      PyObject* item = PyUnicode_FromFormat("filler %d %d", round, i);
      PyList_Append(churn, item);
      Py_DECREF(item);
    }
    PyObject* name = kProbe.get();
    ASSERT_NE(name, nullptr) << "round " << round;
    ASSERT_TRUE(PyUnicode_CheckExact(name)) << "round " << round;
    EXPECT_STREQ(PyUnicode_AsUTF8(name), "dolsot_interned_name_probe") << "round " << round;
    PyObject* theirs = InternedByPython("dolsot_interned_name_probe");
    EXPECT_EQ(theirs, name) << "round " << round;
    Py_DECREF(theirs);
    Py_DECREF(churn);
    ASSERT_EQ(Py_FinalizeEx(), 0);
  }
}

}  // namespace
}  // namespace dolsot
