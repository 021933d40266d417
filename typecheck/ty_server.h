// The type gate: before a cell runs, a warm `ty server` (the Astral type
// checker, spoken to over LSP) checks it against the toolboxes' own
// annotations. A call with wrong argument types or counts, or an unknown
// toolbox attribute, becomes a diagnostic with line and column, and the cell
// does not run. Any trouble with ty fails open: no diagnostics, ran == false.
#pragma once

#include <memory>

#include "typecheck/type_check.h"

namespace dolsot {

// One `ty server` child per TyServer. After the first cell a check costs well
// under a millisecond of ty time instead of ty's cold start.
//
// Fail-open rules (the outcome has ran == false and a note): no toolbox; a
// cell that cannot reach a toolbox (typecheck/toolbox_reach.h: ty is not even
// started); ty_bin not found; the server fails to start, exits, answers
// garbage or not before request.deadline (then it is killed and the next
// check starts a fresh one).
//
// The server starts on first use, with the request's python_executable and
// python_path handed over in LSP initializationOptions (no config file is
// written), and restarts when ty_bin, python_executable or python_path
// change. It never reads a ty.toml or pyproject.toml around its workspace
// nor the user's own ty configuration, so no ambient file can weaken it.
//
// Processes: the server leads its own process group; the destructor kills
// the group and reaps it, and ty exits by itself on EOF if the host dies.
// Called in another process than the one that started the server (the host
// forked), Check and Prefetch start and own a server of their own in that
// process, lazily, instead of failing open: a forked host keeps its gate, at
// the price of one ty start. The inherited server stays its creator's: the
// copy never speaks to it, kills it or removes its workspace.
//
// Thread-safe: one check at a time (waiting counts against the deadline).
// Never throws. Non-copyable.
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
