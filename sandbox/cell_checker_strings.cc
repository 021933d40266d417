// The gate's reading of code inside strings (see cell_checker.h): the fields
// of a str.format template, and string annotations, which typing evaluates.
#include "sandbox/cell_checker.h"

#include "core/python_chars.h"
#include "sandbox/format_template.h"
#include "sandbox/rules.h"
#include "sandbox/string_literal.h"

namespace dolsot::sandbox {
namespace {

// `a.b.c` of ASCII identifiers: what a string annotation may hold.
bool IsDottedIdentifierChain(std::string_view text) {
  if (text.empty()) return false;
  bool start = true;
  for (char c : text) {
    if (c == '.') {
      if (start) return false;
      start = true;
    } else if (IsAsciiNameStart(c) || (!start && IsAsciiDigit(c))) {
      start = false;
    } else {
      return false;
    }
  }
  return !start;
}

}  // namespace

// A string in an annotation is code that typing evaluates later (typing's
// ForwardRef): only a dotted name, checked like one, is allowed.
void CellChecker::CheckStringAnnotation(TSNode string) {
  std::string decoded, problem;
  bool readable = AppendStringLiteral(string, text_, grammar_, decoded, problem);
  bool ok = readable && IsDottedIdentifierChain(decoded);
  if (ok) {
    std::size_t dot = decoded.find('.');
    std::string first = decoded.substr(0, dot);
    ok = !IsAlwaysDeniedName(first) && !policy_.denied_names.contains(first) &&
         !(IsDunder(first) && !policy_.allowed_dunders.contains(first));
    while (ok && dot != std::string::npos) {
      std::size_t next = decoded.find('.', dot + 1);
      ok = !AttributeVerdict(decoded.substr(dot + 1, next - dot - 1));
      dot = next;
    }
  }
  if (!ok) {
    Report(Rule::kConstructDenied, string,
           "a string annotation is code that typing evaluates later: write the annotation "
           "unquoted (`from __future__ import annotations` for forward references)");
  }
}

// str.format / format_map read attributes named inside the template; only a
// literal template the gate can read is accepted, and its fields are checked.
void CellChecker::CheckFormatReceiver(TSNode attribute, TSNode receiver) {
  std::string decoded;
  std::string problem = "a template that is not a string literal (use an f-string)";
  if (!AppendStringLiteral(receiver, text_, grammar_, decoded, problem)) {
    // Read in place (`o.format == "png"`, `print(o.format)`), the attribute
    // is data: only calling it, or keeping it to call later, uses a template.
    std::string message = "`.format` on " + problem + ": an attribute named `format` may be "
                          "read in place only (compared with literals, tested, shown, "
                          "`str(o.format)`), never called or kept";
    Use use = ClassifyUse(attribute, grammar_, false);
    if (!InPlaceOnly(use, attribute, Rule::kFormatString, message)) {
      Report(Rule::kFormatString, attribute, std::move(message));
    }
    return;
  }
  for (const std::string& name : FormatFieldAttributes(decoded)) {
    if (auto verdict = AttributeVerdict(name)) {
      Report(verdict->first, receiver,
             "format field attribute `" + name + "` " + std::string(verdict->second));
    }
  }
}

}  // namespace dolsot::sandbox
