// What the gate's walk learns about a cell as it goes (module-level bindings,
// the classes it defines, names that hold caught exceptions or host classes),
// for the rules that can only be decided once the whole cell is seen: whether
// a class is the cell's own (docs/gate.md, "The cell's own classes") and which
// names an alias chain ties to an exception or a toolbox.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/policy.h"

namespace dolsot::sandbox {

class CellFacts {
 public:
  // Where a module-level name got its value.
  enum class Source : std::uint8_t {
    kOther,       // anything the gate does not vouch for
    kSafeImport,  // a top-level import from an allowed module that is no toolbox
    kClass,       // a top-level class statement (ClassIsOwn decides the rest)
  };

  // A base of a class statement: `root`, `root.a.b` or either subscripted.
  struct Base {
    std::string root;
    bool bare = false;  // just the name `root`
  };

  // Records a binding of `name` in the module's namespace (`global` counts).
  // `start` is the byte where its statement starts (top-level ones only matter).
  void NoteBinding(std::string_view name, std::uint32_t start, Source source,
                   std::int32_t class_index = -1);

  // A class statement; returns its index. `plain` is false when a base is not
  // a name chain (a call, a splat) or a keyword (metaclass=...) is given.
  std::int32_t AddClass(std::string name, std::uint32_t start, bool top_level, bool plain,
                        std::vector<Base> bases);

  // True when the cell's own code made every class in the class's ancestry:
  // a top-level class statement whose bases are builtin classes (not `type`
  // nor exception groups), names bound exactly once in the cell by an earlier
  // top-level import from an allowed module that is no toolbox, or earlier
  // top-level classes of the cell that are their own. Nothing a toolbox's
  // __init__ set up can then sit in an instance.
  bool ClassIsOwn(std::int32_t index);

  // `name` is bound once in the cell, by a class statement of an own class.
  bool IsOwnClassName(std::string_view name);

  // The class and every class of the cell deriving from it (by name, see
  // Descendants) are own: an instance of `class D(A, Base)`, Base from an
  // earlier cell, would carry the host's private state into A's methods.
  bool FamilyIsOwn(std::int32_t index);

  std::int32_t ClassCount() const { return static_cast<std::int32_t>(classes_.size()); }
  const std::string& ClassName(std::int32_t index) const { return classes_.at(index).name; }
  std::uint32_t ClassStart(std::int32_t index) const { return classes_.at(index).start; }
  // `roots` and every class of the cell with a base rooted at the name of one
  // of those (transitively), by name whatever else binds it.
  std::vector<std::int32_t> Descendants(const std::vector<std::int32_t>& roots) const;
  // A base of the class is rooted at one of `names`.
  bool HasBaseRootedIn(std::int32_t index, const NameSet& names) const;
  // No keyword (metaclass=) nor computed base, and every base is a bare name
  // in `sealed` or one ClassIsOwn accepts (a builtin class, a safe import of
  // the cell, an own class of the cell): for a class deriving from an earlier
  // cell's sealed class.
  bool DerivesOnlyFrom(std::int32_t index, const NameSet& sealed);
  // `name` is bound exactly once in the cell, before `before`, by a top-level
  // import from an allowed module that is no toolbox.
  bool IsSafeImport(std::string_view name, std::uint32_t before) const;

  // `target = <expression rooted at source>` (also for-targets): the alias
  // chains ResolveAliases follows.
  void NoteAlias(std::string target, std::string source);
  // Every name an alias chain ties to one of `seeds` (seeds included).
  NameSet ResolveAliases(NameSet seeds) const;

 private:
  struct Binding {
    int count = 0;
    std::uint32_t start = 0;
    Source source = Source::kOther;
    std::int32_t class_index = -1;
  };
  struct ClassInfo {
    std::string name;
    std::uint32_t start = 0;
    bool top_level = false;
    bool plain = false;
    std::vector<Base> bases;
    std::int8_t own = -1;  // -1: not decided yet; -2: being decided (a cycle)
  };
  bool BaseIsOwn(const Base& base, std::uint32_t class_start);

  std::map<std::string, Binding, std::less<>> bindings_;
  std::vector<ClassInfo> classes_;
  std::vector<std::pair<std::string, std::string>> aliases_;
  std::vector<bool> family_not_own_;  // FamilyIsOwn, computed on first use
};

}  // namespace dolsot::sandbox
