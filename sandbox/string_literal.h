// A string literal of the tree read back as the text it denotes, for the rules
// that read code inside strings (str.format templates, string annotations).
#pragma once

#include <tree_sitter/api.h>

#include <string>

#include "sandbox/node_text.h"
#include "sandbox/python_grammar.h"

namespace dolsot::sandbox {

// Appends the decoded body of a string literal (`node` a string, or every
// part of a concatenated string) to `decoded`. False when it is no string
// literal, or (with `problem` set) an f-string or one with escapes the gate
// cannot decode.
bool AppendStringLiteral(TSNode node, const NodeText& text, const PythonGrammar& grammar,
                         std::string& decoded, std::string& problem);

}  // namespace dolsot::sandbox
