// BoundedRepr (see bounded_repr.h): a budget of characters shared out over a
// value's parts, each part rendered within what is left for it.
#define PY_SSIZE_T_CLEAN
#include <Python.h>  // first, as CPython asks

#include "embedded/bounded_repr.h"

#include <algorithm>
#include <string_view>
#include <vector>

#include "core/bounded_text.h"
#include "embedded/py_ref.h"
#include "embedded/python_text.h"

namespace dolsot {
namespace {

// What the writer knows how to shorten. A subclass counts as its base only
// while it keeps the base's repr (tp_repr inherited), as repr() would.
enum class Kind { kString, kBytes, kSequence, kDict, kSet, kOther };

Kind KindOf(PyObject* obj) {
  reprfunc repr = Py_TYPE(obj)->tp_repr;
  if (PyUnicode_Check(obj) && repr == PyUnicode_Type.tp_repr) return Kind::kString;
  if ((PyBytes_Check(obj) && repr == PyBytes_Type.tp_repr) ||
      (PyByteArray_Check(obj) && repr == PyByteArray_Type.tp_repr)) {
    return Kind::kBytes;
  }
  if ((PyList_Check(obj) && repr == PyList_Type.tp_repr) ||
      (PyTuple_Check(obj) && repr == PyTuple_Type.tp_repr)) {
    return Kind::kSequence;
  }
  if (PyDict_Check(obj) && repr == PyDict_Type.tp_repr) return Kind::kDict;
  if (PyAnySet_Check(obj) && (repr == PySet_Type.tp_repr || repr == PyFrozenSet_Type.tp_repr)) {
    return Kind::kSet;
  }
  return Kind::kOther;
}

// The class's __name__ (tp_name without the module a static type puts first).
std::string ShortTypeName(PyObject* obj) {
  std::string_view name = Py_TYPE(obj)->tp_name;
  std::size_t dot = name.rfind('.');
  return std::string(dot == std::string_view::npos ? name : name.substr(dot + 1));
}

// "1 item", "3 items".
std::string Counted(std::size_t count, const char* unit) {
  return std::to_string(count) + " " + unit + (count == 1 ? "" : "s");
}

// "list of 1000000 items", "str of 5000000 characters", "bytes of 7 bytes".
std::string ShapeOf(PyObject* obj, Kind kind) {
  Py_ssize_t length = PyObject_Length(obj);
  if (length < 0) {
    PyErr_Clear();
    return ShortTypeName(obj);
  }
  const char* unit = kind == Kind::kString ? "character" : kind == Kind::kBytes ? "byte" : "item";
  return ShortTypeName(obj) + " of " + Counted(static_cast<std::size_t>(length), unit);
}

// repr(obj) as a str object (new reference), or a placeholder saying why
// repr failed. Never nullptr unless memory ran out; no error set on return.
PyObject* ReprObject(PyObject* obj) {
  PyObject* repr = PyObject_Repr(obj);
  if (repr != nullptr) return repr;
  Ref exc(TakeRaisedException());
  std::string text = "<repr of " + std::string(Py_TYPE(obj)->tp_name) + " object failed: " +
                     (exc ? ShortExceptionText(exc.get()) : std::string("unknown error")) + ">";
  PyObject* placeholder =
      PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  if (placeholder == nullptr) PyErr_Clear();
  return placeholder;
}

std::string Elision(std::size_t count, const char* unit) {
  return " ... " + std::to_string(count) + " more " + unit + (count == 1 ? "" : "s") + " ... ";
}

// A str object's text, cut in the middle to `budget` characters when
// longer: only the two ends kept are ever encoded. Sets *cut when it cuts.
std::string CutStrToFit(PyObject* str, std::size_t budget, bool* cut) {
  const Py_ssize_t length = PyUnicode_GET_LENGTH(str);
  if (static_cast<std::size_t>(length) <= budget) return Utf8ForReader(str);
  *cut = true;
  std::string marker = Elision(static_cast<std::size_t>(length), "character");
  Py_ssize_t head = static_cast<Py_ssize_t>(budget);
  Py_ssize_t tail = 0;
  if (budget >= marker.size() + 2) {
    const std::size_t room = budget - marker.size();
    head = static_cast<Py_ssize_t>(room - room / 3);
    tail = static_cast<Py_ssize_t>(room / 3);
    marker = Elision(static_cast<std::size_t>(length - head - tail), "character");
  } else {
    marker.clear();  // too little room to say what was cut: the head alone
  }
  Ref head_text(PyUnicode_Substring(str, 0, head));
  Ref tail_text(PyUnicode_Substring(str, length - tail, length));
  if (!head_text || !tail_text) {
    PyErr_Clear();
    return "";
  }
  return Utf8ForReader(head_text.get()) + marker + Utf8ForReader(tail_text.get());
}

// `text` (UTF-8) cut in the middle to `budget` characters when longer.
std::string CutToFit(std::string text, std::size_t budget, bool* cut) {
  if (CountCodePoints(text) <= budget) return text;
  Ref str(PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace"));
  if (!str) {
    PyErr_Clear();
    *cut = true;
    return "";
  }
  return CutStrToFit(str.get(), budget, cut);
}

class ReprWriter {
 public:
  explicit ReprWriter(const ReprLimits& limits) : limits_(limits) {}

  // A repr of `obj` in at most `budget` characters.
  std::string Render(PyObject* obj, std::size_t budget, int depth) {
    switch (KindOf(obj)) {
      case Kind::kString: return RenderText(obj, budget, depth, "character");
      case Kind::kBytes: return RenderText(obj, budget, depth, "byte");
      case Kind::kSequence:
      case Kind::kDict:
      case Kind::kSet: return RenderContainer(obj, budget, depth);
      case Kind::kOther: break;
    }
    Ref repr(ReprObject(obj));
    return repr ? FitStr(repr.get(), budget) : Fit("<repr failed: out of memory>", budget);
  }

  bool shortened() const { return shortened_; }
  void ClearShortened() { shortened_ = false; }

 private:
  std::string Fit(std::string text, std::size_t budget) {
    return CutToFit(std::move(text), budget, &shortened_);
  }
  std::string FitStr(PyObject* str, std::size_t budget) {
    return CutStrToFit(str, budget, &shortened_);
  }

  // A str, bytes or bytearray: the repr of its head and of its tail, only
  // those slices ever copied.
  std::string RenderText(PyObject* obj, std::size_t budget, int depth, const char* unit) {
    const Py_ssize_t length = PyObject_Length(obj);
    std::size_t cap = depth > 0 ? std::min(budget, limits_.max_string) : budget;
    if (length >= 0 && static_cast<std::size_t>(length) + 2 <= cap) {
      Ref repr(ReprObject(obj));  // small: Python's own repr (escapes may still make it long)
      return repr ? FitStr(repr.get(), budget) : "";
    }
    if (length < 0) PyErr_Clear();
    shortened_ = true;
    std::string marker = Elision(static_cast<std::size_t>(std::max<Py_ssize_t>(length, 0)), unit);
    constexpr std::size_t kQuotes = 6;  // b'' twice
    if (length < 0 || cap < marker.size() + kQuotes + 2) {
      return Fit("<" + ShapeOf(obj, KindOf(obj)) + ">", budget);
    }
    const std::size_t room = cap - marker.size() - kQuotes;
    const Py_ssize_t head = static_cast<Py_ssize_t>(room - room / 3);
    const Py_ssize_t tail = static_cast<Py_ssize_t>(room / 3);
    marker = Elision(static_cast<std::size_t>(length - head - tail), unit);
    Ref head_part(PySequence_GetSlice(obj, 0, head));
    Ref tail_part(PySequence_GetSlice(obj, length - tail, length));
    if (!head_part || !tail_part) {
      PyErr_Clear();
      return Fit("<" + ShapeOf(obj, KindOf(obj)) + ">", budget);
    }
    Ref head_repr(ReprObject(head_part.get()));
    Ref tail_repr(ReprObject(tail_part.get()));
    if (!head_repr || !tail_repr) return "";
    // Escapes (\x00, \u2028) can make a slice's repr longer than the slice.
    return FitStr(head_repr.get(), static_cast<std::size_t>(head) + kQuotes / 2) + marker +
           FitStr(tail_repr.get(), static_cast<std::size_t>(tail) + kQuotes / 2);
  }

  struct Delimiters {
    std::string open, close, empty;
  };

  Delimiters DelimitersOf(PyObject* obj) {
    if (PyList_Check(obj)) return {"[", "]", "[]"};
    if (PyTuple_Check(obj)) return {"(", ")", "()"};
    if (PyDict_Check(obj)) return {"{", "}", "{}"};
    if (PySet_CheckExact(obj)) return {"{", "}", "set()"};
    const std::string name = ShortTypeName(obj);  // frozenset, a set subclass
    return {name + "({", "})", name + "()"};
  }

  // The container's `index`-th item from the front (from the back when
  // `from_back`), a new reference; nullptr when there is none (the
  // container changed under a repr). Dicts and sets are walked with
  // `cursor`, an iterator kept across calls.
  PyObject* NextItem(PyObject* obj, Py_ssize_t index, bool from_back, Ref& cursor) {
    if (PyList_Check(obj) || PyTuple_Check(obj)) {
      const Py_ssize_t size = PyList_Check(obj) ? PyList_GET_SIZE(obj) : PyTuple_GET_SIZE(obj);
      const Py_ssize_t at = from_back ? size - 1 - index : index;
      if (at < 0 || at >= size) return nullptr;
      return Py_NewRef(PyList_Check(obj) ? PyList_GET_ITEM(obj, at) : PyTuple_GET_ITEM(obj, at));
    }
    if (!cursor) {
      // A dict's keys, either way (dict.__reversed__ walks from the end); a set's elements.
      cursor.reset(from_back ? PyObject_CallMethod(reinterpret_cast<PyObject*>(&PyDict_Type),
                                                   "__reversed__", "O", obj)
                             : PyObject_GetIter(obj));
      if (!cursor) {
        PyErr_Clear();
        return nullptr;
      }
    }
    PyObject* next = PyIter_Next(cursor.get());
    if (next == nullptr) PyErr_Clear();  // the end, or the dict changed size
    return next;
  }

  // One item of a container: "repr" or, for a dict, "key: value".
  std::string RenderItem(PyObject* container, PyObject* item, std::size_t room, int depth) {
    if (!PyDict_Check(container)) return Render(item, room, depth);
    std::string key = Render(item, std::max<std::size_t>(room / 2, std::min<std::size_t>(room, 16)), depth);
    const std::size_t used = CountCodePoints(key) + 2;
    PyObject* value = PyDict_GetItemWithError(container, item);  // borrowed
    if (value == nullptr) {
      PyErr_Clear();
      return key + ": <gone>";
    }
    Ref held(Py_NewRef(value));
    return key + ": " + Render(held.get(), room > used ? room - used : 0, depth);
  }

  // An item is not squeezed into less room than this: it is left out.
  static constexpr std::size_t kMinItemRoom = 12;

  // Items from the front (or the back) while they fit in `room` and number
  // at most `max_count`; adds their width to `used`.
  std::vector<std::string> RenderSide(PyObject* obj, std::size_t max_count, bool from_back,
                                      std::size_t room, int depth, std::size_t& used) {
    std::vector<std::string> pieces;
    Ref cursor;
    for (std::size_t i = 0; i < max_count; ++i) {
      const std::size_t separator = pieces.empty() ? 0 : 2;
      if (used + separator + kMinItemRoom > room) break;
      Ref item(NextItem(obj, static_cast<Py_ssize_t>(i), from_back, cursor));
      if (!item) break;
      std::string piece = RenderItem(obj, item.get(), room - used - separator, depth);
      used += separator + CountCodePoints(piece);
      pieces.push_back(std::move(piece));
    }
    return pieces;
  }

  std::string RenderContainer(PyObject* obj, std::size_t budget, int depth) {
    const Py_ssize_t length = PyObject_Length(obj);
    if (length < 0) {
      PyErr_Clear();
      Ref repr(ReprObject(obj));
      return repr ? FitStr(repr.get(), budget) : "";
    }
    Delimiters delimiters = DelimitersOf(obj);
    if (length == 0) return Fit(delimiters.empty, budget);
    if (depth >= limits_.max_depth) {
      shortened_ = true;
      return Fit("<" + ShapeOf(obj, KindOf(obj)) + ">", budget);
    }
    if (Py_EnterRecursiveCall(" while computing a bounded repr") != 0) {
      Ref exc(TakeRaisedException());
      shortened_ = true;
      return Fit("...", budget);
    }
    std::string out;
    const int seen = Py_ReprEnter(obj);
    if (seen != 0) {
      if (seen < 0) PyErr_Clear();
      out = Fit(PyList_Check(obj) ? "[...]" : PyDict_Check(obj) ? "{...}" : "...", budget);
    } else {
      out = RenderItems(obj, static_cast<std::size_t>(length), delimiters, budget, depth);
      Py_ReprLeave(obj);
    }
    Py_LeaveRecursiveCall();
    return out;
  }

  std::string RenderItems(PyObject* obj, std::size_t count, const Delimiters& delimiters,
                          std::size_t budget, int depth) {
    const bool lone_tuple_item = PyTuple_Check(obj) && count == 1;
    const std::size_t frame = delimiters.open.size() + delimiters.close.size() + (lone_tuple_item ? 1 : 0);
    constexpr std::size_t kMarkerRoom = 32;  // ", ... 123456789 more items ..., "
    if (budget < frame + kMarkerRoom + 8) {
      shortened_ = true;
      return Fit("<" + ShapeOf(obj, KindOf(obj)) + ">", budget);
    }
    const std::size_t room = budget - frame - kMarkerRoom;
    const bool ordered = !PyAnySet_Check(obj);
    const bool all_fit = count <= limits_.max_items;
    // The first three quarters of the items shown and of the room, then the
    // last quarter from the back (with whatever room the front left).
    const std::size_t front_count = all_fit || !ordered ? std::min(count, limits_.max_items)
                                                        : limits_.max_items - limits_.max_items / 4;
    const std::size_t front_room = ordered ? room - room / 4 : room;
    std::size_t used = 0;
    std::vector<std::string> front = RenderSide(obj, front_count, false, front_room, depth + 1, used);
    std::vector<std::string> back;
    if (ordered && front.size() < count) {
      const std::size_t back_count =
          std::min(count - front.size(), all_fit ? count : limits_.max_items / 4);
      used += 2;  // the separator before the back items
      back = RenderSide(obj, back_count, true, room, depth + 1, used);
      std::reverse(back.begin(), back.end());
    }
    const std::size_t shown = front.size() + back.size();
    std::string out = delimiters.open;
    for (std::size_t i = 0; i < front.size(); ++i) out += (i ? ", " : "") + front[i];
    if (shown < count) {
      shortened_ = true;
      out += std::string(front.empty() ? "" : ", ") + "... " + std::to_string(count - shown) +
             " more " + (count - shown == 1 ? "item" : "items") + " ...";
    }
    for (const std::string& piece : back) out += ", " + piece;
    if (lone_tuple_item && shown == 1) out += ",";
    return out + delimiters.close;
  }

  const ReprLimits& limits_;
  bool shortened_ = false;
};

}  // namespace

std::string BoundedRepr(PyObject* obj, const ReprLimits& limits) {
  if (limits.max_chars == 0) {
    Ref repr(ReprObject(obj));
    return repr ? Utf8ForReader(repr.get()) : "";
  }
  const Kind kind = KindOf(obj);
  ReprWriter writer(limits);
  std::string out = writer.Render(obj, limits.max_chars, 0);
  if (kind == Kind::kOther || !writer.shortened()) return out;
  // Shortened: say the shape in a closing comment, within the same budget.
  const std::string note = "  # " + ShapeOf(obj, kind) + ", shortened";
  if (limits.max_chars > 2 * note.size()) {
    writer.ClearShortened();
    out = writer.Render(obj, limits.max_chars - note.size(), 0);
    out += note;
  }
  bool cut = false;
  return CutToFit(std::move(out), limits.max_chars, &cut);
}

}  // namespace dolsot
