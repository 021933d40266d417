// Configuration: explicit argument > environment variable > default, and
// malformed values are errors naming the variable.
#include "core/config.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <map>

namespace dolsot {
namespace {

EnvLookup FakeEnv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(ConfigTest, DefaultsWhenNothingIsSet) {
  auto c = ResolveConfig({}, FakeEnv({}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->timeout_seconds, 20.0);
  EXPECT_EQ(c->ttl_days, 7);
  EXPECT_EQ(c->max_output, 100000u);
  EXPECT_EQ(c->max_repr, 4000u);
  EXPECT_EQ(c->max_text, 20000u);
  EXPECT_TRUE(c->typecheck);
  EXPECT_EQ(c->ty_bin, "ty");
  EXPECT_EQ(c->cache_dir, "/tmp/dolsot-" + std::to_string(getuid()) + "/sessions");
}

TEST(ConfigTest, EnvironmentBeatsDefault) {
  auto c = ResolveConfig({}, FakeEnv({{"DOLSOT_TIMEOUT", "2.5"},
                                      {"DOLSOT_SESSION_TTL_DAYS", "0"},
                                      {"DOLSOT_MAX_OUTPUT", "0"},
                                      {"DOLSOT_MAX_REPR", "123"},
                                      {"DOLSOT_MAX_TEXT", "0"},
                                      {"DOLSOT_TYPECHECK", "0"},
                                      {"DOLSOT_TY_BIN", "/opt/ty"},
                                      {"DOLSOT_CACHE_DIR", "/var/cache/d"}}));
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->timeout_seconds, 2.5);
  EXPECT_EQ(c->ttl_days, 0);
  EXPECT_EQ(c->max_output, 0u);
  EXPECT_EQ(c->max_repr, 123u);
  EXPECT_EQ(c->max_text, 0u);
  EXPECT_FALSE(c->typecheck);
  EXPECT_EQ(c->ty_bin, "/opt/ty");
  EXPECT_EQ(c->cache_dir, "/var/cache/d");
}

TEST(ConfigTest, ExplicitArgumentBeatsEnvironment) {
  ConfigOverrides o;
  o.timeout_seconds = 1;
  o.ttl_days = 3;
  o.max_output = 10;
  o.max_repr = 11;
  o.max_text = 12;
  o.typecheck = true;
  o.cache_dir = "/x";
  auto c = ResolveConfig(o, FakeEnv({{"DOLSOT_TIMEOUT", "9"},
                                     {"DOLSOT_SESSION_TTL_DAYS", "9"},
                                     {"DOLSOT_MAX_OUTPUT", "9"},
                                     {"DOLSOT_MAX_REPR", "9"},
                                     {"DOLSOT_MAX_TEXT", "9"},
                                     {"DOLSOT_TYPECHECK", "0"},
                                     {"DOLSOT_CACHE_DIR", "/y"}}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->timeout_seconds, 1);
  EXPECT_EQ(c->ttl_days, 3);
  EXPECT_EQ(c->max_output, 10u);
  EXPECT_EQ(c->max_repr, 11u);
  EXPECT_EQ(c->max_text, 12u);
  EXPECT_TRUE(c->typecheck);
  EXPECT_EQ(c->cache_dir, "/x");
}

TEST(ConfigTest, ExplicitArgumentWinsEvenOverMalformedEnvironment) {
  ConfigOverrides o;
  o.timeout_seconds = 4;
  auto c = ResolveConfig(o, FakeEnv({{"DOLSOT_TIMEOUT", "abc"}}));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->timeout_seconds, 4);
}

struct BadValue {
  const char* name;
  const char* value;
};

class ConfigBadValueTest : public ::testing::TestWithParam<BadValue> {};

TEST_P(ConfigBadValueTest, IsAnErrorNamingTheVariable) {
  auto c = ResolveConfig({}, FakeEnv({{GetParam().name, GetParam().value}}));
  ASSERT_FALSE(c.ok()) << GetParam().name << "=" << GetParam().value;
  EXPECT_EQ(c.status().code(), ErrorCode::kConfig);
  EXPECT_NE(c.status().message().find(GetParam().name), std::string::npos)
      << c.status().message();
}

INSTANTIATE_TEST_SUITE_P(
    Malformed, ConfigBadValueTest,
    ::testing::Values(BadValue{"DOLSOT_TIMEOUT", "abc"}, BadValue{"DOLSOT_TIMEOUT", "-1"},
                      BadValue{"DOLSOT_TIMEOUT", "0"}, BadValue{"DOLSOT_TIMEOUT", "nan"},
                      BadValue{"DOLSOT_TIMEOUT", "inf"}, BadValue{"DOLSOT_TIMEOUT", ""},
                      BadValue{"DOLSOT_TIMEOUT", "5s"},
                      BadValue{"DOLSOT_SESSION_TTL_DAYS", "-1"},
                      BadValue{"DOLSOT_SESSION_TTL_DAYS", "1.5"},
                      BadValue{"DOLSOT_SESSION_TTL_DAYS", "week"},
                      BadValue{"DOLSOT_MAX_OUTPUT", "-5"}, BadValue{"DOLSOT_MAX_OUTPUT", "lots"},
                      BadValue{"DOLSOT_MAX_REPR", "-1"}, BadValue{"DOLSOT_MAX_REPR", "4k"},
                      BadValue{"DOLSOT_MAX_TEXT", "-1"}, BadValue{"DOLSOT_MAX_TEXT", ""},
                      BadValue{"DOLSOT_TYPECHECK", "maybe"}, BadValue{"DOLSOT_TY_BIN", ""}));

TEST(ConfigTest, ExplicitBadValuesAreErrorsToo) {
  ConfigOverrides o;
  o.timeout_seconds = -3;
  EXPECT_EQ(ResolveConfig(o, FakeEnv({})).status().code(), ErrorCode::kConfig);
  ConfigOverrides t;
  t.ttl_days = -1;
  EXPECT_EQ(ResolveConfig(t, FakeEnv({})).status().code(), ErrorCode::kConfig);
}

TEST(ConfigTest, DefaultCacheDirFollowsTmpdir) {
  EXPECT_EQ(DefaultCacheDir(FakeEnv({{"TMPDIR", "/scratch/"}})),
            "/scratch/dolsot-" + std::to_string(getuid()) + "/sessions");
  // A relative TMPDIR is ignored rather than trusted.
  EXPECT_EQ(DefaultCacheDir(FakeEnv({{"TMPDIR", "rel"}})),
            "/tmp/dolsot-" + std::to_string(getuid()) + "/sessions");
}

}  // namespace
}  // namespace dolsot
