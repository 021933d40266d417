// SandboxPolicy validation, --mount specs, and the report's encoding.
#include "sandbox/sandbox_policy.h"

#include <gtest/gtest.h>

namespace dolsot {
namespace {

TEST(SandboxPolicy, DefaultsAreValidAndWalledOff) {
  SandboxPolicy policy;
  EXPECT_TRUE(ValidateSandboxPolicy(policy).ok());
  EXPECT_FALSE(policy.network);
  EXPECT_FALSE(policy.best_effort);
  EXPECT_GT(policy.memory_mb, 0u);
  EXPECT_GT(policy.disk_mb, 0u);
}

TEST(SandboxPolicy, RefusesBadMounts) {
  struct Case {
    SandboxMount mount;
    const char* says;
  };
  for (const Case& c : {Case{{"data", "/srv/data", MountMode::kReadOnly}, "absolute"},
                        Case{{"/data", "srv", MountMode::kReadOnly}, "absolute"},
                        Case{{"/data/../etc", "/srv", MountMode::kReadOnly}, ".."},
                        Case{{"/data", "/srv/../etc", MountMode::kReadOnly}, ".."},
                        Case{{"/", "/srv", MountMode::kReadOnly}, "root"},
                        Case{{"/proc/x", "/srv", MountMode::kReadOnly}, "/proc"},
                        Case{{"/dev", "/srv", MountMode::kReadOnly}, "/dev"},
                        Case{{"/data", "/", MountMode::kReadWrite}, "whole filesystem"}}) {
    SandboxPolicy policy;
    policy.mounts = {c.mount};
    Status s = ValidateSandboxPolicy(policy);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << c.mount.virtual_path;
    EXPECT_NE(s.message().find(c.says), std::string::npos) << s.message();
  }
}

TEST(SandboxPolicy, NoMountIsTakenFromOrPlacedInsideAReadWriteMount) {
  // A cell can change what is inside a read-write mount on the host: a mount
  // taken from there could be redirected for every later worker start.
  const SandboxMount rw{"/out", "/srv/out", MountMode::kReadWrite};
  struct Case {
    SandboxMount other;
    const char* says;
  };
  for (const Case& c :
       {Case{{"/data", "/srv/out/data", MountMode::kReadOnly}, "lies inside the read-write mount /out"},
        Case{{"/data", "/srv//out/./data/", MountMode::kOverlay}, "lies inside the read-write mount /out"},
        Case{{"/deeper", "/srv/out/a/b", MountMode::kReadWrite}, "lies inside the read-write mount"},
        Case{{"/out/sub", "/srv/data", MountMode::kReadOnly}, "mount /out/sub lies inside the read-write mount /out"}}) {
    SandboxPolicy policy;
    for (bool rw_first : {true, false}) {
      policy.mounts = rw_first ? std::vector<SandboxMount>{rw, c.other}
                               : std::vector<SandboxMount>{c.other, rw};
      Status s = ValidateSandboxPolicy(policy);
      EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << c.other.host_path;
      EXPECT_NE(s.message().find(c.says), std::string::npos) << s.message();
    }
  }
  // Holding one is fine (what a read-only mount shows of it, a cell cannot
  // use to redirect a bind), and so are two views of one directory.
  SandboxPolicy policy;
  policy.mounts = {rw, {"/srv", "/srv", MountMode::kReadOnly}};
  EXPECT_TRUE(ValidateSandboxPolicy(policy).ok()) << ValidateSandboxPolicy(policy).message();
  policy.mounts = {rw, {"/again", "/srv/out", MountMode::kReadOnly}};
  EXPECT_TRUE(ValidateSandboxPolicy(policy).ok());
  policy.mounts = {rw, {"/outer", "/srv/outer", MountMode::kReadOnly}};
  EXPECT_TRUE(ValidateSandboxPolicy(policy).ok());
}

TEST(SandboxPolicy, OverlayIsAcceptedAndItsHostPathMustNotBreakTheOptionString) {
  SandboxPolicy policy;
  policy.mounts = {{"/data", "/srv/corpus", MountMode::kOverlay}};
  EXPECT_TRUE(ValidateSandboxPolicy(policy).ok());
  // ',' would end overlayfs's lowerdir option (",upperdir=..." could name a
  // host directory as the writable layer); ':' splits lower layers.
  for (const char* host : {"/srv/a,upperdir=/home", "/srv/a:/etc", "/srv/a\\,b"}) {
    policy.mounts = {{"/data", host, MountMode::kOverlay}};
    Status s = ValidateSandboxPolicy(policy);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << host;
    EXPECT_NE(s.message().find("overlay mount /data"), std::string::npos) << s.message();
  }
  // The same paths are fine for a bind (no option string).
  policy.mounts = {{"/data", "/srv/a,b:c", MountMode::kReadOnly}};
  EXPECT_TRUE(ValidateSandboxPolicy(policy).ok());
}

TEST(SandboxPolicy, ParsesOverlayMountSpecs) {
  auto spec = ParseMountSpec("/data=/srv/corpus:overlay");
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_EQ(*spec, (SandboxMount{"/data", "/srv/corpus", MountMode::kOverlay}));
  EXPECT_STREQ(MountModeName(MountMode::kOverlay), "overlay");
  EXPECT_EQ(*ParseMountMode("overlay"), MountMode::kOverlay);
  EXPECT_EQ(ParseMountMode("Overlay").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(ParseMountSpec("/data=/srv:overlayfs").status().code(), ErrorCode::kInvalidArgument);
}

TEST(SandboxPolicy, RefusesTwoMountsAtOnePathAndBadEnvAndCaps) {
  SandboxPolicy twice;
  twice.mounts = {{"/data", "/a", MountMode::kReadOnly}, {"/data/", "/b", MountMode::kReadOnly}};
  EXPECT_EQ(ValidateSandboxPolicy(twice).code(), ErrorCode::kInvalidArgument);
  SandboxPolicy env;
  env.env = {{"A=B", "x"}};
  EXPECT_EQ(ValidateSandboxPolicy(env).code(), ErrorCode::kInvalidArgument);
  SandboxPolicy memory;
  memory.memory_mb = 10;
  EXPECT_NE(ValidateSandboxPolicy(memory).message().find("memory_mb"), std::string::npos);
  SandboxPolicy none;
  none.memory_mb = none.processes = none.open_files = none.file_size_mb = none.disk_mb = 0;
  EXPECT_TRUE(ValidateSandboxPolicy(none).ok());
}

TEST(SandboxPolicy, ParsesMountSpecs) {
  auto ro = ParseMountSpec("/data=/srv/data");
  ASSERT_TRUE(ro.ok());
  EXPECT_EQ(*ro, (SandboxMount{"/data", "/srv/data", MountMode::kReadOnly}));
  auto rw = ParseMountSpec("/out=/tmp/out:read-write");
  ASSERT_TRUE(rw.ok());
  EXPECT_EQ(rw->mode, MountMode::kReadWrite);
  EXPECT_EQ(rw->host_path, "/tmp/out");
  EXPECT_EQ(ParseMountSpec("/out=/tmp/out:rw")->mode, MountMode::kReadWrite);
  EXPECT_FALSE(ParseMountSpec("/out").ok());
  EXPECT_FALSE(ParseMountSpec("=/x").ok());
  EXPECT_NE(ParseMountSpec("/a=/b:sideways").status().message().find("sideways"),
            std::string::npos);
}

TEST(SandboxReport, RoundTripsAndPrints) {
  SandboxReport report;
  report.layers = {{"seccomp", true, "31 calls refused"}, {"landlock", false, "ABI 0; boot it"}};
  auto back = SandboxReport::Decode(report.Encode());
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->layers, report.layers);
  EXPECT_TRUE(back->Active("seccomp"));
  EXPECT_FALSE(back->Active("landlock"));
  EXPECT_FALSE(back->Active("absent"));
  EXPECT_EQ(report.ToText(), "  [on ] seccomp: 31 calls refused\n  [off] landlock: ABI 0; boot it\n");
  EXPECT_FALSE(SandboxReport::Decode("no separators").ok());
}

}  // namespace
}  // namespace dolsot
