// LatestBindings (see latest_bindings.h).
#include "backend_subprocess/latest_bindings.h"

#include <utility>

namespace dolsot {

void LatestBindings::Merge(protocol::Bindings bindings) {
  cells_run_ = bindings.cells_run;
  for (std::size_t i = 0; i < bindings.names.size() && i < bindings.values.size(); ++i) {
    auto [kept, added] = values_.try_emplace(std::move(bindings.names[i]));
    if (added) {
      bytes_ += 8 + kept->first.size();
    } else {
      bytes_ -= kept->second.size();
    }
    bytes_ += bindings.values[i].size();
    kept->second = std::move(bindings.values[i]);
  }
}

void LatestBindings::Clear() {
  values_.clear();
  cells_run_ = 0;
  bytes_ = 0;
}

std::vector<std::string> LatestBindings::names() const {
  std::vector<std::string> out;
  out.reserve(values_.size());
  for (const auto& [name, value] : values_) out.push_back(name);
  return out;
}

protocol::Bindings LatestBindings::Copy() const {
  protocol::Bindings out;
  out.cells_run = cells_run_;
  for (const auto& [name, value] : values_) {
    out.names.push_back(name);
    out.values.push_back(value);
  }
  return out;
}

protocol::Bindings LatestBindings::Take() {
  protocol::Bindings out;
  out.cells_run = cells_run_;
  for (auto& [name, value] : values_) {
    out.names.push_back(name);
    out.values.push_back(std::move(value));
  }
  Clear();
  return out;
}

}  // namespace dolsot
