// ReadOnlyCell: whether a cell provably leaves its session's state as it
// found it, so a backend need neither fork a new rollback point after it nor
// write a checkpoint of it (issue #22: the cost of durability follows what a
// cell changed). `1 + 1`, `n * 2` for an int `n`, `print(len(s), s[:3])` for
// a str `s`, `sorted(t)` for a tuple of numbers are read-only; a cell that
// binds, deletes, imports, defines, touches an attribute, awaits or calls
// anything but a short list of builtins that are pure on the values it can
// reach is not.
//
// The proof, before the cell runs (`Check`):
//   - Shape: the cell parses (Python's own `ast`, under 1 KiB of source) to
//     expressions only: constants, names, operators, comparisons, calls,
//     subscripts and slices, displays, f-strings, comprehensions. Names are
//     stored only as comprehension targets (local to it). A cell of plain
//     expressions (names, numbers, operators, brackets: `1 + 1`, `len(t)`)
//     gets this from a token scan instead (plain_expressions.h), without
//     the parser.
//   - Values: every name the cell reads is, in the session's namespace, a
//     value of an exact immutable builtin type (int, float, complex, bool,
//     None, str, bytes, range) or an exact tuple, frozenset, list, dict, set
//     or bytearray of those, 256 items in all at most; or, absent there, a
//     comprehension's own variable (no builtin by that name: read outside
//     the comprehension it would find the builtin) or one of the pure
//     builtins, checked to
//     be the interpreter's own object (a session that rebinds `builtins.len`
//     gets no fast path for `len`). A list, dict or set changes only through
//     an attribute (`.append`), a store (`d[k] = v`) or `+=`, which such a
//     cell has none of.
//   So every object the cell can reach is a builtin value it can only read,
//   one of those builtins or made by the cell, and no code of the session's
//   (a method, a property, a __del__ of its objects) can run.
// And while it runs (`Scope`): the cyclic garbage collector is paused, so no
// finalizer of an earlier cell's garbage runs inside it. The backend adds
// what it knows: no thread of the session's still runs, no variables were
// bound for the cell, and the cell completed.
//
// What the proof cannot see: an audit hook (sys.addaudithook), a trace or
// profile function, or a signal handler installed by an earlier cell that
// changes the namespace while this cell runs. `Check` refuses while a trace
// or profile function or an interval timer is set; audit hooks cannot be
// listed and are taken as absent. docs/architecture.md ("Read-only cells").
//
// Everything here needs the GIL.
#pragma once

#include <Python.h>

#include "embedded/py_ref.h"

#include <string>
#include <string_view>
#include <vector>

namespace dolsot {

class ReadOnlyCell {
 public:
  // Imports `ast` and takes the builtins this check trusts from the
  // interpreter as it is now. Call it once per interpreter before any
  // session code runs (a worker does at start; its forks inherit it).
  // Without it, Check says false. Returns false (the Python error cleared)
  // when it cannot prepare; cells then just get no fast path.
  static bool Prepare();

  // Whether `code`, run in `globals` (the session's namespace), is proven
  // read-only by the rules above. Never raises (the error indicator is as
  // it was).
  static bool Check(std::string_view code, PyObject* globals);

  // What a cell can change, proven before it runs.
  enum class Effect {
    kAny,          // unproven
    kNothing,      // read-only (Check)
    kItsBindings,  // a binding cell: only the values of `*names`
  };
  // Check's proof, and with `binding` the binding proof, which stands on
  // copies: after the cell, MarshalBindings copies the values of the names
  // it may have changed, and a promoted snapshot (or a restored session)
  // that binds those copies holds exactly the state after the cell. So the
  // proof shows that the cell changes nothing those values do not carry:
  //   - Shape (Python's parser, 16 KiB at most): top-level statements
  //     `targets = expr`, `target op= expr`, for, while, if, break,
  //     continue, pass, expressions (lambdas too: a lambda's body is read
  //     as the cell's own), and defs without decorators; targets
  //     are names, subscripts of any expression, tuples and lists of them;
  //     an attribute only to call one of a list of methods of builtin
  //     values that change the value they are called on (list.append,
  //     dict.update, set.add, ...) or nothing (str.split, dict.get, ...).
  //     Not: del, import, class, with, try, raise, :=, global,
  //     await, yield, async anything. A def's body does not run: only its
  //     defaults and annotations count as the cell's expressions.
  //   - Reads: every name the cell reads holds an atom (as Check's), or is
  //     one of Check's trusted builtins, or is bound nowhere (not in the
  //     builtins either: NameError unless the cell binds it first), or holds
  //     a function whose body was proven when its def ran (PureFunctions:
  //     made of the same shape, bound only its own locals, returned, and it
  //     reads only globals that pass this proof too, recursively). No name a
  //     def of this cell binds is read, by the cell or by such a function:
  //     that def's body is proven (and registered) only after the cell.
  //   - What may change: each name the cell binds (it held an atom, a
  //     function FunctionRecipe can let go, or nothing: letting it go runs
  //     no finalizer), and each name read that holds a mutable atom, which
  //     the namespace must hold alone all the way down (OwnedPlain, before
  //     the cell: nothing else sees it change). These are `*names`.
  // So nothing the cell can reach runs code of the session's but those
  // proven functions, and every object it can change is one of `*names`'
  // values or made by the cell. A read-only result (kNothing) when there
  // are no such names. `*definitions` gets what RegisterDefinitions needs
  // after the cell ran (binding only; null otherwise). The backend adds
  // what it knows, as for read-only cells, and after the cell
  // MarshalBindings must succeed too. Never raises.
  static Effect Classify(std::string_view code, PyObject* globals, bool binding,
                         std::vector<std::string>* names, Ref* definitions = nullptr);

  // After a cell classified with `binding` ran (any Effect but kAny): the
  // functions its defs made whose bodies were proven go to PureFunctions,
  // so a later cell may call them. `filename` is the cell's ("<cell N>").
  static void RegisterDefinitions(PyObject* globals, PyObject* filename, PyObject* definitions);

  // After a restore: the functions `globals` holds whose cells' sources are
  // registered (cell_sources.h) and whose code is exactly what their def in
  // that source compiles to go to PureFunctions, when that def's body is
  // proven. (A recipe's function, ApplyBindings, is checked the same way.)
  static void RegisterRestored(PyObject* globals);

  // After a binding cell completed: `*values` gets the marshalled values of
  // `names`, when each is an exact builtin value (None, bool, int, float,
  // complex, str, bytes, tuple, list, dict, set) whose mutable parts no
  // other object holds (so a copy is as good as it: no aliasing is lost),
  // or a function a FunctionRecipe makes again, 4096 items and 256 KiB in
  // all at most; else false (the cell then counts as one that may have changed
  // anything). Never raises.
  static bool MarshalBindings(PyObject* globals, const std::vector<std::string>& names,
                              std::vector<std::string>* values);

  // Puts `*names` (names `globals` holds) in the order `globals` holds them,
  // the order they were first bound in (a dict keeps it): bound again in
  // that order on a promoted snapshot or a restore, names new since then
  // land where they were, so globals() lists them as before. The proof
  // reports them in no particular order. Names `globals` lacks are dropped.
  static void InNamespaceOrder(PyObject* globals, std::vector<std::string>* names);

  // Binds marshalled values into `globals` (a promoted snapshot replaying
  // its runner's binding cells, a restore its journal's frames); a
  // function's recipe also registers its cell's source and its proof.
  // False on a value that does not read back.
  static bool ApplyBindings(PyObject* globals, const std::vector<std::string>& names,
                            const std::vector<std::string>& values);

  // While a proven cell runs (`active`): pauses the cyclic GC, and lets
  // what the proof took on trust report that it did not hold (Unproven).
  // One at a time (a session process runs one cell at a time).
  class Scope {
   public:
    explicit Scope(bool active);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

    // Whether Unproven() was called while this scope was active: the cell
    // ran code, or made values, the proof did not see, so it must take the
    // general path (its state is forked after it, which is exact whatever
    // it did; the rollback point from before it is exact too).
    bool unproven() const;

   private:
    bool active_ = false;
    bool resume_ = false;
  };

  // Whether a proven cell is running (a Scope is active).
  static bool Proving();
  // Called, under the GIL, by what a proof accepted on the condition that
  // it meets only plain data at run time (a host tool's stub, whose
  // arguments and reply cross as pickles), when it does not: the cell
  // takes the general path after all. Does nothing outside a proven cell.
  static void Unproven();
};

}  // namespace dolsot
