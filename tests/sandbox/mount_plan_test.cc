// PlanMounts against a fake filesystem: what is bound, hidden, and in what order.
#include "sandbox/mount_plan.h"

#include <gtest/gtest.h>

#include <map>

namespace dolsot {
namespace {

class FakeFs {
 public:
  FakeFs(std::map<std::string, PathKind> paths) : paths_(std::move(paths)) {}
  PathKind operator()(const std::string& p) const {
    auto it = paths_.find(p);
    return it == paths_.end() ? PathKind::kMissing : it->second;
  }

 private:
  std::map<std::string, PathKind> paths_;
};

constexpr PathKind D = PathKind::kDirectory;
constexpr PathKind F = PathKind::kFile;

std::vector<std::string> Targets(const std::vector<MountOp>& ops) {
  std::vector<std::string> out;
  for (const MountOp& op : ops) out.push_back(op.target);
  return out;
}

TEST(MountPlan, NormalizesPaths) {
  EXPECT_EQ(NormalizePath("/a//b/./c/"), "/a/b/c");
  EXPECT_EQ(NormalizePath("/"), "/");
  EXPECT_EQ(NormalizePath("a/b"), "");
  EXPECT_EQ(NormalizePath("/a/../b"), "");
  EXPECT_TRUE(PathUnder("/a/b", "/a"));
  EXPECT_FALSE(PathUnder("/ab", "/a"));
  EXPECT_TRUE(PathUnder("/a", "/"));
}

TEST(MountPlan, BindsPythonReadOnlyOnceAndSkipsMissingAndRelative) {
  FakeFs fs({{"/usr", D}, {"/usr/lib/python3.11", D}, {"/venv", D},
             {"/venv/lib/python3.11/site-packages", D}, {"/work/pkg", D}});
  MountPlanInputs in;
  in.system_paths = {"/usr", "/usr/lib/python3.11", "/venv", "/venv/lib/python3.11/site-packages",
                     "/work/pkg/", "", "relative", "/gone"};
  auto plan = PlanMounts(in, fs);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(Targets(*plan), (std::vector<std::string>{"/usr", "/venv", "/work/pkg"}));
  for (const MountOp& op : *plan) {
    EXPECT_EQ(op.kind, MountOpKind::kBindReadOnly);
    EXPECT_EQ(op.source, op.target);
  }
}

TEST(MountPlan, RefusesTheWholeFilesystem) {
  FakeFs fs({{"/", D}});
  MountPlanInputs in;
  in.system_paths = {"/usr", "//"};
  auto plan = PlanMounts(in, fs);
  EXPECT_EQ(plan.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(plan.status().message().find("whole filesystem"), std::string::npos);
}

TEST(MountPlan, HidesTheStoreAndTheCwdInsideABind) {
  FakeFs fs({{"/home/u", D}, {"/home/u/.cache/dolsot", D}, {"/home/u/proj", D},
             {"/home/u/proj/build/python", D}, {"/home/u/proj/tool.py", F}});
  MountPlanInputs in;
  // The host's cwd is on sys.path (never bound); a package inside it is;
  // a toolbox module in it is bound alone.
  in.system_paths = {"/home/u/proj", "/home/u/proj/build/python", "/home/u/proj/tool.py"};
  in.hidden = {"/home/u/.cache/dolsot", "/home/u/proj"};
  auto plan = PlanMounts(in, fs);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  EXPECT_EQ(Targets(*plan),
            (std::vector<std::string>{"/home/u/proj/tool.py", "/home/u/proj/build/python"}));
  EXPECT_TRUE((*plan)[0].is_file);

  // A sys.path entry holding both: bound, with both hidden, and what lies
  // inside the hidden cwd bound again on top.
  in.system_paths.push_back("/home/u");
  plan = PlanMounts(in, fs);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  // Parents first: the hide of the cwd before what is bound inside it.
  std::map<std::string, MountOpKind> kinds;
  std::map<std::string, std::size_t> at;
  for (std::size_t i = 0; i < plan->size(); ++i) {
    kinds[(*plan)[i].target] = (*plan)[i].kind;
    at[(*plan)[i].target] = i;
  }
  ASSERT_EQ(plan->size(), 5u);
  EXPECT_EQ(kinds["/home/u"], MountOpKind::kBindReadOnly);
  EXPECT_EQ(kinds["/home/u/proj"], MountOpKind::kHide);
  EXPECT_EQ(kinds["/home/u/.cache/dolsot"], MountOpKind::kHide);
  EXPECT_EQ(kinds["/home/u/proj/tool.py"], MountOpKind::kBindReadOnly);
  EXPECT_EQ(kinds["/home/u/proj/build/python"], MountOpKind::kBindReadOnly);
  EXPECT_EQ(at["/home/u"], 0u);
  EXPECT_LT(at["/home/u/proj"], at["/home/u/proj/tool.py"]);
  EXPECT_LT(at["/home/u/proj"], at["/home/u/proj/build/python"]);
}

TEST(MountPlan, PolicyMountsExistAndNeverShowTheStore) {
  FakeFs fs({{"/srv/data", D}, {"/srv/data/cache", D}, {"/srv/out", D}});
  MountPlanInputs in;
  in.mounts = {{"/data", "/srv/data", MountMode::kReadOnly},
               {"/out", "/srv/out", MountMode::kReadWrite}};
  in.hidden = {"/srv/data/cache"};
  auto plan = PlanMounts(in, fs);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->size(), 3u);
  EXPECT_EQ((*plan)[0], (MountOp{MountOpKind::kBindReadOnly, "/srv/data", "/data", false, true}));
  EXPECT_EQ((*plan)[1], (MountOp{MountOpKind::kBindReadWrite, "/srv/out", "/out", false, true}));
  EXPECT_EQ((*plan)[2], (MountOp{MountOpKind::kHide, "", "/data/cache", false}));

  in.mounts = {{"/c", "/srv/data/cache", MountMode::kReadOnly}};
  EXPECT_NE(PlanMounts(in, fs).status().message().find("must stay outside"), std::string::npos);
  in.mounts = {{"/x", "/srv/missing", MountMode::kReadOnly}};
  EXPECT_NE(PlanMounts(in, fs).status().message().find("does not exist"), std::string::npos);
}

TEST(MountPlan, NothingInsideASealedPathIsMountedButInsideTheCwdIs) {
  FakeFs fs({{"/srv/cache", D}, {"/srv/cache/sessions", D}, {"/home/me/work", D},
             {"/home/me/work/data", D}});
  MountPlanInputs in;
  in.hidden = {"/srv/cache", "/home/me/work"};
  in.sealed = {"/srv/cache/"};  // normalized like the hidden ones
  for (MountMode mode : {MountMode::kReadOnly, MountMode::kReadWrite, MountMode::kOverlay}) {
    in.mounts = {{"/c", "/srv/cache/sessions", mode}};
    auto refused = PlanMounts(in, fs);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.status().message().find("would show part of '/srv/cache'"),
              std::string::npos) << refused.status().message();
  }
  // The cwd is hidden, not sealed: a directory under it mounts.
  in.mounts = {{"/data", "/home/me/work/data", MountMode::kReadOnly}};
  auto plan = PlanMounts(in, fs);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
}

TEST(MountPlan, OverlaysLayerADirectoryAndHideTheStoreInside) {
  FakeFs fs({{"/srv/corpus", D}, {"/srv/corpus/.cache", D}, {"/srv/corpus/a.txt", F},
             {"/srv/corpus/sub", D}});
  MountPlanInputs in;
  in.mounts = {{"/data/", "/srv//corpus", MountMode::kOverlay}};
  in.hidden = {"/srv/corpus/.cache"};
  auto plan = PlanMounts(in, fs);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->size(), 2u);
  EXPECT_EQ((*plan)[0], (MountOp{MountOpKind::kOverlay, "/srv/corpus", "/data", false, true}));
  // A hidden path inside the host directory is covered on top of the overlay.
  EXPECT_EQ((*plan)[1], (MountOp{MountOpKind::kHide, "", "/data/.cache", false}));

  // A system path bound inside an overlay's target comes after the overlay.
  in.hidden.clear();
  in.mounts = {{"/srv/corpus", "/srv/corpus", MountMode::kOverlay}};
  in.system_paths = {"/srv/corpus/sub"};
  plan = PlanMounts(in, fs);
  ASSERT_TRUE(plan.ok()) << plan.status().message();
  ASSERT_EQ(plan->size(), 2u);
  EXPECT_EQ((*plan)[0].kind, MountOpKind::kOverlay);
  EXPECT_EQ((*plan)[1], (MountOp{MountOpKind::kBindReadOnly, "/srv/corpus/sub", "/srv/corpus/sub",
                                 false}));

  // overlayfs layers directories: a file is refused, naming the mount.
  in.system_paths.clear();
  in.mounts = {{"/a.txt", "/srv/corpus/a.txt", MountMode::kOverlay}};
  Status file = PlanMounts(in, fs).status();
  EXPECT_EQ(file.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(file.message().find("overlay mount /a.txt"), std::string::npos) << file.message();
  in.mounts = {{"/x", "/srv/missing", MountMode::kOverlay}};
  EXPECT_NE(PlanMounts(in, fs).status().message().find("does not exist"), std::string::npos);
  in.mounts = {{"/c", "/srv/corpus/.cache", MountMode::kOverlay}};
  in.hidden = {"/srv/corpus/.cache"};
  EXPECT_NE(PlanMounts(in, fs).status().message().find("must stay outside"), std::string::npos);
}

}  // namespace
}  // namespace dolsot

namespace dolsot {
namespace {

TEST(MountPlan, NothingIsMountedInsideAReadWriteMount) {
  // A cell could put a symlink where the mount point would be: Python's own
  // paths, a hide, or a system path under a read-write mount's target are
  // refused, naming both.
  FakeFs fs({{"/srv/rw", D}, {"/srv/rw/site", D}, {"/srv/rw/.cache", D}, {"/opt/py", D},
             {"/opt/py/lib", D}});
  MountPlanInputs in;
  in.mounts = {{"/opt/py", "/srv/rw", MountMode::kReadWrite}};
  in.system_paths = {"/opt/py/lib"};
  Status inside = PlanMounts(in, fs).status();
  EXPECT_EQ(inside.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(inside.message().find("read-write mount /opt/py would hold /opt/py/lib"),
            std::string::npos) << inside.message();

  // The store's directory (or the host's cwd) inside a read-write mount.
  in.system_paths.clear();
  in.mounts = {{"/w", "/srv/rw", MountMode::kReadWrite}};
  in.hidden = {"/srv/rw/.cache"};
  Status hidden = PlanMounts(in, fs).status();
  EXPECT_EQ(hidden.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(hidden.message().find("must stay hidden"), std::string::npos) << hidden.message();

  // Read-only and overlay mounts may hold them (a cell cannot change those).
  for (MountMode mode : {MountMode::kReadOnly, MountMode::kOverlay}) {
    in.mounts = {{"/w", "/srv/rw", mode}};
    EXPECT_TRUE(PlanMounts(in, fs).ok()) << MountModeName(mode);
  }
}

}  // namespace
}  // namespace dolsot
