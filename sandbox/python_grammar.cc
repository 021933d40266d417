// Resolves the grammar's symbol and field ids to the gate's NodeKind and fields.
#include "sandbox/python_grammar.h"

#include <cstring>
#include <string_view>
#include <utility>

#include "sandbox/tree_sitter_handles.h"

namespace dolsot::sandbox {
namespace {

constexpr std::pair<std::string_view, NodeKind> kNamedKinds[] = {
    {"identifier", NodeKind::kIdentifier},
    {"attribute", NodeKind::kAttribute},
    {"call", NodeKind::kCall},
    {"keyword_argument", NodeKind::kKeywordArgument},
    {"subscript", NodeKind::kSubscript},
    {"import_statement", NodeKind::kImportStatement},
    {"import_from_statement", NodeKind::kImportFromStatement},
    {"future_import_statement", NodeKind::kFutureImportStatement},
    {"aliased_import", NodeKind::kAliasedImport},
    {"dotted_name", NodeKind::kDottedName},
    {"relative_import", NodeKind::kRelativeImport},
    {"wildcard_import", NodeKind::kWildcardImport},
    {"assignment", NodeKind::kAssignment},
    {"augmented_assignment", NodeKind::kAugmentedAssignment},
    {"for_statement", NodeKind::kForStatement},
    {"for_in_clause", NodeKind::kForInClause},
    {"named_expression", NodeKind::kNamedExpression},
    {"as_pattern", NodeKind::kAsPattern},
    {"function_definition", NodeKind::kFunctionDefinition},
    {"class_definition", NodeKind::kClassDefinition},
    {"lambda", NodeKind::kLambda},
    {"parameters", NodeKind::kParameters},
    {"lambda_parameters", NodeKind::kLambdaParameters},
    {"default_parameter", NodeKind::kDefaultParameter},
    {"typed_default_parameter", NodeKind::kTypedDefaultParameter},
    {"typed_parameter", NodeKind::kTypedParameter},
    {"delete_statement", NodeKind::kDeleteStatement},
    {"global_statement", NodeKind::kGlobalStatement},
    {"nonlocal_statement", NodeKind::kNonlocalStatement},
    {"type_alias_statement", NodeKind::kTypeAliasStatement},
    {"case_clause", NodeKind::kCaseClause},
    {"case_pattern", NodeKind::kCasePattern},
    {"class_pattern", NodeKind::kClassPattern},
    {"keyword_pattern", NodeKind::kKeywordPattern},
    {"splat_pattern", NodeKind::kSplatPattern},
    {"dict_pattern", NodeKind::kDictPattern},
    {"string", NodeKind::kString},
    {"concatenated_string", NodeKind::kConcatenatedString},
    {"string_start", NodeKind::kStringStart},
    {"string_content", NodeKind::kStringContent},
    {"interpolation", NodeKind::kInterpolation},
    {"comment", NodeKind::kComment},
    {"print_statement", NodeKind::kPrintStatement},
    {"exec_statement", NodeKind::kExecStatement},
    {"type", NodeKind::kType},
    {"except_group_clause", NodeKind::kExceptGroupClause},
    {"parenthesized_expression", NodeKind::kParenthesizedExpression},
    {"except_clause", NodeKind::kExceptClause},
    {"decorated_definition", NodeKind::kDecoratedDefinition},
    {"decorator", NodeKind::kDecorator},
    {"module", NodeKind::kModule},
    {"block", NodeKind::kBlock},
    {"binary_operator", NodeKind::kBinaryOperator},
    {"try_statement", NodeKind::kTryStatement},
    {"with_statement", NodeKind::kWithStatement},
    {"yield", NodeKind::kYield},
    {"await", NodeKind::kAwait},
};

TSFieldId Field(const TSLanguage* language, const char* name) {
  return ts_language_field_id_for_name(language, name, static_cast<uint32_t>(std::strlen(name)));
}

PythonGrammar Build() {
  const TSLanguage* language = tree_sitter_python();
  PythonGrammar grammar;
  uint32_t count = ts_language_symbol_count(language);
  grammar.kind_of_symbol.assign(count, NodeKind::kOther);
  for (uint32_t symbol = 0; symbol < count; ++symbol) {
    auto id = static_cast<TSSymbol>(symbol);
    if (ts_language_symbol_type(language, id) != TSSymbolTypeRegular) continue;
    std::string_view name = ts_language_symbol_name(language, id);
    for (const auto& [kind_name, kind] : kNamedKinds) {
      if (kind_name == name) grammar.kind_of_symbol[symbol] = kind;
    }
  }
  grammar.left = Field(language, "left");
  grammar.right = Field(language, "right");
  grammar.name = Field(language, "name");
  grammar.alias = Field(language, "alias");
  grammar.value = Field(language, "value");
  grammar.type = Field(language, "type");
  grammar.object = Field(language, "object");
  grammar.attribute = Field(language, "attribute");
  grammar.parameters = Field(language, "parameters");
  grammar.body = Field(language, "body");
  grammar.module_name = Field(language, "module_name");
  grammar.key = Field(language, "key");
  grammar.superclasses = Field(language, "superclasses");
  grammar.type_parameters = Field(language, "type_parameters");
  grammar.return_type = Field(language, "return_type");
  grammar.guard = Field(language, "guard");
  grammar.function = Field(language, "function");
  grammar.arguments = Field(language, "arguments");
  grammar.definition = Field(language, "definition");
  grammar.op = Field(language, "operator");
  grammar.argument = Field(language, "argument");
  return grammar;
}

}  // namespace

const PythonGrammar& Grammar() {
  static const PythonGrammar grammar = Build();
  return grammar;
}

}  // namespace dolsot::sandbox
