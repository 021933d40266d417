// Figures (see figures.h): the _dolsot_figures module, written in Python
// (it drives matplotlib's Python API), compiled once per interpreter.
#define PY_SSIZE_T_CLEAN
#include <Python.h>  // first, as CPython asks

#include "embedded/figures.h"

#include "embedded/py_ref.h"

namespace dolsot {
namespace {

// No environment variable is set: MPLBACKEND would reach every process a
// cell starts, where this module does not exist. Instead a one-shot import
// finder sets the backend once matplotlib itself has been imported. Only
// that bootstrap is compiled when a process starts (the CLI starts a worker
// per call); the backend's own functions wait for matplotlib.
constexpr const char* kModuleSource = R"PY(
"""dolsot's matplotlib backend: Agg canvases, so nothing opens a window;
plt.show() hands the open figures to the running cell as PNGs."""
import sys

MAX_FIGURES = 0     # set by dolsot (embedded/figures.h)
MAX_BYTES = 0
MAX_PIXELS = 0
BACKEND = ""
_cell_images = None     # () -> int: images the running cell holds, -1 outside a cell
_add_cell_image = None  # (bytes) -> None
_BACKEND_SOURCE = ""    # the backend itself, compiled once matplotlib is imported


def _load_backend():
    if "collect" not in globals():
        exec(compile(_BACKEND_SOURCE, "<dolsot figures>", "exec"), globals())


class _SelectOnImport:
    """An import finder that finds nothing itself: when matplotlib is first
    imported it wraps the real loader so that, once matplotlib is loaded,
    this module becomes its backend. It then leaves sys.meta_path."""

    def __init__(self, force):
        self.force = force

    def find_spec(self, name, path=None, target=None):
        if name != "matplotlib":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        for finder in sys.meta_path:
            find = getattr(finder, "find_spec", None)
            spec = find(name, path, target) if find is not None else None
            if spec is not None:
                break
        else:
            return None
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader, self.force)
        return spec


class _Loader:
    """matplotlib's own loader, then the backend chosen."""

    def __init__(self, loader, force):
        self._loader = loader
        self._force = force

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        _load_backend()
        _use_in(module, self._force)

    def __getattr__(self, name):
        return getattr(self._loader, name)


def select(force):
    matplotlib = sys.modules.get("matplotlib")
    if matplotlib is not None:
        _load_backend()
        if force or _backend_unresolved(matplotlib):
            _use_in(matplotlib, force)
        return
    if not any(isinstance(finder, _SelectOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _SelectOnImport(force))
)PY";

// The backend proper (compiled only in a process that imports matplotlib).
constexpr const char* kBackendSource = R"PY(
def __getattr__(name):
    # matplotlib asks for FigureCanvas when it loads the backend: only then
    # is its Agg canvas imported.
    if name in ("FigureCanvas", "FigureManager"):
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.backend_bases import FigureManagerBase
        globals().update(FigureCanvas=FigureCanvasAgg, FigureManager=FigureManagerBase)
        return globals()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def show(*args, **kwargs):
    """plt.show(): the open figures go to the running cell, then close."""
    collect()


def _draw(figure):
    import io
    width, height = figure.get_size_inches()
    dpi = figure.dpi
    pixels = width * height * dpi * dpi
    if pixels > MAX_PIXELS:
        dpi *= (MAX_PIXELS / pixels) ** 0.5
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=dpi, bbox_inches="tight")
    return buffer.getvalue()


def collect():
    """Draws the open off-screen figures as PNGs for the running cell and
    closes them; prints a note for each one not returned."""
    held = _cell_images()
    pyplot = sys.modules.get("matplotlib.pyplot")
    if held < 0 or pyplot is None:
        return
    from matplotlib._pylab_helpers import Gcf
    over = []
    for manager in Gcf.get_all_fig_managers():
        if getattr(manager.canvas, "required_interactive_framework", None) is not None:
            continue  # a window the host opened itself (in-process): left alone
        figure = manager.canvas.figure
        try:
            if held >= MAX_FIGURES:
                over.append(str(manager.num))
                continue
            png = _draw(figure)
            if len(png) > MAX_BYTES:
                print(f"[dolsot: figure {manager.num} not returned: its PNG is {len(png)} bytes, "
                      f"over the {MAX_BYTES}-byte bound]")
                continue
            _add_cell_image(png)
            held += 1
        except Exception as exc:
            print(f"[dolsot: figure {manager.num} could not be drawn: "
                  f"{type(exc).__name__}: {exc}]")
        finally:
            try:
                pyplot.close(figure)
            except Exception:
                pass
    if over:
        print(f"[dolsot: figure{'s' if len(over) > 1 else ''} {', '.join(over)} not returned: "
              f"at most {MAX_FIGURES} per cell; save more with fig.savefig(path)]")


def _use_in(matplotlib, force):
    import os
    if force or not os.environ.get("MPLBACKEND"):
        try:
            matplotlib.rcParams["backend"] = BACKEND
        except Exception:
            pass


def _backend_unresolved(matplotlib):
    """True while matplotlib has not picked a backend yet (nothing drawn,
    none set): imported is not chosen."""
    try:
        from matplotlib import rcsetup
        return dict.__getitem__(matplotlib.rcParams, "backend") is rcsetup._auto_backend_sentinel
    except Exception:
        return False
)PY";

constexpr const char* kModuleName = "_dolsot_figures";

bool SetSize(PyObject* module, const char* name, std::size_t value) {
  Ref number(PyLong_FromSize_t(value));
  return number && PyModule_AddObjectRef(module, name, number.get()) == 0;
}

}  // namespace

PyObject* CreateFigureModule(PyObject* cell_images, PyObject* add_cell_image) {
  Ref module(PyModule_New(kModuleName));
  if (!module) return nullptr;
  PyObject* globals = PyModule_GetDict(module.get());  // borrowed
  if (PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins()) < 0) return nullptr;
  Ref code(Py_CompileString(kModuleSource, "<dolsot figures>", Py_file_input));
  if (!code) return nullptr;
  Ref ran(PyEval_EvalCode(code.get(), globals, globals));
  if (!ran) return nullptr;
  Ref backend(PyUnicode_FromString(kFigureBackend));
  Ref backend_source(PyUnicode_FromString(kBackendSource));
  if (!backend || !backend_source || !SetSize(module.get(), "MAX_FIGURES", kMaxFiguresPerCell) ||
      !SetSize(module.get(), "MAX_BYTES", kMaxFigureBytes) ||
      !SetSize(module.get(), "MAX_PIXELS", kMaxFigurePixels) ||
      PyModule_AddObjectRef(module.get(), "BACKEND", backend.get()) < 0 ||
      PyModule_AddObjectRef(module.get(), "_BACKEND_SOURCE", backend_source.get()) < 0 ||
      PyModule_AddObjectRef(module.get(), "_cell_images", cell_images) < 0 ||
      PyModule_AddObjectRef(module.get(), "_add_cell_image", add_cell_image) < 0) {
    return nullptr;
  }
  PyObject* modules = PyImport_GetModuleDict();  // borrowed
  if (PyDict_SetItemString(modules, kModuleName, module.get()) < 0) return nullptr;
  return module.release();
}

void SelectFigureBackend(PyObject* module, bool force) {
  Ref done(PyObject_CallMethod(module, "select", "O", force ? Py_True : Py_False));
  if (!done) PyErr_Clear();
}

void CollectFigures(PyObject* module) {
  Ref done(PyObject_CallMethod(module, "collect", nullptr));
  if (!done) PyErr_Clear();
}

}  // namespace dolsot
