// The server's settings from the environment: a malformed DOLSOT_SERVE,
// DOLSOT_SERVE_IDLE or DOLSOT_SERVE_PROFILES is an error naming it, never
// the default nor a silent fall back to direct mode.
#include "cli/serve_settings.h"

#include <gtest/gtest.h>

#include <map>

namespace dolsot::cli {
namespace {

EnvLookup With(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(ServeEnabled, FlagsAndTheNoServeFlag) {
  EXPECT_EQ(ServeEnabled(With({}), false).value(), true);
  EXPECT_EQ(ServeEnabled(With({{"DOLSOT_SERVE", ""}}), false).value(), true);
  for (const char* on : {"1", "true", "YES", " on "}) {
    EXPECT_EQ(ServeEnabled(With({{"DOLSOT_SERVE", on}}), false).value(), true) << on;
  }
  for (const char* off : {"0", "false", "No", "off"}) {
    EXPECT_EQ(ServeEnabled(With({{"DOLSOT_SERVE", off}}), false).value(), false) << off;
  }
  EXPECT_EQ(ServeEnabled(With({{"DOLSOT_SERVE", "1"}}), true).value(), false);
  // --no-serve wins over a malformed value: nothing of the server is read.
  EXPECT_TRUE(ServeEnabled(With({{"DOLSOT_SERVE", "maybe"}}), true).ok());
}

TEST(ServeEnabled, AMalformedValueIsAConfigErrorNamingTheVariable) {
  struct Case {
    const char* name;
    const char* value;
  };
  for (const Case& c : {Case{"DOLSOT_SERVE", "maybe"}, Case{"DOLSOT_SERVE", "2"},
                        Case{"DOLSOT_SERVE_IDLE", "abc"}, Case{"DOLSOT_SERVE_IDLE", "-5"},
                        Case{"DOLSOT_SERVE_IDLE", "0"}, Case{"DOLSOT_SERVE_IDLE", "inf"},
                        Case{"DOLSOT_SERVE_PROFILES", "0"},
                        Case{"DOLSOT_SERVE_PROFILES", "many"}}) {
    auto enabled = ServeEnabled(With({{c.name, c.value}}), false);
    ASSERT_FALSE(enabled.ok()) << c.name << "=" << c.value;
    EXPECT_EQ(enabled.status().code(), ErrorCode::kConfig);
    EXPECT_NE(enabled.status().message().find(c.name), std::string::npos)
        << enabled.status().message();
    EXPECT_NE(enabled.status().message().find(c.value), std::string::npos)
        << enabled.status().message();
  }
  // Direct mode never starts a server: its settings are not its business.
  auto direct = ServeEnabled(With({{"DOLSOT_SERVE", "0"}, {"DOLSOT_SERVE_IDLE", "abc"}}), false);
  ASSERT_TRUE(direct.ok());
  EXPECT_FALSE(*direct);
}

TEST(ServeSettings, ValuesAndDefaults) {
  EXPECT_EQ(ServeIdleSeconds(With({})).value(), kDefaultServeIdleSeconds);
  EXPECT_EQ(ServeIdleSeconds(With({{"DOLSOT_SERVE_IDLE", "2.5"}})).value(), 2.5);
  EXPECT_EQ(ServeMaxProfiles(With({})).value(), kDefaultServeProfiles);
  EXPECT_EQ(ServeMaxProfiles(With({{"DOLSOT_SERVE_PROFILES", "3"}})).value(), 3);
}

}  // namespace
}  // namespace dolsot::cli
