// Pre-parse checks of a cell's bytes, and byte offset -> line/column helpers.
#include "sandbox/source_text.h"

#include <algorithm>
#include <cctype>

namespace dolsot::sandbox {
namespace {


// PEP 263: `# ... coding[:=] <name>` in line 1 or 2. CPython ignores it when it
// compiles a str, honours it for bytes: any encoding but UTF-8 is rejected.
std::optional<Finding> CheckCodingCookie(std::string_view code) {
  std::size_t line_start = 0;
  for (int line = 0; line < 2 && line_start <= code.size(); ++line) {
    std::size_t end = code.find('\n', line_start);
    if (end == std::string_view::npos) end = code.size();
    std::string_view text = code.substr(line_start, end - line_start);
    std::size_t hash = text.find_first_not_of(" \t\f");
    if (hash != std::string_view::npos && text[hash] == '#') {
      std::size_t at = text.find("coding", hash);
      if (at != std::string_view::npos && at + 6 < text.size() &&
          (text[at + 6] == ':' || text[at + 6] == '=')) {
        std::size_t name_start = text.find_first_not_of(" \t", at + 7);
        std::string name;
        for (std::size_t i = name_start; i < text.size(); ++i) {
          char c = text[i];
          if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
            break;
          name += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        }
        std::replace(name.begin(), name.end(), '_', '-');
        if (name != "utf-8" && name != "utf8") {
          return FindingAt(code, Rule::kInvalidSource,
                           "coding cookie `" + name + "`: only UTF-8 source is accepted",
                           static_cast<std::uint32_t>(line_start + hash),
                           static_cast<std::uint32_t>(end));
        }
      }
    } else if (hash != std::string_view::npos) {
      break;  // a line of code: no cookie after it
    }
    line_start = end + 1;
  }
  return std::nullopt;
}

}  // namespace

std::optional<Finding> CheckSourceText(std::string_view code, const Policy& policy) {
  if (code.size() > policy.max_source_bytes) {
    return Finding{Rule::kSourceLimit,
                   "the cell has " + std::to_string(code.size()) + " bytes; the limit is " +
                       std::to_string(policy.max_source_bytes),
                   1, 1, 0, 0};
  }
  for (std::size_t i = 0; i < code.size();) {
    unsigned char c = static_cast<unsigned char>(code[i]);
    auto at = static_cast<std::uint32_t>(i);
    if (c == 0) {
      return FindingAt(code, Rule::kInvalidSource, "the cell contains a NUL byte", at, at + 1);
    }
    if (c == '\r' && (i + 1 >= code.size() || code[i + 1] != '\n')) {
      // CPython ends a line (and a comment) at a lone CR; tree-sitter does not.
      return FindingAt(code, Rule::kInvalidSource,
                       "a carriage return not followed by a newline", at, at + 1);
    }
    if (c < 0x80) {
      ++i;
      continue;
    }
    char32_t ignored;
    std::size_t length = DecodeUtf8(code, i, ignored);
    if (length == 0) {
      return FindingAt(code, Rule::kInvalidSource, "the cell is not valid UTF-8", at, at + 1);
    }
    i += length;
  }
  return CheckCodingCookie(code);
}

std::uint32_t CodePointColumn(std::string_view code, std::uint32_t byte,
                              std::uint32_t byte_column) {
  std::uint32_t start = byte >= byte_column ? byte - byte_column : 0;
  std::uint32_t end = std::min<std::uint32_t>(byte, static_cast<std::uint32_t>(code.size()));
  std::uint32_t column = 1;
  for (std::uint32_t i = start; i < end; ++i) {
    if (!IsUtf8ContinuationByte(static_cast<unsigned char>(code[i]))) ++column;
  }
  return column;
}

Finding FindingAt(std::string_view code, Rule rule, std::string message,
                  std::uint32_t start_byte, std::uint32_t end_byte) {
  std::uint32_t line = 1;
  std::uint32_t line_start = 0;
  for (std::uint32_t i = 0; i < start_byte && i < code.size(); ++i) {
    if (code[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  Finding finding{rule, std::move(message), line, 1, start_byte, end_byte};
  finding.column = CodePointColumn(code, start_byte, start_byte - line_start);
  return finding;
}

}  // namespace dolsot::sandbox
