// The UTF-8 of a Python str, once for every part that reads one: the cell
// runner (error text), the checkpoint (names) and the bindings (run's
// arguments), and an exception's one-line text. Needs the GIL.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

struct _object;
typedef struct _object PyObject;  // NOLINT: CPython's own spelling

namespace dolsot {

// What to do with a lone surrogate, which UTF-8 cannot hold.
enum class LoneSurrogates {
  kRefuse,           // nullopt (a name with one is no name we can store)
  kPass,             // encoded as is ("surrogatepass"): invalid UTF-8 the core can name
  kBackslashEscape,  // "\udcff" spelled out, for text shown to a reader
};

// `text` (a str) as UTF-8: a view of the str's own cached UTF-8 in the
// common case (valid while `text` lives), else encoded into `storage` (valid
// while it lives). nullopt for kRefuse, or when encoding fails (no memory):
// the Python error indicator is clear for kRefuse and set otherwise.
std::optional<std::string_view> Utf8View(PyObject* text, LoneSurrogates surrogates,
                                         std::string& storage);

// `str` (a str) as UTF-8 for a reader (lone surrogates backslash-escaped);
// "" when it cannot be encoded. The error indicator is clear on return.
std::string Utf8ForReader(PyObject* str);

// Calls `visit` with the UTF-8 of each str key of the dict `dict`, in the
// dict's order, until it returns false; keys that are not str, or whose
// UTF-8 cannot be had, are skipped (the error indicator cleared).
void ForEachStrKey(PyObject* dict, const std::function<bool(std::string_view)>& visit);

// "ExcType: message" for an exception object, without calling into the
// traceback module (a last resort). The error indicator is clear on return.
std::string ShortExceptionText(PyObject* exc);

}  // namespace dolsot
