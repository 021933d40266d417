// A tree's nodes read back from the cell's source: a node's text, and an
// identifier's name as CPython binds it (NFKC-folded, identifier.h).
#pragma once

#include <tree_sitter/api.h>

#include <string>
#include <string_view>

#include "sandbox/identifier.h"

namespace dolsot::sandbox {

class NodeText {
 public:
  // `code` is the source the tree was parsed from; it must outlive this.
  explicit NodeText(std::string_view code) : code_(code) {}

  std::string_view code() const { return code_; }

  std::string_view Text(TSNode node) const {
    uint32_t start = ts_node_start_byte(node), end = ts_node_end_byte(node);
    return code_.substr(start, end - start);
  }

  // The NFKC-folded name of an identifier node (valid until the next call).
  std::string_view Name(TSNode node) { return NormalizeIdentifier(Text(node), scratch_); }

 private:
  std::string_view code_;
  std::string scratch_;
};

}  // namespace dolsot::sandbox
