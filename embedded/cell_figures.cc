// The figures' hook-up to a running cell (see cell_figures.h).
#define PY_SSIZE_T_CLEAN
#include <Python.h>  // first, as CPython asks

#include "embedded/cell_figures.h"

#include <string>

#include "embedded/cell_runtime.h"
#include "embedded/figures.h"
#include "embedded/py_ref.h"
#include "embedded/python_text.h"

namespace dolsot {
namespace {

// ---------------------------------------------------------------------------
// Figures: the two functions _dolsot_figures calls to reach the running
// cell's capture (through the runtime's slot, shared by every copy of this
// code in the process).

CellCapture* RunningCellCapture() {
  CellRuntime* runtime = GetRuntime();
  if (runtime == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  return runtime->capture_slot();
}

PyObject* CellImages(PyObject*, PyObject*) {
  CellCapture* capture = RunningCellCapture();
  return PyLong_FromSsize_t(capture == nullptr ? -1 : static_cast<Py_ssize_t>(capture->ImageCount()));
}

PyObject* AddCellImage(PyObject*, PyObject* png) {
  CellCapture* capture = RunningCellCapture();
  if (capture == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "no dolsot cell runs on this thread");
    return nullptr;
  }
  if (!PyBytes_Check(png)) {
    PyErr_SetString(PyExc_TypeError, "a figure is PNG bytes");
    return nullptr;
  }
  capture->AddImage(std::string(PyBytes_AS_STRING(png), static_cast<std::size_t>(PyBytes_GET_SIZE(png))));
  Py_RETURN_NONE;
}

PyMethodDef kCellImagesMethod = {"_cell_images", CellImages, METH_NOARGS, nullptr};
PyMethodDef kAddCellImageMethod = {"_add_cell_image", AddCellImage, METH_O, nullptr};

}  // namespace

void EnsureFigures(CellRuntime* runtime, bool force) {
  if (runtime->figures != nullptr) {
    if (force && runtime->figures != Py_None) SelectFigureBackend(runtime->figures, true);
    return;
  }
  Ref count(PyCFunction_New(&kCellImagesMethod, nullptr));
  Ref add(PyCFunction_New(&kAddCellImageMethod, nullptr));
  runtime->figures = count && add ? CreateFigureModule(count.get(), add.get()) : nullptr;
  if (runtime->figures == nullptr) {
    PyErr_Clear();
    runtime->figures = Py_NewRef(Py_None);
    return;
  }
  SelectFigureBackend(runtime->figures, force);
}

void CollectCellFigures(CellRuntime* runtime) {
  if (runtime->figures == nullptr || runtime->figures == Py_None) return;
  PyObject* pyplot = PyDict_GetItemWithError(PyImport_GetModuleDict(), runtime->pyplot_name);
  if (pyplot == nullptr) {
    PyErr_Clear();
    return;
  }
  CollectFigures(runtime->figures);
}

Status InstallFigureBackend(bool force) {
  CellRuntime* runtime = GetRuntime();
  if (runtime == nullptr) {
    Ref exc(TakeRaisedException());
    return InternalError("cannot set up figures: " +
                         (exc ? ShortExceptionText(exc.get()) : std::string("unknown error")));
  }
  EnsureFigures(runtime, force);
  return Status::Ok();
}

}  // namespace dolsot
