// GateMemory: what the AST gate remembers of a session's earlier cells, so a
// later cell is checked against the classes they sealed (docs/gate.md, "The
// gate's memory"). Host-side state: it never enters the session's namespace,
// travels in the checkpoint's metadata (docs/checkpoint-format.md), is copied
// by branch() and forgotten by reset().
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>

#include "core/status.h"

namespace dolsot {

struct GateMemory {
  using Names = std::set<std::string, std::less<>>;
  // Names of sealed classes (a class whose plain methods read `self._x`, and
  // every class deriving from one). Once sealed, a name stays sealed for the
  // session, whatever it is bound to later.
  Names sealed_classes;
  // Names of the plain methods that read `self._x` (any sealed class).
  Names sealed_methods;
  // False when the session's earlier cells are not all known (restored from a
  // checkpoint written before the gate remembered): the gate then refuses
  // `self._x` in plain methods for the whole session.
  bool complete = true;

  bool empty() const { return sealed_classes.empty() && sealed_methods.empty(); }
  // Adds `other`'s names; incomplete if either is.
  void Merge(const GateMemory& other);
  bool operator==(const GateMemory&) const = default;

  // The bytes kept in a checkpoint's gate-memory entry, and back. Decode
  // refuses (kCorrupt, saying what) anything Encode would not write.
  std::string Encode() const;
  static StatusOr<GateMemory> Decode(std::string_view bytes);
};

// One session's memory, shared between the thread that runs its cells and the
// one that saves its checkpoints. Thread-safe.
class SessionGateMemory {
 public:
  GateMemory Get() const;
  void Set(GateMemory memory);
  void Learn(const GateMemory& learned);

 private:
  mutable std::mutex mutex_;
  GateMemory memory_;
};

}  // namespace dolsot
