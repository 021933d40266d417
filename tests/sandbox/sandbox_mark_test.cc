// The sandbox mark a checkpoint carries: it round-trips any policy (but
// env), refuses malformed text, and says exactly which walls are weaker.
#include "sandbox/sandbox_mark.h"

#include <gtest/gtest.h>

namespace dolsot {
namespace {

SandboxPolicy WithMounts() {
  SandboxPolicy policy;
  policy.mounts = {{"/data", "/srv/da:ta,1\n", MountMode::kReadOnly},
                   {"/out", "/srv/out", MountMode::kOverlay}};
  policy.memory_mb = 1024;
  policy.cpu_seconds = 30;
  return policy;
}

TEST(SandboxMark, RoundTripsEveryFieldButEnv) {
  SandboxPolicy policy = WithMounts();
  policy.network = true;
  policy.best_effort = true;
  policy.env = {{"A", "b"}};
  auto back = DecodeSandboxMark(EncodeSandboxMark(policy));
  ASSERT_TRUE(back.ok()) << back.status().message();
  policy.env.clear();
  EXPECT_EQ(*back, policy);
}

TEST(SandboxMark, MalformedMarksAreCorrupt) {
  const std::string good = EncodeSandboxMark(WithMounts());
  for (const std::string& bad :
       {std::string(), std::string("junk"), good.substr(0, good.size() - 1), good + "x",
        std::string("21:dolsot-sandbox-mark-2")}) {
    auto decoded = DecodeSandboxMark(bad);
    ASSERT_FALSE(decoded.ok()) << bad;
    EXPECT_EQ(decoded.status().code(), ErrorCode::kCorrupt);
  }
}

TEST(SandboxMark, TheSameOrStrongerWallsAreNotWeaker) {
  const SandboxPolicy mark = WithMounts();
  EXPECT_EQ(WeakerThanMark(mark, mark), "");
  SandboxPolicy stronger = mark;
  stronger.memory_mb = 512;
  stronger.mounts = {{"/data", "/srv/da:ta,1\n", MountMode::kReadOnly}};  // fewer
  stronger.mounts.push_back({"/out", "/srv/out", MountMode::kReadOnly});  // stricter
  EXPECT_EQ(WeakerThanMark(stronger, mark), "");
  // Spelled differently, the same paths.
  SandboxPolicy spelled = mark;
  spelled.mounts[1].virtual_path = "/out/";
  spelled.mounts[1].host_path = "/srv//out";
  EXPECT_EQ(WeakerThanMark(spelled, mark), "");
}

TEST(SandboxMark, EachWeakerWallIsNamed) {
  const SandboxPolicy mark = WithMounts();
  EXPECT_EQ(WeakerThanMark(std::nullopt, mark), "no Sandbox");
  struct Case {
    void (*change)(SandboxPolicy&);
    const char* says;
  };
  for (const Case& c : {
           Case{[](SandboxPolicy& p) { p.network = true; }, "network=True"},
           Case{[](SandboxPolicy& p) { p.best_effort = true; }, "best_effort=True"},
           Case{[](SandboxPolicy& p) { p.memory_mb = 2048; }, "memory_mb=2048 (the session's was 1024)"},
           Case{[](SandboxPolicy& p) { p.cpu_seconds = 0; }, "cpu_seconds=none (the session's was 30)"},
           Case{[](SandboxPolicy& p) { p.mounts[1].mode = MountMode::kReadWrite; },
                "the mount /out read-write (the session's was overlay)"},
           Case{[](SandboxPolicy& p) { p.mounts.push_back({"/x", "/srv/x", MountMode::kReadOnly}); },
                "the mount /x = /srv/x"},
           Case{[](SandboxPolicy& p) { p.mounts[0].host_path = "/srv/other"; }, "the mount /data"},
       }) {
    SandboxPolicy have = mark;
    c.change(have);
    const std::string weaker = WeakerThanMark(have, mark);
    EXPECT_NE(weaker.find(c.says), std::string::npos) << weaker;
  }
  // A cap the session did not have is no weaker whatever this one is.
  SandboxPolicy uncapped = mark;
  uncapped.cpu_seconds = 0;
  SandboxPolicy have = mark;
  have.cpu_seconds = 0;
  EXPECT_EQ(WeakerThanMark(have, uncapped), "");
}

TEST(SandboxMark, TheCarriedMarkIsTheWeakestThatStillHolds) {
  const SandboxPolicy mark = WithMounts();
  SandboxPolicy stricter = mark;
  stricter.memory_mb = 256;
  // A stricter Repl keeps the session's own mark: it is no stricter to load.
  EXPECT_EQ(CarriedMark(stricter, mark), std::optional<SandboxPolicy>(mark));
  // Taken across to weaker walls (by the user's choice): those walls.
  SandboxPolicy weaker = mark;
  weaker.network = true;
  EXPECT_EQ(CarriedMark(weaker, mark), std::optional<SandboxPolicy>(weaker));
  EXPECT_EQ(CarriedMark(std::nullopt, mark), std::nullopt);
  // A session that had none gets this Repl's.
  EXPECT_EQ(CarriedMark(mark, std::nullopt), std::optional<SandboxPolicy>(mark));
}

}  // namespace
}  // namespace dolsot
