// The `initialize` params that hand ty its interpreter and search paths, and
// the server key (see ty_settings.h).
#include "typecheck/ty_settings.h"

#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "typecheck/file_uri.h"

namespace dolsot::typecheck {
namespace {

using nlohmann::json;
namespace fs = std::filesystem;

// A file every Linux system has and that reads as an empty ty.toml.
constexpr const char* kEmptyConfigurationFile = "/dev/null";

// A directory of the interpreter's own standard library.
bool IsStdlibDir(const fs::path& dir) {
  std::error_code ec;
  return dir.filename() == "lib-dynload" || fs::exists(dir / "typing.py", ec) ||
         fs::exists(dir / "os.py", ec);
}

}  // namespace

std::vector<std::string> SearchDirs(const TypeCheckRequest& request) {
  std::vector<std::string> out;
  std::set<std::string> seen;
  for (const std::string& entry : request.python_path) {
    std::error_code ec;
    fs::path dir = fs::absolute(entry.empty() ? "." : entry, ec);
    if (ec || !fs::is_directory(dir, ec) || IsStdlibDir(dir)) continue;
    std::string text = dir.lexically_normal().string();
    if (text.size() > 1 && text.back() == '/') text.pop_back();
    if (seen.insert(text).second) out.push_back(text);
  }
  return out;
}

json InitializeParams(const std::string& workspace, pid_t host_pid,
                      const TypeCheckRequest& request) {
  json environment = {{"extra-paths", SearchDirs(request)}};
  if (!request.python_executable.empty()) environment["python"] = request.python_executable;
  std::string root = FileUri(workspace);
  return {
      {"processId", host_pid},
      {"rootUri", root},
      {"workspaceFolders", json::array({{{"uri", root}, {"name", "dolsot"}}})},
      {"capabilities",
       {{"general", {{"positionEncodings", {"utf-32", "utf-16"}}}},
        {"textDocument",
         {{"diagnostic", json::object()},
          {"publishDiagnostics", {{"relatedInformation", true}}}}}}},
      {"initializationOptions",
       {{"configurationFile", kEmptyConfigurationFile},
        {"configuration", {{"environment", environment}}}}},
  };
}

std::string ServerKey(const std::string& ty, const TypeCheckRequest& request) {
  // Each part length-prefixed, so no two lists of paths give one key.
  std::string key;
  auto add = [&key](const std::string& part) { key += std::to_string(part.size()) + ':' + part; };
  add(ty);
  add(request.python_executable);
  for (const std::string& entry : request.python_path) add(entry);
  return key;
}

}  // namespace dolsot::typecheck
