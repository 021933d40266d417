// Cell sources, which tracebacks read (through linecache) to show a cell's
// lines: RunCell registers each cell's source under its filename, and a
// session restored from a checkpoint registers the sources its functions were
// defined in. linecache is never imported for this: until something else
// imports it (a traceback, user code), the sources wait in CellRuntime.
//
// Every function here needs the calling thread to hold the GIL.
#pragma once

#include <optional>
#include <string>
#include <string_view>

struct _object;
typedef struct _object PyObject;  // NOLINT: CPython's own spelling

namespace dolsot {

struct CellRuntime;

// Both never fail loudly: a source that cannot be registered or read is
// simply not there (the Python error indicator is clear on return).
void RegisterCellSource(std::string_view filename, std::string_view code);
// The source registered for `filename` by this interpreter (RunCell or
// RegisterCellSource), or nullopt.
std::optional<std::string> RegisteredCellSource(std::string_view filename);

// The same for RunCell, which has the runtime and the filename object at hand.
void RegisterSource(CellRuntime* runtime, PyObject* filename, std::string_view code);
// Moves the waiting sources into linecache.cache if linecache is loaded
// (before a traceback is formatted).
void FlushPendingSources();
// Forgets the source registered for `filename`, waiting or in linecache
// (a throwaway cell's: the warm-up leaves no trace a cell could see).
void ForgetCellSource(std::string_view filename);
// The dicts that hold the registered sources, after FlushPendingSources:
// CellRuntime's waiting ones and, once linecache is loaded, linecache.cache
// (else null). Borrowed; null when there is no runtime.
struct CellSourceDicts {
  PyObject* waiting = nullptr;
  PyObject* linecache = nullptr;
};
CellSourceDicts RegisteredSourceDicts();

}  // namespace dolsot
