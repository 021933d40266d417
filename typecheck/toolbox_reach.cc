// Whether a cell can reach a toolbox at all (see toolbox_reach.h).
#include "typecheck/toolbox_reach.h"

#include <string_view>

#include "core/python_chars.h"

namespace dolsot::typecheck {
namespace {

// sys.stdlib_module_names of the interpreter the project is built with (the
// one the worker embeds), comma-separated, written at configure time by
// typecheck/CMakeLists.txt. Empty: unknown, and no module counts as safe.
constexpr std::string_view kStdlibModuleNames =
#if __has_include("stdlib_module_names.inc")
#include "stdlib_module_names.inc"
#else
    ""
#endif
    ;

// Top-level names of typeshed's stub-only packages and of the directories
// ty reports stub paths under ("stdlib/builtins.pyi", "vendored://stdlib/").
constexpr std::string_view kStubNames[] = {"_typeshed", "typing_extensions", "mypy_extensions",
                                           "stdlib",    "vendored",          "typeshed"};

// True when `word` occurs in `code` as a whole name (not inside a longer one).
bool ContainsName(std::string_view code, std::string_view word) {
  for (std::size_t at = code.find(word); at != std::string_view::npos;
       at = code.find(word, at + 1)) {
    std::size_t end = at + word.size();
    bool left_ok = at == 0 || !IsAsciiNameChar(code[at - 1]);
    bool right_ok = end >= code.size() || !IsAsciiNameChar(code[end]);
    if (left_ok && right_ok) return true;
  }
  return false;
}

// True when the diagnostics of a builtin's stub could be tied to `module`
// (the gate ties a call to a toolbox by the path of its definition), or
// when the standard library's names are unknown.
bool MayShareAStdlibName(std::string_view module) {
  if (kStdlibModuleNames.empty()) return true;
  std::string_view top = module.substr(0, module.find('.'));
  for (std::string_view stub : kStubNames) {
    if (top == stub) return true;
  }
  std::string_view names = kStdlibModuleNames;
  while (true) {
    std::size_t comma = names.find(',');
    if (names.substr(0, comma) == top) return true;
    if (comma == std::string_view::npos) return false;
    names.remove_prefix(comma + 1);
  }
}

}  // namespace

bool CannotReachAToolbox(const TypeCheckRequest& request) {
  for (char c : request.code) {
    if (IsNonAsciiByte(c)) return false;
  }
  if (request.code.find("import") != std::string_view::npos) return false;
  for (const auto& [alias, module] : request.toolboxes) {
    if (ContainsName(request.code, alias) || MayShareAStdlibName(module)) return false;
  }
  return true;
}

}  // namespace dolsot::typecheck
