// The AST gate's rules and the name tables they use: the one place a reader
// scans to see what the gate rejects (rules.cc holds the tables themselves).
#pragma once

#include <span>
#include <string_view>

namespace dolsot::sandbox {

enum class Rule {
  kSyntaxError,       // the tree has ERROR/MISSING nodes or Python 2 statements
  kInvalidSource,     // not UTF-8, NUL bytes, a lone CR, a non-UTF-8 coding cookie
  kSourceLimit,       // too large, nested too deep, or the parse timed out
  kImportDenied,      // a module outside the allow-list, relative or wildcard import
  kNameDenied,        // exec, eval, open, getattr, ... as a name or an attribute
  kDunderName,        // a __dunder__ name that is not in Policy::allowed_dunders
  kDunderAttribute,   // obj.__dunder__ that is not in Policy::allowed_dunders
  kPrivateAttribute,  // obj._private
  kInternalAttribute, // frame, generator, coroutine, traceback and code internals
  kAttributeDenied,   // obj.sys, obj.os, obj.get_type_hints, ...: roads to modules
  kFormatString,      // str.format / format_map whose fields could reach attributes
  kRebindBuiltin,     // a module-level binding (or global/del) of a builtin name
  kRebindToolbox,     // rebinding or deleting a toolbox alias at module level
  kModuleAssignment,  // assigning into, deleting from or mutating a toolbox or module
  kConstructDenied,   // type(n, b, d), Enum('E', names), string annotations, except*, ...
  kSlowPattern,       // a literal regex with nested quantifiers given to re: exponential backtracking
  kHugeConstant,      // a literal power, shift, factorial or repetition too big to compute
  kDeferredCode,      // a yield/await inside try-except/finally or with: runs later, elsewhere
};

struct RuleInfo {
  Rule rule;
  std::string_view id;       // stable, kebab-case: what findings print
  std::string_view summary;  // one line for docs and --help
};

// Every rule, in declaration order.
std::span<const RuleInfo> AllRules();
std::string_view RuleId(Rule rule);

// Name tables (exact, ASCII; identifiers are NFKC-normalized before lookup).
bool IsAlwaysDeniedName(std::string_view name);   // exec, eval, open, getattr, ...
bool IsBuiltinName(std::string_view name);        // every public name of builtins
bool IsDeniedOnlyAsName(std::string_view name);   // help, input, open, ...: not as attributes
bool IsDeniedModulePath(std::string_view dotted); // json.tool: a denied submodule
bool IsDeniedModuleLeaf(std::string_view name);   // tool: the last part of one
bool IsMutatingMethod(std::string_view name);     // update, append, clear, ...
bool IsInternalAttribute(std::string_view name);  // gi_frame, f_globals, tb_frame, ...
bool IsDeniedAttribute(std::string_view name);    // sys, os, builtins, get_type_hints, ...
bool IsDunder(std::string_view name);             // __x__ (at least one char inside)
bool IsDataDunder(std::string_view name);         // __name__, __doc__, ...: not methods
bool IsExceptionCarrier(std::string_view name);   // args, value, object: an exception's payload
bool IsPublicUnderscoreAttribute(std::string_view name);  // namedtuple's _replace, _asdict, ...
// The module `io` is reached only as `io.<name>` with these names (docs/gate.md, "csv and io").
bool IsAllowedIoAttribute(std::string_view name);  // StringIO, BytesIO, SEEK_SET, ...
bool IsIoClassName(std::string_view name);          // StringIO, BytesIO: only called or tested

std::span<const std::string_view> DefaultAllowedModules();
std::span<const std::string_view> DefaultAllowedDunders();

}  // namespace dolsot::sandbox
