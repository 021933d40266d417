// The type gate: before a cell runs, ty type-checks it against the toolboxes'
// own annotations. A call with wrong argument types or counts becomes a
// diagnostic with line and column, and the cell does not run. Fails open (no
// diagnostics, ran == false) when ty is missing.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace dolsot {

struct TypeDiagnostic {
  std::string rule;     // ty's rule name, e.g. "invalid-argument-type"
  std::string message;  // one line
  int line = 0;         // 1-based, in the cell
  int column = 0;       // 1-based
};

struct TypeCheckRequest {
  std::string_view code;
  std::map<std::string, std::string> toolboxes;  // alias -> module name
  std::vector<std::string> session_names;        // names earlier cells bound
  std::string ty_bin = "ty";
  std::vector<std::string> python_path;          // where toolbox modules are found
  std::string python_executable;                 // the interpreter ty resolves against
  std::chrono::steady_clock::time_point deadline;
};

struct TypeCheckOutcome {
  bool ran = false;  // false: ty missing or failed (the gate failed open)
  std::vector<TypeDiagnostic> diagnostics;
  std::string note;  // why it did not run, for logs
  // "type gate: line 3, col 5: ..." lines, for Result.error.
  std::string FormatError() const;
};

// Thread-safe. Never throws; an internal failure fails open with a note.
// Runs one `ty check` process per call (~25 ms of CPU: ty's cold start).
TypeCheckOutcome TypeCheckCell(const TypeCheckRequest& request);

// The same check through a warm `ty server` (LSP, pull diagnostics) that
// lives as long as this object: after the first cell, a check costs well
// under a millisecond of ty time instead of a cold start. Same request, same
// outcome, same fail-open rules; the server starts on first use and restarts
// when ty_bin, python_executable or python_path change, or after it failed
// (that call fails open). Called in another process than the one that
// created it (a fork), it runs TypeCheckCell instead. Thread-safe: one check
// at a time; waiting for the server counts against request.deadline.
// Non-copyable; the destructor kills ty's process group and reaps it (only
// in the process that started it: a forked copy leaves the server and its
// workspace to their owner).
class TyServer {
 public:
  TyServer();
  ~TyServer();
  TyServer(const TyServer&) = delete;
  TyServer& operator=(const TyServer&) = delete;

  TypeCheckOutcome Check(const TypeCheckRequest& request);
  // Starts the server Check(request) will need, without waiting for it, so
  // ty's start-up overlaps the caller's other work (a session restore); the
  // next Check finishes the handshake (and, if that fails, starts ty once
  // more). Does nothing when a check would be skipped, the right server is
  // already up, or a check is running. Never blocks on ty.
  void Prefetch(const TypeCheckRequest& request);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dolsot
