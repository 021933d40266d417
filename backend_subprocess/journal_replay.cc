// Binds a stored checkpoint's journal (a delta frame, binding cells'
// values) over its restored base, in the session process.
#include "backend_subprocess/journal_replay.h"

#include <algorithm>
#include <set>

#include "backend_subprocess/checkpoint.h"
#include "embedded/py_ref.h"
#include "embedded/read_only_cell.h"

namespace dolsot {
namespace {

// The last delta frame: the base's values of the names it kept, and the
// names of its blob; every other name of the base goes. Returns what went
// wrong (the base then stands as restored), or "".
std::string ApplyDelta(PyObject* globals, const SplitCheckpoint& split,
                       std::vector<std::string>& restored, std::vector<std::string>& failed,
                       std::uint64_t& cells_run) {
  auto delta = RestoreNamespace(globals, split.delta_blob);
  if (!delta.ok()) {
    return "the checkpoint's delta frame does not read back (" + delta.status().message() +
           "); the session is as its base checkpoint holds it";
  }
  const std::vector<std::string>& kept = split.delta_kept;  // sorted
  auto is_kept = [&kept](const std::string& name) {
    return std::binary_search(kept.begin(), kept.end(), name);
  };
  const std::set<std::string> anew(delta->restored.begin(), delta->restored.end());
  auto in_delta = [&anew](const std::string& name) { return anew.count(name) != 0; };
  // A base name the delta neither kept nor restored is not in this state
  // (one whose delta value failed to load holds the base's value: it goes).
  for (const std::vector<std::string>* base_names : {&restored, &failed}) {
    for (const std::string& name : *base_names) {
      if (is_kept(name) || in_delta(name)) continue;
      Ref key(PyUnicode_FromStringAndSize(name.data(), static_cast<Py_ssize_t>(name.size())));
      if (key && PyDict_Contains(globals, key.get()) == 1) (void)PyDict_DelItem(globals, key.get());
      PyErr_Clear();
    }
  }
  std::vector<std::string> now_restored, now_failed;
  for (const std::string& name : restored) {
    if (is_kept(name) && !in_delta(name)) now_restored.push_back(name);
  }
  for (const std::string& name : failed) {
    if (is_kept(name) && !in_delta(name)) now_failed.push_back(name);
  }
  for (std::string& name : delta->restored) now_restored.push_back(std::move(name));
  for (std::string& name : delta->failed) now_failed.push_back(std::move(name));
  restored = std::move(now_restored);
  failed = std::move(now_failed);
  cells_run = std::max(cells_run, delta->cells_run);
  return "";
}

}  // namespace

std::string ApplyJournal(PyObject* globals, const SplitCheckpoint& split,
                         std::vector<std::string>& restored, std::vector<std::string>& failed,
                         std::uint64_t& cells_run) {
  std::string error;
  if (split.has_delta) {
    error = ApplyDelta(globals, split, restored, failed, cells_run);
    if (!error.empty()) return error;  // the base stands, and nothing after the delta
  }
  const protocol::Bindings& journal = split.bindings;
  if (!journal.names.empty() &&
      !ReadOnlyCell::ApplyBindings(globals, journal.names, journal.values)) {
    error = "a value in the checkpoint's journal does not read back; the names after it keep "
            "their older values";
  } else {
    for (const std::string& name : journal.names) {
      if (std::find(restored.begin(), restored.end(), name) == restored.end()) restored.push_back(name);
      failed.erase(std::remove(failed.begin(), failed.end(), name), failed.end());
    }
  }
  if (split.frames > 0) cells_run = std::max(cells_run, journal.cells_run);
  return error;  // damage to the journal: the host splits it too, and says so
}

}  // namespace dolsot
