// RAII owners for tree-sitter objects (tree-sitter's C API hands out owning raw
// pointers: ts_parser_new / ts_parser_parse_string return objects the caller
// must delete) and the tree-sitter-python grammar.
#pragma once

#include <tree_sitter/api.h>

#include <memory>

extern "C" const TSLanguage* tree_sitter_python(void);  // the grammar's entry point

namespace dolsot::sandbox {

struct ParserDeleter {
  void operator()(TSParser* parser) const { ts_parser_delete(parser); }
};
struct TreeDeleter {
  void operator()(TSTree* tree) const { ts_tree_delete(tree); }
};
// Owns a parser / a tree; a tree does not borrow from its parser or its source.
using ParserPtr = std::unique_ptr<TSParser, ParserDeleter>;
using TreePtr = std::unique_ptr<TSTree, TreeDeleter>;

// Owns a cursor; it borrows the tree its node belongs to (keep the tree alive).
class TreeCursor {
 public:
  explicit TreeCursor(TSNode node) : cursor_(ts_tree_cursor_new(node)) {}
  ~TreeCursor() { ts_tree_cursor_delete(&cursor_); }
  TreeCursor(const TreeCursor&) = delete;
  TreeCursor& operator=(const TreeCursor&) = delete;

  TSTreeCursor* get() { return &cursor_; }

 private:
  TSTreeCursor cursor_;
};

// The calling thread's parser, set to Python, created on first use and owned by
// the thread (a parser must not be shared between threads). Never null.
TSParser* ThreadPythonParser();

}  // namespace dolsot::sandbox
