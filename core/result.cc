// Text composition for Result.
#include "core/result.h"

namespace dolsot {
namespace {

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += ", ";
    out += names[i];
  }
  return out;
}

void AppendBlock(std::string& out, const std::string& block) {
  if (block.empty()) return;
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += block;
}

}  // namespace

std::string Result::HeldBanner() const {
  return "session now holds: " + (held.empty() ? std::string("nothing") : JoinNames(held));
}

std::string Result::DroppedBanner() const {
  if (dropped.empty()) return "";
  return "not persisted (live in this session process only): " + JoinNames(dropped);
}

std::string Result::Text() const {
  std::string out = stdout_text;
  if (value) AppendBlock(out, *value);
  if (error) AppendBlock(out, *error);
  AppendBlock(out, DroppedBanner());
  AppendBlock(out, HeldBanner());
  return out;
}

}  // namespace dolsot
