// The figures' hook-up to a running cell: _dolsot_figures (figures.h) reaches
// the running cell's capture through two functions made here, and RunCell
// makes the module before a cell and collects what the cell left open after.
//
// Every function here needs the calling thread to hold the GIL.
#pragma once

#include "core/status.h"

namespace dolsot {

struct CellRuntime;

// Makes matplotlib draw off-screen in this interpreter, with plt.show() and
// the figures a cell leaves open returned in Result::images
// (embedded/figures.h). RunCell calls it with force == false: a backend the
// host chose (MPLBACKEND, or matplotlib already imported) wins. A worker
// process forces it. Idempotent; imports nothing.
Status InstallFigureBackend(bool force);

// Makes the figure module once per interpreter; a failure leaves cells
// without figures, never without a run.
void EnsureFigures(CellRuntime* runtime, bool force);

// At a cell's end: its figures, if it (or an earlier cell) imported pyplot.
void CollectCellFigures(CellRuntime* runtime);

}  // namespace dolsot
