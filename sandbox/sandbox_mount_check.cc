// What a Sandbox's mounts are refused for, asked before the worker starts
// (see sandbox_mount_check.h).
#include "sandbox/sandbox_mount_check.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/unique_fd.h"
#include "sandbox/sandbox_setup.h"

namespace dolsot {
namespace {

// kConfig with `message`, unless `status` says the host could not look
// (kIo, kUnavailable: the worker says what it finds when it starts).
Status Refusal(const Status& status, const std::string& message) {
  if (status.code() == ErrorCode::kIo || status.code() == ErrorCode::kUnavailable) {
    return Status::Ok();
  }
  return Status(ErrorCode::kConfig, message);
}

}  // namespace

Status FindWritableTrees(int root, const std::vector<MountOp>& plan,
                         const std::vector<std::string>& hidden, WritableTrees* out) {
  *out = WritableTrees{};
  WritableTrees found;
  for (int pass = 0; pass < 2; ++pass) {
    for (const MountOp& op : plan) {
      if (op.kind != MountOpKind::kBindReadWrite) continue;
      auto opened = OpenBindSource(root, op.source, *out, /*follow_symlinks=*/false);
      if (!opened.ok()) {
        return Status(opened.status().code(), "the read-write mount " + op.target + ": " +
                                                  opened.status().message());
      }
      if (pass == 0) {
        auto id = IdentityOf(opened->get());
        if (!id.ok()) return id.status();
        found.roots.push_back(*id);
        found.names.push_back(op.source);
      }
    }
    *out = found;
  }
  for (const std::string& path : hidden) {
    auto opened = OpenBindSource(root, path, *out);
    if (opened.ok() || opened.status().code() != ErrorCode::kPermission) continue;
    std::string tree;
    for (std::size_t i = 0; i < found.roots.size(); ++i) {
      if (PathUnder(NormalizePath(path), found.names[i])) tree = found.names[i];
    }
    return Status(ErrorCode::kInvalidArgument,
                  "a read-write mount" + (tree.empty() ? std::string() : " of " + tree) +
                      " holds '" + path + "', the session store's directory or the host's "
                      "working directory, which must stay outside the sandbox (a cell could "
                      "move it out from under what hides it); mount a directory that does not "
                      "hold it, or make the mount an overlay");
  }
  return Status::Ok();
}

std::vector<HiddenHostPath> ReplHiddenPaths(const std::string& cache_dir, const std::string& cwd,
                                            const std::string& store_dir) {
  std::vector<HiddenHostPath> hidden{
      {cache_dir,
       "dolsot's cache directory, which holds the sessions' checkpoints (DOLSOT_CACHE_DIR)",
       /*sealed=*/true}};
  if (!cwd.empty()) {
    hidden.push_back({cwd, "the working directory the worker runs in, which a sandbox never "
                           "shows; run from another directory to mount it"});
  }
  if (!store_dir.empty() && store_dir != cache_dir) {
    hidden.push_back({store_dir, "the session store's directory", /*sealed=*/true});
  }
  return hidden;
}

Status CheckSandboxMounts(const std::vector<SandboxMount>& mounts,
                          const std::vector<HiddenHostPath>& hidden) {
  DOLSOT_RETURN_IF_ERROR(CheckMountSources(mounts));
  MountPlanInputs inputs;
  inputs.system_paths = BaseSystemPaths();
  inputs.mounts = mounts;
  // What no hidden path has a part in (an overlay of a file, a read-write
  // mount over the system's paths), then one hidden path at a time, so the
  // message can say which it is.
  auto plain = PlanMounts(inputs, StatPathKind);
  if (!plain.ok()) return Status(ErrorCode::kConfig, "sandbox: " + plain.status().message());
  for (const HiddenHostPath& one : hidden) {
    if (NormalizePath(one.path).empty()) continue;
    inputs.hidden = {one.path};
    inputs.sealed.clear();
    if (one.sealed) inputs.sealed = {one.path};
    auto plan = PlanMounts(inputs, StatPathKind);
    if (!plan.ok()) {
      return Status(ErrorCode::kConfig, "sandbox: " + plan.status().message() + " ('" +
                                            one.path + "' is " + one.what + ")");
    }
  }
  inputs.hidden.clear();
  inputs.sealed.clear();
  for (const HiddenHostPath& one : hidden) {
    inputs.hidden.push_back(one.path);
    if (one.sealed) inputs.sealed.push_back(one.path);
  }
  auto plan = PlanMounts(inputs, StatPathKind);
  if (!plan.ok()) return Status(ErrorCode::kConfig, "sandbox: " + plan.status().message());
  // What only opening the paths tells: symlinks on a mount's host path,
  // and paths reached through a read-write mount by another name.
  UniqueFd root(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root) return Status::Ok();  // the worker reports it
  WritableTrees writable;
  Status trees = FindWritableTrees(root.get(), *plan, inputs.hidden, &writable);
  if (!trees.ok()) return Refusal(trees, "sandbox: " + trees.message());
  for (const MountOp& op : *plan) {
    if (!op.from_policy || op.kind == MountOpKind::kBindReadWrite) continue;
    auto opened = OpenBindSource(root.get(), op.source, writable, /*follow_symlinks=*/false);
    if (!opened.ok()) {
      return Refusal(opened.status(), "sandbox: mount " + op.target + ": " +
                                          opened.status().message());
    }
  }
  return Status::Ok();
}

}  // namespace dolsot
