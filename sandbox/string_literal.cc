// A string literal read back as the text it denotes (see string_literal.h).
#include "sandbox/string_literal.h"

#include <string_view>

#include "sandbox/format_template.h"

namespace dolsot::sandbox {
namespace {

// Appends a plain string literal's decoded body; false (with `problem`) when
// it is an f-string or uses escapes the gate cannot decode.
bool AppendLiteral(TSNode string, const NodeText& text, const PythonGrammar& grammar,
                   std::string& decoded, std::string& problem) {
  std::string_view prefix;
  std::string body;
  uint32_t count = ts_node_child_count(string);
  for (uint32_t i = 0; i < count; ++i) {
    TSNode part = ts_node_child(string, i);
    NodeKind kind = grammar.KindOf(part);
    if (kind == NodeKind::kStringStart) prefix = text.Text(part);
    if (kind == NodeKind::kInterpolation) {
      problem = "an f-string template";
      return false;
    }
    if (kind == NodeKind::kStringContent) body += text.Text(part);
  }
  bool raw = prefix.find_first_of("rR") != std::string_view::npos;
  if (prefix.find_first_of("fF") != std::string_view::npos) {
    problem = "an f-string template";
    return false;
  }
  std::string out;
  if (!DecodeLiteralBody(body, raw, out)) {
    problem = "a template with \\N{...} escapes";
    return false;
  }
  decoded += out;
  return true;
}

}  // namespace

bool AppendStringLiteral(TSNode node, const NodeText& text, const PythonGrammar& grammar,
                         std::string& decoded, std::string& problem) {
  NodeKind kind = grammar.KindOf(node);
  if (kind == NodeKind::kString) return AppendLiteral(node, text, grammar, decoded, problem);
  if (kind != NodeKind::kConcatenatedString) return false;
  uint32_t count = ts_node_named_child_count(node);
  for (uint32_t i = 0; i < count; ++i) {
    if (!AppendLiteral(ts_node_named_child(node, i), text, grammar, decoded, problem)) return false;
  }
  return true;
}

}  // namespace dolsot::sandbox
