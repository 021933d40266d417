// Profile keys and request environments.
#include "cli/serve_profile.h"

#include <algorithm>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/base64.h"
#include "cli/serve_protocol.h"

namespace dolsot::cli {

std::string ProfileKey(const BackendSettings& settings, const std::string& cwd,
                       const std::vector<std::string>& env) {
  using Json = nlohmann::json;
  std::vector<std::string> sorted;
  sorted.reserve(env.size());
  for (const auto& entry : env) sorted.push_back(Base64Encode(entry));
  std::sort(sorted.begin(), sorted.end());
  Json toolboxes = Json::array();
  for (const auto& [alias, module] : settings.toolboxes) toolboxes.push_back({alias, module});
  Json key = Json::array();
  key.push_back(toolboxes);
  key.push_back(settings.gate);
  key.push_back(settings.max_repr ? Json(*settings.max_repr) : Json(nullptr));
  key.push_back(settings.max_text ? Json(*settings.max_text) : Json(nullptr));
  key.push_back(Base64Encode(cwd));
  key.push_back(sorted);
  // The Sandbox policy, canonical (serve_protocol.h): a sandboxed call never
  // shares workers with an unsandboxed one or with another policy's.
  key.push_back(EncodeSandboxPolicy(settings.sandbox));
  key.push_back(settings.accept_weaker_walls);
  return key.dump();
}

EnvLookup LookupIn(const std::vector<std::string>& env) {
  auto entries = std::make_shared<const std::vector<std::string>>(env);
  return [entries](const char* name) -> std::optional<std::string> {
    const std::size_t length = std::strlen(name);
    for (const auto& entry : *entries) {
      if (entry.size() > length && entry[length] == '=' && entry.compare(0, length, name) == 0) {
        return entry.substr(length + 1);
      }
    }
    return std::nullopt;
  };
}

}  // namespace dolsot::cli
