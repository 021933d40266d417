// SandboxReport's text for a person and its encoding for the worker's HELLO_OK.
#include "core/sandbox_report.h"

namespace dolsot {

bool SandboxReport::Active(std::string_view name) const {
  for (const SandboxLayer& layer : layers) {
    if (layer.name == name) return layer.active;
  }
  return false;
}

std::string SandboxReport::ToText() const {
  std::string out;
  for (const SandboxLayer& layer : layers) {
    out += std::string(layer.active ? "  [on ] " : "  [off] ") + layer.name;
    if (!layer.detail.empty()) out += ": " + layer.detail;
    out += "\n";
  }
  return out;
}

std::string SandboxReport::Encode() const {
  // name \x1f active \x1f detail \x1e ...: details are text we wrote.
  std::string out;
  for (const SandboxLayer& layer : layers) {
    out += layer.name + '\x1f' + (layer.active ? "1" : "0") + '\x1f' + layer.detail + '\x1e';
  }
  return out;
}

StatusOr<SandboxReport> SandboxReport::Decode(std::string_view text) {
  SandboxReport report;
  while (!text.empty()) {
    auto end = text.find('\x1e');
    if (end == std::string_view::npos) return CorruptError("malformed sandbox report");
    std::string_view item = text.substr(0, end);
    text.remove_prefix(end + 1);
    auto a = item.find('\x1f');
    auto b = a == std::string_view::npos ? a : item.find('\x1f', a + 1);
    if (b == std::string_view::npos) return CorruptError("malformed sandbox report");
    SandboxLayer layer;
    layer.name = std::string(item.substr(0, a));
    layer.active = item.substr(a + 1, b - a - 1) == "1";
    layer.detail = std::string(item.substr(b + 1));
    report.layers.push_back(std::move(layer));
  }
  return report;
}

}  // namespace dolsot
