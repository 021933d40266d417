// The tree-sitter-python node kinds and field ids the gate looks at, resolved
// once from the grammar (symbol ids are grammar-version specific; names are not).
#pragma once

#include <tree_sitter/api.h>

#include <cstdint>
#include <vector>

namespace dolsot::sandbox {

enum class NodeKind : std::uint8_t {
  kOther,
  kIdentifier, kAttribute, kCall, kKeywordArgument, kSubscript,
  kImportStatement, kImportFromStatement, kFutureImportStatement, kAliasedImport,
  kDottedName, kRelativeImport, kWildcardImport,
  kAssignment, kAugmentedAssignment, kForStatement, kForInClause, kNamedExpression,
  kAsPattern, kFunctionDefinition, kClassDefinition, kLambda, kParameters,
  kLambdaParameters, kDefaultParameter, kTypedDefaultParameter, kTypedParameter,
  kDeleteStatement, kGlobalStatement, kNonlocalStatement, kTypeAliasStatement,
  kCaseClause, kCasePattern, kClassPattern, kKeywordPattern, kSplatPattern, kDictPattern,
  kString, kConcatenatedString, kStringStart, kStringContent, kInterpolation,
  kComment, kPrintStatement, kExecStatement,
  kType, kExceptGroupClause, kParenthesizedExpression,
  kExceptClause, kDecoratedDefinition, kDecorator, kModule, kBlock,
  kBinaryOperator, kTryStatement, kWithStatement, kYield, kAwait,
};

struct PythonGrammar {
  std::vector<NodeKind> kind_of_symbol;  // indexed by TSSymbol
  TSFieldId left = 0, right = 0, name = 0, alias = 0, value = 0, type = 0, object = 0,
            attribute = 0, parameters = 0, body = 0, module_name = 0, key = 0,
            superclasses = 0, type_parameters = 0, return_type = 0, guard = 0,
            function = 0, arguments = 0, definition = 0, op = 0, argument = 0;

  NodeKind KindOf(TSNode node) const {
    TSSymbol symbol = ts_node_symbol(node);
    return symbol < kind_of_symbol.size() ? kind_of_symbol[symbol] : NodeKind::kOther;
  }
};

// Built on first use (thread-safe); lives for the process.
const PythonGrammar& Grammar();

}  // namespace dolsot::sandbox
