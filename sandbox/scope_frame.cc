// The gate walk's frames (see scope_frame.h).
#include "sandbox/scope_frame.h"

namespace dolsot::sandbox {

bool RoleDependsOnField(NodeKind kind) {
  switch (kind) {
    case NodeKind::kAssignment:
    case NodeKind::kAugmentedAssignment:
    case NodeKind::kForStatement:
    case NodeKind::kTypeAliasStatement:
    case NodeKind::kForInClause:
    case NodeKind::kNamedExpression:
    case NodeKind::kAsPattern:
    case NodeKind::kFunctionDefinition:
    case NodeKind::kClassDefinition:
    case NodeKind::kLambda:
    case NodeKind::kDefaultParameter:
    case NodeKind::kTypedDefaultParameter:
    case NodeKind::kTypedParameter:
    case NodeKind::kAttribute:
    case NodeKind::kKeywordArgument:
    case NodeKind::kDictPattern:
      return true;
    default:
      return false;
  }
}

Frame DeriveFrame(const Frame& parent, NodeKind kind, TSFieldId field, const PythonGrammar& g) {
  Frame child{kind, parent.role, parent.scope};
  child.in_annotation = parent.in_annotation || kind == NodeKind::kType;
  child.in_bases = parent.in_bases;
  child.self_slot = parent.self_slot;
  child.class_slot = parent.class_slot;
  child.top_level = parent.kind == NodeKind::kModule ||
                    (parent.kind == NodeKind::kDecoratedDefinition && parent.top_level);
  child.except_type = parent.kind == NodeKind::kExceptClause ? kind != NodeKind::kBlock
                                                             : parent.except_type;
  child.except_alias = parent.except_alias;
  child.type_is_local = parent.type_is_local;
  child.cleanup_pending = parent.cleanup_pending;
  switch (parent.kind) {
    case NodeKind::kAssignment:
    case NodeKind::kAugmentedAssignment:
    case NodeKind::kForStatement:
    case NodeKind::kTypeAliasStatement:
      child.role = field == g.left ? Role::kBind : Role::kLoad;
      break;
    case NodeKind::kForInClause:
      child.role = field == g.left ? Role::kCompBind : Role::kLoad;
      break;
    case NodeKind::kNamedExpression:
      child.role = field == g.name ? Role::kBind : Role::kLoad;
      break;
    case NodeKind::kAsPattern:
      if (field == g.alias) {
        child.role = Role::kBind;
        child.except_alias = parent.except_type;  // `except E as e`
        child.except_type = false;
      } else if (parent.role == Role::kPattern) {
        child.role = parent.after_as ? Role::kBind : Role::kPattern;
      } else {
        child.role = Role::kLoad;
      }
      break;
    case NodeKind::kFunctionDefinition:
    case NodeKind::kClassDefinition:
    case NodeKind::kLambda:
      child.role = Role::kLoad;
      if (field == g.name) child.role = Role::kBind;
      child.class_name = field == g.name && parent.kind == NodeKind::kClassDefinition;
      if (field == g.parameters) child.role = Role::kParam;
      // Type parameters stay loads: their bounds (`[T: bound]`) are expressions.
      if (field == g.body) {
        child.scope = parent.kind == NodeKind::kClassDefinition ? Scope::kClass : Scope::kFunction;
        child.self_slot = parent.kind == NodeKind::kFunctionDefinition ? parent.method_self : -1;
        child.type_is_local = parent.type_is_local || parent.type_parameter;
        child.in_bases = false;
        child.cleanup_pending = false;  // a new function: its own try and with statements
      }
      if (parent.kind == NodeKind::kClassDefinition && field == g.superclasses) child.in_bases = true;
      break;
    case NodeKind::kDefaultParameter:
    case NodeKind::kTypedDefaultParameter:
      child.role = field == g.name ? Role::kParam : Role::kLoad;
      break;
    case NodeKind::kTypedParameter:
      child.role = field == g.type ? Role::kLoad : Role::kParam;
      break;
    case NodeKind::kAttribute:
      child.role = field == g.attribute ? Role::kAttrName : Role::kLoad;
      child.skip_attribute = field == g.attribute && parent.skip_attribute;
      break;
    case NodeKind::kSubscript:
    case NodeKind::kCall:
      child.role = Role::kLoad;
      break;
    case NodeKind::kKeywordArgument:
      child.role = field == g.name ? Role::kKeywordName : Role::kLoad;
      break;
    case NodeKind::kDeleteStatement:
      child.role = Role::kDelete;
      break;
    case NodeKind::kGlobalStatement:
    case NodeKind::kNonlocalStatement:
      child.role = Role::kGlobalDecl;
      break;
    case NodeKind::kCaseClause:
      child.role = kind == NodeKind::kCasePattern ? Role::kPattern : Role::kLoad;
      break;
    case NodeKind::kClassPattern:
      child.role = kind == NodeKind::kDottedName ? Role::kDottedLoad : Role::kPattern;
      break;
    case NodeKind::kKeywordPattern:
      child.role = (kind == NodeKind::kIdentifier && parent.identifiers == 0) ? Role::kAttrName
                                                                               : Role::kPattern;
      child.pattern_keyword = child.role == Role::kAttrName;
      break;
    case NodeKind::kSplatPattern:
      child.role = Role::kBind;  // *rest / **rest captures
      break;
    case NodeKind::kDictPattern:
      child.role = field == g.key ? Role::kDottedLoad : Role::kPattern;
      break;
    case NodeKind::kDottedName:
      if (parent.identifiers > 0) {
        child.role = Role::kAttrName;
      } else if (parent.role == Role::kPattern && parent.identifier_count == 1) {
        child.role = Role::kBind;  // `case name:` captures
      } else {
        child.role = Role::kLoad;
      }
      break;
    default:
      break;
  }
  return child;
}

}  // namespace dolsot::sandbox
