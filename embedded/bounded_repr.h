// BoundedRepr: a value's repr that shows its shape (type, length, the first
// items and the last ones) within a budget of characters, built item by item
// so a huge container or string never becomes a huge string first. RunCell
// formats every trailing expression's value with it, on both backends.
//
// Needs the calling thread to hold the GIL.
#pragma once

#include <cstddef>
#include <string>

#include "core/config.h"

struct _object;
typedef struct _object PyObject;  // NOLINT: CPython's own spelling

namespace dolsot {

struct ReprLimits {
  // The whole repr, in characters (code points). 0: no limit at all (the
  // object's own repr, whatever its size).
  std::size_t max_chars = kDefaultMaxRepr;
  // Items shown of one list, tuple, dict or set: the first three quarters of
  // them and the last quarter (a set: the first ones).
  std::size_t max_items = 100;
  // Characters shown of a str or bytes inside a container (head and tail);
  // a value that is itself a string may use the whole budget.
  std::size_t max_string = 1000;
  // Containers nested deeper than this show as "<list of 3 items>".
  int max_depth = 8;
};

// repr(obj) within `limits`. A repr that fits is Python's own, exactly. One
// that does not keeps Python's syntax for what it shows and says what it
// left out where it left it ("... 999900 more items ...", "... 5000 more
// characters ..."); a shortened container or string ends with a comment
// giving its shape ("  # list of 1000000 items, shortened"). An object with
// its own __repr__ gets that repr, cut in the middle to fit. A repr that
// raises shows as "<repr of T object failed: ...>". Never raises; the
// error indicator is clear on return.
std::string BoundedRepr(PyObject* obj, const ReprLimits& limits);

}  // namespace dolsot
