// SandboxPolicyFromArgs: the flags, DOLSOT_SANDBOX from the environment it
// is given (the caller's, not the process's), and a policy the server got
// already resolved.
#include "cli/sandbox_options.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace dolsot::cli {
namespace {

EnvLookup With(std::optional<std::string> sandbox) {
  return [sandbox](const char* name) -> std::optional<std::string> {
    if (std::string(name) == "DOLSOT_SANDBOX") return sandbox;
    return std::nullopt;
  };
}

TEST(SandboxOptions, TheEnvironmentGivenDecidesNotTheProcesss) {
  ::setenv("DOLSOT_SANDBOX", "1", 1);  // the process's: not read when another is given
  SandboxArgs args;
  auto off = SandboxPolicyFromArgs(args, With(std::nullopt));
  ASSERT_TRUE(off.ok());
  EXPECT_FALSE(off->has_value());
  ::unsetenv("DOLSOT_SANDBOX");
  for (const char* on : {"1", "yes"}) {
    auto policy = SandboxPolicyFromArgs(args, With(on));
    ASSERT_TRUE(policy.ok());
    EXPECT_TRUE(policy->has_value()) << on;
  }
  auto zero = SandboxPolicyFromArgs(args, With("0"));
  ASSERT_TRUE(zero.ok());
  EXPECT_FALSE(zero->has_value());
  args.mounts = {"/d=/tmp:rw"};
  args.network = true;
  args.memory_mb = 64;
  auto flags = SandboxPolicyFromArgs(args, With("1"));
  ASSERT_TRUE(flags.ok()) << flags.status().ToString();
  ASSERT_TRUE(flags->has_value());
  EXPECT_TRUE((*flags)->network);
  EXPECT_EQ((*flags)->memory_mb, 64u);
  ASSERT_EQ((*flags)->mounts.size(), 1u);
  EXPECT_EQ((*flags)->mounts[0], (SandboxMount{"/d", "/tmp", MountMode::kReadWrite}));
  auto without = SandboxPolicyFromArgs(args, With(std::nullopt));
  ASSERT_FALSE(without.ok());
  EXPECT_NE(without.status().message().find("need --sandbox"), std::string::npos);
}

TEST(SandboxOptions, AMalformedDolsotSandboxIsAnErrorNamingIt) {
  SandboxArgs args;
  for (const char* bad : {"maybe", "2", "y", "enabled"}) {
    auto policy = SandboxPolicyFromArgs(args, With(bad));
    ASSERT_FALSE(policy.ok()) << bad;
    EXPECT_EQ(policy.status().code(), ErrorCode::kConfig) << bad;
    EXPECT_NE(policy.status().message().find("DOLSOT_SANDBOX"), std::string::npos);
    EXPECT_NE(policy.status().message().find(bad), std::string::npos);
  }
  for (const char* off : {"", "0", "false", "OFF", " no "}) {
    auto policy = SandboxPolicyFromArgs(args, With(off));
    ASSERT_TRUE(policy.ok()) << off;
    EXPECT_FALSE(policy->has_value()) << off;
  }
  auto on = SandboxPolicyFromArgs(args, With("True"));
  ASSERT_TRUE(on.ok());
  EXPECT_TRUE(on->has_value());
}

TEST(SandboxOptions, AResolvedPolicyIsTakenAsIsButStillValidated) {
  SandboxArgs args;
  args.resolved = true;
  args.policy = SandboxPolicy{};
  args.policy->memory_mb = 77;
  auto taken = SandboxPolicyFromArgs(args, With(std::nullopt));  // no flag, no variable
  ASSERT_TRUE(taken.ok());
  ASSERT_TRUE(taken->has_value());
  EXPECT_EQ((*taken)->memory_mb, 77u);
  args.policy.reset();
  auto none = SandboxPolicyFromArgs(args, With("1"));  // the caller had none: none
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  args.policy = SandboxPolicy{};
  args.policy->mounts = {{"/x", "relative", MountMode::kReadOnly}};
  auto bad = SandboxPolicyFromArgs(args, With(std::nullopt));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("absolute"), std::string::npos);
}

}  // namespace
}  // namespace dolsot::cli
