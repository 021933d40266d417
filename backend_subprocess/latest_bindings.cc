// LatestBindings (see latest_bindings.h).
#include "backend_subprocess/latest_bindings.h"

#include <utility>

namespace dolsot {

void LatestBindings::Merge(protocol::Bindings bindings) {
  cells_run_ = bindings.cells_run;
  for (std::size_t i = 0; i < bindings.names.size() && i < bindings.values.size(); ++i) {
    auto [found, added] = index_.try_emplace(bindings.names[i], entries_.size());
    if (added) {
      bytes_ += 8 + bindings.names[i].size();
      entries_.emplace_back(std::move(bindings.names[i]), std::string());
    } else {
      bytes_ -= entries_[found->second].second.size();
    }
    bytes_ += bindings.values[i].size();
    entries_[found->second].second = std::move(bindings.values[i]);
  }
}

void LatestBindings::Clear() {
  entries_.clear();
  index_.clear();
  cells_run_ = 0;
  bytes_ = 0;
}

std::vector<std::string> LatestBindings::names() const {
  std::vector<std::string> out;
  out.reserve(entries_.size());
  for (const auto& [name, value] : entries_) out.push_back(name);
  return out;
}

protocol::Bindings LatestBindings::Copy() const {
  protocol::Bindings out;
  out.cells_run = cells_run_;
  for (const auto& [name, value] : entries_) {
    out.names.push_back(name);
    out.values.push_back(value);
  }
  return out;
}

protocol::Bindings LatestBindings::Take() {
  protocol::Bindings out;
  out.cells_run = cells_run_;
  for (auto& [name, value] : entries_) {
    out.names.push_back(std::move(name));
    out.values.push_back(std::move(value));
  }
  Clear();
  return out;
}

}  // namespace dolsot
