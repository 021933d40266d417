// Figures: matplotlib plots come back from a cell as PNG bytes
// (Result::images). A small module, _dolsot_figures, is matplotlib's backend
// in a session: Agg canvases (nothing opens a window), and plt.show() hands
// the open figures to the running cell; RunCell collects the figures still
// open when the cell ends. matplotlib itself is imported only by the cell
// that uses it.
//
// Needs the calling thread to hold the GIL.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "core/status.h"

struct _object;
typedef struct _object PyObject;  // NOLINT: CPython's own spelling

namespace dolsot {

// The bounds on what one cell returns (documented in docs/python.md).
inline constexpr std::size_t kMaxFiguresPerCell = 8;
inline constexpr std::size_t kMaxFigureBytes = 2u << 20;    // one PNG
inline constexpr std::size_t kMaxFigurePixels = 4'000'000;  // drawn at a lower dpi past this

// The backend's name for MPLBACKEND.
inline constexpr const char* kFigureBackend = "module://_dolsot_figures";

// Creates the _dolsot_figures module and puts it in sys.modules; returns a
// new reference (nullptr with a Python error set on failure). `cell_images`
// is a callable () -> int: the images the calling thread's running cell
// holds, or -1 when no cell runs on it; `add_cell_image` a callable
// (bytes) -> None that gives one to that cell.
PyObject* CreateFigureModule(PyObject* cell_images, PyObject* add_cell_image);

// Makes `module` matplotlib's backend for this process, now if matplotlib
// is imported and has not resolved a backend yet, else when it is first
// imported (a one-shot import hook; no environment variable is set).
// Without `force`, a backend the host chose wins (MPLBACKEND, or one
// matplotlib already resolved); a worker process forces it. Never raises;
// the error indicator is clear on return.
void SelectFigureBackend(PyObject* module, bool force);

// At a cell's end, on its thread: draws the figures still open off-screen
// (any non-interactive canvas) as PNGs for the cell and closes them. Does
// nothing, importing nothing, unless matplotlib.pyplot is imported. A note
// for each figure not returned (over the bounds, or failing to draw) is
// printed into the cell's output. Never raises.
void CollectFigures(PyObject* module);

}  // namespace dolsot
