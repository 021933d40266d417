// TyServer: one warm `ty server` per host process, spoken to over LSP with
// pull diagnostics (see ty_server.h).
#include "typecheck/ty_server.h"

#include <unistd.h>

#include <mutex>
#include <optional>

#include <nlohmann/json.hpp>

#include "core/config.h"
#include "typecheck/cell_source.h"
#include "typecheck/diagnostic_filter.h"
#include "typecheck/file_uri.h"
#include "typecheck/lsp_connection.h"
#include "typecheck/toolbox_reach.h"
#include "typecheck/ty_process.h"
#include "typecheck/ty_settings.h"

namespace dolsot {
namespace {

using nlohmann::json;
using typecheck::Deadline;

constexpr const char* kCellFile = "/cell.py";  // in the workspace; never written to disk

TypeCheckOutcome FailOpen(std::string note) {
  TypeCheckOutcome out;
  out.note = std::move(note);
  return out;
}

Deadline EffectiveDeadline(Deadline deadline) {
  if (deadline != Deadline{}) return deadline;
  return std::chrono::steady_clock::now() +
         std::chrono::milliseconds(static_cast<long long>(kDefaultTimeoutSeconds * 1000));
}

// The cases where ty is not asked at all; nullopt when it should be.
std::optional<TypeCheckOutcome> SkipReason(const TypeCheckRequest& request, Deadline deadline) {
  if (request.toolboxes.empty()) return FailOpen("no toolbox to check against");
  if (typecheck::CannotReachAToolbox(request)) {
    return FailOpen("the cell cannot reach a toolbox; not checked");
  }
  if (std::chrono::steady_clock::now() >= deadline) {
    return FailOpen("the cell's deadline passed before ty ran");
  }
  return std::nullopt;
}

}  // namespace

struct TyServer::Impl {
  std::timed_mutex mutex;
  pid_t owner = getpid();  // the process whose server `process` is
  // The running server (process == nullptr: none).
  std::unique_ptr<typecheck::TyProcess> process;
  std::unique_ptr<typecheck::LspConnection> connection;
  std::string key;       // ServerKey of the running server
  std::string cell_path;
  std::string cell_uri;
  int version = 0;       // of the cell document; 0: not opened yet
  // Launch()ed: the id of the unanswered `initialize`; -1 when it could not
  // even be sent (the next FinishInitialize fails).
  long pending_initialize = 0;

  ~Impl() {
    AdoptAfterFork();
    Stop();
  }

  // In a process forked from the owner, leaves the inherited server to its
  // creator (only this copy of its channel is closed), and makes this
  // process the owner of whatever starts next.
  void AdoptAfterFork() {
    if (getpid() == owner) return;
    connection.reset();
    if (process) process->Disown();
    Stop();
    owner = getpid();
  }

  void Stop() {
    connection.reset();  // ty sees EOF
    process.reset();     // kills its process group, reaps, removes the workspace
    key.clear();
    version = 0;
    pending_initialize = 0;
  }

  bool Fits(const std::string& ty, const TypeCheckRequest& request) const {
    return process != nullptr && key == typecheck::ServerKey(ty, request);
  }

  // Spawns the server and sends `initialize`, without waiting for its answer.
  Status Launch(const std::string& ty, const TypeCheckRequest& request, Deadline deadline) {
    Stop();
    auto spawned = typecheck::TyProcess::Spawn(ty);
    if (!spawned.ok()) return spawned.status();
    process = std::move(*spawned);
    connection = std::make_unique<typecheck::LspConnection>(process->TakeChannel());
    cell_path = process->workspace() + kCellFile;
    cell_uri = typecheck::FileUri(cell_path);
    key = typecheck::ServerKey(ty, request);
    StatusOr<long> id = connection->Request(
        "initialize", typecheck::InitializeParams(process->workspace(), owner, request), deadline);
    pending_initialize = id.ok() ? *id : -1;
    return id.status();
  }

  // Waits for the answer to `initialize` and completes the handshake.
  Status FinishInitialize(Deadline deadline) {
    if (pending_initialize == 0) return Status::Ok();
    if (pending_initialize < 0) return Status(ErrorCode::kUnavailable, "ty server did not start");
    StatusOr<json> reply = connection->AwaitResult(pending_initialize, "initialize", deadline);
    if (!reply.ok()) return reply.status();
    pending_initialize = 0;
    return connection->Notify("initialized", json::object(), deadline);
  }

  // A server that fits `request`, initialized; a prefetched one that failed
  // is started once more.
  Status EnsureReady(const std::string& ty, const TypeCheckRequest& request, Deadline deadline) {
    if (Fits(ty, request) && FinishInitialize(deadline).ok()) return Status::Ok();
    DOLSOT_RETURN_IF_ERROR(Launch(ty, request, deadline));
    return FinishInitialize(deadline);
  }

  // Sends the new cell text and pulls its diagnostics: the report's items.
  StatusOr<json> Diagnose(const std::string& text, Deadline deadline) {
    Status sent =
        version == 0
            ? connection->Notify("textDocument/didOpen",
                                 {{"textDocument",
                                   {{"uri", cell_uri},
                                    {"languageId", "python"},
                                    {"version", 1},
                                    {"text", text}}}},
                                 deadline)
            : connection->Notify("textDocument/didChange",
                                 {{"textDocument", {{"uri", cell_uri}, {"version", version + 1}}},
                                  {"contentChanges", json::array({{{"text", text}}})}},
                                 deadline);
    DOLSOT_RETURN_IF_ERROR(sent);
    ++version;
    StatusOr<json> report = connection->Call(
        "textDocument/diagnostic", {{"textDocument", {{"uri", cell_uri}}}}, deadline);
    if (!report.ok()) return report.status();
    auto items = report->is_object() ? report->find("items") : report->end();
    if (items == report->end() || !items->is_array()) {
      return CorruptError("ty server's diagnostic report has no items");
    }
    return json(std::move(*items));
  }
};

TyServer::TyServer() : impl_(std::make_unique<Impl>()) {}
TyServer::~TyServer() = default;

TypeCheckOutcome TyServer::Check(const TypeCheckRequest& request) {
  Deadline deadline = EffectiveDeadline(request.deadline);
  if (auto skip = SkipReason(request, deadline)) return *skip;
  StatusOr<std::string> ty = typecheck::ResolveTyBinary(request.ty_bin, request.python_executable);
  if (!ty.ok()) return FailOpen(ty.status().message());
  std::unique_lock<std::timed_mutex> lock(impl_->mutex, std::defer_lock);
  if (!lock.try_lock_until(deadline)) {
    return FailOpen("ty server busy with other cells past this cell's deadline");
  }
  impl_->AdoptAfterFork();
  Status ready = impl_->EnsureReady(*ty, request, deadline);
  if (!ready.ok()) {
    impl_->Stop();
    return FailOpen("ty server: " + ready.message());
  }
  typecheck::CellSource source = typecheck::BuildCellSource(request);
  StatusOr<json> items = impl_->Diagnose(source.text, deadline);
  if (!items.ok()) {
    impl_->Stop();  // the next check starts a fresh server
    return FailOpen("ty server: " + items.status().message());
  }
  TypeCheckOutcome out;
  out.ran = true;
  out.diagnostics = typecheck::ToolboxDiagnostics(*items, request, source, impl_->cell_path);
  return out;
}

void TyServer::Prefetch(const TypeCheckRequest& request) {
  Deadline deadline = EffectiveDeadline(request.deadline);
  if (SkipReason(request, deadline)) return;
  StatusOr<std::string> ty = typecheck::ResolveTyBinary(request.ty_bin, request.python_executable);
  if (!ty.ok()) return;  // Check says why
  std::unique_lock<std::timed_mutex> lock(impl_->mutex, std::try_to_lock);
  if (!lock.owns_lock()) return;  // a check is running: it keeps the server warm
  impl_->AdoptAfterFork();
  if (impl_->Fits(*ty, request)) return;
  // A server that failed stays until the next Check, which starts it once more.
  (void)impl_->Launch(*ty, request, deadline);
}

}  // namespace dolsot
