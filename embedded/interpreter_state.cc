// InterpreterStateGuard (see interpreter_state.h): the state noted when no
// cell runs lives in the interpreter's state dict (a capsule), so a
// finalized and restarted interpreter starts a fresh one.
#define PY_SSIZE_T_CLEAN
#include <Python.h>  // first, as CPython asks

#include "embedded/interpreter_state.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <vector>

#include "embedded/output_router.h"
#include "embedded/interned_name.h"
#include "embedded/py_ref.h"

namespace dolsot {
namespace {

// The sys entries put back by identity.
constexpr int kSysCount = 14;
const InternedName kSysNames[kSysCount] = {
    InternedName("stdout"),          InternedName("stderr"),
    InternedName("stdin"),           InternedName("__stdout__"),
    InternedName("__stderr__"),      InternedName("__stdin__"),
    InternedName("displayhook"),     InternedName("__displayhook__"),
    InternedName("excepthook"),      InternedName("__excepthook__"),
    InternedName("unraisablehook"),  InternedName("__unraisablehook__"),
    InternedName("breakpointhook"),  InternedName("__breakpointhook__"),
};

// threading's global hooks: what threading.settrace, setprofile and a store
// into threading.excepthook change.
constexpr int kThreadingCount = 3;
const InternedName kThreadingNames[kThreadingCount] = {
    InternedName("_trace_hook"), InternedName("_profile_hook"), InternedName("excepthook")};
const InternedName kThreadingModule("threading");
const InternedName kOriginalExcepthook("__excepthook__");

// decimal's templates, and CPython's initial value of each (what a cell that
// imports decimal first finds, so what it is put back to).
constexpr int kDecimalCount = 3;
const InternedName kDecimalNames[kDecimalCount] = {
    InternedName("DefaultContext"), InternedName("BasicContext"), InternedName("ExtendedContext")};
const InternedName kDecimalModule("decimal");
const InternedName kReduce("__reduce__");
struct TemplateDefaults {
  int prec;
  const char* rounding;
  const char* traps[5];
};
constexpr TemplateDefaults kDecimalDefaults[kDecimalCount] = {
    {28, "ROUND_HALF_EVEN", {"InvalidOperation", "DivisionByZero", "Overflow"}},
    {9, "ROUND_HALF_UP", {"Clamped", "InvalidOperation", "DivisionByZero", "Overflow", "Underflow"}},
    {9, "ROUND_HALF_EVEN", {}},
};

// _decimal's Context, read as bytes: its mpd_context_t (prec, emax, emin,
// traps, status, newtrap, round, clamp, allcr) right after the object
// header, then the traps and flags objects, then `capitals`. Comparing and
// copying these bytes costs nanoseconds where __reduce__ costs ~0.5 µs a
// template; the layout is checked against the attributes once per type,
// and anything else (_pydecimal, a changed layout) takes __reduce__.
constexpr std::size_t kMpdContextBytes = 3 * sizeof(Py_ssize_t) + 6 * 4;
constexpr std::size_t kCapitalsOffset = sizeof(PyObject) + kMpdContextBytes + 2 * sizeof(PyObject*);
constexpr std::size_t kRawBytes = kMpdContextBytes + sizeof(int);
struct RawDecimal {
  unsigned char bytes[kRawBytes];
};
const InternedName kPrec("prec");
const InternedName kEmax("Emax");
const InternedName kEmin("Emin");
const InternedName kCapitals("capitals");

void ReadRaw(PyObject* context, RawDecimal& raw) {
  const auto* base = reinterpret_cast<const unsigned char*>(context);
  std::memcpy(raw.bytes, base + sizeof(PyObject), kMpdContextBytes);
  std::memcpy(raw.bytes + kMpdContextBytes, base + kCapitalsOffset, sizeof(int));
}

void WriteRaw(PyObject* context, const RawDecimal& raw) {
  auto* base = reinterpret_cast<unsigned char*>(context);
  std::memcpy(base + sizeof(PyObject), raw.bytes, kMpdContextBytes);
  std::memcpy(base + kCapitalsOffset, raw.bytes + kMpdContextBytes, sizeof(int));
}

// Whether `context`'s type is _decimal's Context with the layout above.
bool RawLayoutHolds(PyObject* context) {
  static PyTypeObject* checked_type = nullptr;  // guarded by the GIL
  static bool holds = false;
  PyTypeObject* type = Py_TYPE(context);
  if (type == checked_type) return holds;
  holds = false;
  checked_type = type;
  if (std::strcmp(type->tp_name, "decimal.Context") != 0 ||
      static_cast<std::size_t>(type->tp_basicsize) < kCapitalsOffset + sizeof(int)) {
    return false;
  }
  RawDecimal raw;
  ReadRaw(context, raw);
  Py_ssize_t fields[3];
  std::memcpy(fields, raw.bytes, sizeof fields);
  int capitals = 0;
  std::memcpy(&capitals, raw.bytes + kMpdContextBytes, sizeof capitals);
  const InternedName* names[4] = {&kPrec, &kEmax, &kEmin, &kCapitals};
  const Py_ssize_t expected[4] = {fields[0], fields[1], fields[2], capitals};
  for (int i = 0; i < 4; ++i) {
    PyObject* name = names[i]->get();
    Ref value(name != nullptr ? PyObject_GetAttr(context, name) : nullptr);
    const Py_ssize_t number = value ? PyLong_AsSsize_t(value.get()) : -1;
    if (PyErr_Occurred() || number != expected[i]) {
      PyErr_Clear();
      return false;
    }
  }
  holds = true;
  return true;
}

const InternedName kGetSwitchInterval("getswitchinterval");
const InternedName kSetSwitchInterval("setswitchinterval");

// A dict's version tag (PEP 509): it changes whenever the dict changes, so
// an unchanged tag means unchanged contents and the lookups can be skipped.
// 0 when unknown (never a tag): then every entry is looked at.
std::uint64_t DictVersion(PyObject* dict) {
#if PY_VERSION_HEX < 0x030E0000
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  // Deprecated in 3.12 (dict watchers replace it) but kept, and still bumped
  // by every change, through 3.13.
  return dict != nullptr ? reinterpret_cast<PyDictObject*>(dict)->ma_version_tag : 0;
#pragma GCC diagnostic pop
#else
  (void)dict;
  return 0;
#endif
}

// The state when no cell ran. Guarded by the GIL.
struct Baseline {
  int running = 0;                        // cells between their guard's constructor and destructor
  std::vector<CellRunningCount*> counted;  // their counts (each outlives its guard's count)
  PyObject* sys_dict = nullptr;           // owned
  PyObject* sys_values[kSysCount] = {};   // owned; nullptr: absent
  std::uint64_t sys_version = 0;          // sys_dict's version when it last held sys_values
  int recursion_limit = 0;
  double switch_interval = 0.0;           // seconds
  // sys.modules' version when threading and decimal were last looked up
  // there, and what was found (borrowed: sys.modules holds them while its
  // version stays).
  std::uint64_t modules_version = 0;
  PyObject* threading_module = nullptr;
  PyObject* decimal_module = nullptr;
  bool threading_imported = false;
  PyObject* threading_values[kThreadingCount] = {};  // owned
  PyObject* threading_dict = nullptr;                // borrowed: the module's, when imported
  std::uint64_t threading_version = 0;               // its version when it last held the values
  bool decimal_imported = false;
  PyObject* decimal_templates[kDecimalCount] = {};   // owned: the module's attributes
  PyObject* decimal_states[kDecimalCount] = {};      // owned: __reduce__ arguments (slow path)
  bool decimal_raw[kDecimalCount] = {};              // true: decimal_bytes holds the state
  RawDecimal decimal_bytes[kDecimalCount] = {};
  PyObject* decimal_dict = nullptr;                  // borrowed: the module's, when imported
  std::uint64_t decimal_version = 0;                 // its version when it last held the templates

  void ClearSys() {
    for (PyObject*& value : sys_values) Py_CLEAR(value);
    sys_version = 0;
  }
  void ClearThreading() {
    for (PyObject*& value : threading_values) Py_CLEAR(value);
    threading_imported = false;
    threading_dict = nullptr;
    threading_version = 0;
  }
  void ClearDecimal() {
    for (PyObject*& value : decimal_templates) Py_CLEAR(value);
    for (PyObject*& value : decimal_states) Py_CLEAR(value);
    decimal_imported = false;
    decimal_dict = nullptr;
    decimal_version = 0;
  }
  void Clear() {
    ClearSys();
    ClearThreading();
    ClearDecimal();
    modules_version = 0;
    threading_module = decimal_module = nullptr;
  }
};

constexpr const char* kBaselineKey = "dolsot.interpreter_state.v1";
std::atomic<std::uint64_t> generation{1};
struct BaselineCache {
  PyInterpreterState* interpreter = nullptr;
  Baseline* baseline = nullptr;
  std::uint64_t generation = 0;
};
BaselineCache cache;  // guarded by the GIL

void BaselineFinalized(PyObject* capsule) {
  generation.fetch_add(1);
  auto* baseline = static_cast<Baseline*>(PyCapsule_GetPointer(capsule, kBaselineKey));
  if (baseline == nullptr) return;
  baseline->Clear();
  Py_CLEAR(baseline->sys_dict);
  delete baseline;
}

// The interpreter's baseline (made on first use), or nullptr with an error set.
Baseline* CurrentBaseline() {
  PyInterpreterState* interpreter = PyInterpreterState_Get();
  const std::uint64_t now = generation.load(std::memory_order_acquire);
  if (cache.baseline != nullptr && cache.interpreter == interpreter && cache.generation == now) {
    return cache.baseline;
  }
  PyObject* state = PyInterpreterState_GetDict(interpreter);
  if (state == nullptr) {
    PyErr_SetString(PyExc_RuntimeError, "no interpreter state dict");
    return nullptr;
  }
  Baseline* baseline = nullptr;
  PyObject* capsule = PyDict_GetItemString(state, kBaselineKey);  // borrowed
  if (capsule != nullptr) {
    baseline = static_cast<Baseline*>(PyCapsule_GetPointer(capsule, kBaselineKey));
  } else {
    Ref sys(PyImport_ImportModule("sys"));
    if (!sys) return nullptr;
    auto made = new Baseline;
    made->sys_dict = Py_NewRef(PyModule_GetDict(sys.get()));
    Ref holder(PyCapsule_New(made, kBaselineKey, BaselineFinalized));
    if (!holder) {
      Py_DECREF(made->sys_dict);
      delete made;
      return nullptr;
    }
    if (PyDict_SetItemString(state, kBaselineKey, holder.get()) < 0) return nullptr;
    baseline = made;
  }
  if (baseline != nullptr) cache = BaselineCache{interpreter, baseline, now};
  return baseline;
}

// An imported module (new reference), or nullptr (no error) when it is not.
PyObject* ImportedModule(const InternedName& name) {
  PyObject* key = name.get();
  if (key == nullptr) {
    PyErr_Clear();
    return nullptr;
  }
  // sys.modules itself: PyImport_GetModule also asks the module's __spec__
  // whether it is still initializing (two attribute lookups, ~0.5 µs).
  PyObject* module = PyDict_GetItemWithError(PyImport_GetModuleDict(), key);
  if (module == nullptr) PyErr_Clear();
  return module != nullptr && PyModule_Check(module) ? Py_NewRef(module) : nullptr;
}

// The value of `key` in `dict` (new reference), or nullptr when absent.
PyObject* Lookup(PyObject* dict, const InternedName& name) {
  PyObject* key = name.get();
  PyObject* value = key != nullptr ? PyDict_GetItemWithError(dict, key) : nullptr;
  if (value == nullptr) PyErr_Clear();
  return Py_XNewRef(value);
}

// Puts `wanted` (nullptr: absent) back under `key` when something else is there.
void PutBack(PyObject* dict, const InternedName& name, PyObject* wanted) {
  PyObject* key = name.get();
  if (key == nullptr) return PyErr_Clear();
  PyObject* current = PyDict_GetItemWithError(dict, key);  // borrowed
  if (current == wanted) return;
  const int failed = wanted != nullptr ? PyDict_SetItem(dict, key, wanted)
                                       : (current != nullptr ? PyDict_DelItem(dict, key) : 0);
  if (failed < 0 || PyErr_Occurred()) PyErr_Clear();
}

double SwitchInterval(PyObject* sys_dict) {
#if PY_VERSION_HEX < 0x030D0000
  (void)sys_dict;
  return static_cast<double>(_PyEval_GetSwitchInterval()) / 1e6;
#else
  // 3.13 no longer exports the C getter: sys's own function.
  Ref get(Lookup(sys_dict, kGetSwitchInterval));
  Ref value(get ? PyObject_CallNoArgs(get.get()) : nullptr);
  double seconds = value ? PyFloat_AsDouble(value.get()) : -1.0;
  if (PyErr_Occurred()) PyErr_Clear();
  return seconds;
#endif
}

void SetSwitchInterval(PyObject* sys_dict, double seconds) {
#if PY_VERSION_HEX < 0x030D0000
  (void)sys_dict;
  _PyEval_SetSwitchInterval(static_cast<unsigned long>(seconds * 1e6 + 0.5));
#else
  Ref set(Lookup(sys_dict, kSetSwitchInterval));
  Ref value(PyFloat_FromDouble(seconds));
  Ref done(set && value ? PyObject_CallOneArg(set.get(), value.get()) : nullptr);
  if (!done) PyErr_Clear();
#endif
}

// A decimal context's state: its __reduce__ arguments (prec, rounding, Emin,
// Emax, capitals, clamp, flags, traps), a new reference or nullptr.
PyObject* DecimalState(PyObject* context) {
  PyObject* name = kReduce.get();
  Ref reduced(name != nullptr ? PyObject_CallMethodNoArgs(context, name) : nullptr);
  if (!reduced || !PyTuple_Check(reduced.get()) || PyTuple_GET_SIZE(reduced.get()) < 2) {
    PyErr_Clear();
    return nullptr;
  }
  return Py_NewRef(PyTuple_GET_ITEM(reduced.get(), 1));
}

// Re-initializes a decimal context in place (its type's own __init__).
void InitDecimalContext(PyObject* context, PyObject* args, PyObject* kwargs) {
  initproc init = Py_TYPE(context)->tp_init;
  if (init == nullptr || init(context, args, kwargs) < 0) PyErr_Clear();
}

// CPython's initial state of template `i`, for a cell that imported decimal.
void ResetDecimalTemplate(PyObject* module, PyObject* context, int i) {
  const TemplateDefaults& defaults = kDecimalDefaults[i];
  Ref traps(PyList_New(0));
  for (const char* trap : defaults.traps) {
    if (trap == nullptr || !traps) break;
    Ref signal(PyObject_GetAttrString(module, trap));
    if (!signal || PyList_Append(traps.get(), signal.get()) < 0) traps.reset(nullptr);
  }
  Ref empty(PyTuple_New(0));
  Ref kwargs(traps ? Py_BuildValue("{s:i,s:s,s:i,s:i,s:i,s:i,s:[],s:O}", "prec", defaults.prec,
                                   "rounding", defaults.rounding, "Emin", -999999, "Emax", 999999,
                                   "capitals", 1, "clamp", 0, "flags", "traps", traps.get())
                   : nullptr);
  if (empty && kwargs) InitDecimalContext(context, empty.get(), kwargs.get());
  PyErr_Clear();
}

// threading and decimal as sys.modules holds them now (borrowed, nullptr
// when not imported), looked up again only when sys.modules changed.
void FindModules(Baseline& baseline) {
  const std::uint64_t version = DictVersion(PyImport_GetModuleDict());
  if (version != 0 && version == baseline.modules_version) return;
  Ref threading(ImportedModule(kThreadingModule));
  Ref decimal(ImportedModule(kDecimalModule));
  baseline.threading_module = threading.get();
  baseline.decimal_module = decimal.get();
  baseline.modules_version = version;
}

void TakeBaseline(Baseline& baseline) {
  // The streams as dolsot routes them (a host's replacement is routed from
  // now on), so the baseline holds the routers, never a cell's own stream.
  (void)InstallCellIo();
  // Each part is read again only when its dict changed since it was last
  // known to hold the baseline (taken, or put back).
  const std::uint64_t sys_version = DictVersion(baseline.sys_dict);
  if (sys_version == 0 || sys_version != baseline.sys_version) {
    baseline.ClearSys();
    for (int i = 0; i < kSysCount; ++i) {
      baseline.sys_values[i] = Lookup(baseline.sys_dict, kSysNames[i]);
    }
    baseline.sys_version = sys_version;
  }
  baseline.recursion_limit = Py_GetRecursionLimit();
  baseline.switch_interval = SwitchInterval(baseline.sys_dict);
  FindModules(baseline);
  if (baseline.threading_module == nullptr) {
    baseline.ClearThreading();
  } else {
    PyObject* dict = PyModule_GetDict(baseline.threading_module);
    const std::uint64_t version = DictVersion(dict);
    if (!baseline.threading_imported || dict != baseline.threading_dict || version == 0 ||
        version != baseline.threading_version) {
      baseline.ClearThreading();
      baseline.threading_imported = true;
      baseline.threading_dict = dict;
      for (int i = 0; i < kThreadingCount; ++i) {
        baseline.threading_values[i] = Lookup(dict, kThreadingNames[i]);
      }
      baseline.threading_version = version;
    }
  }
  if (baseline.decimal_module == nullptr) {
    baseline.ClearDecimal();
    return;
  }
  PyObject* dict = PyModule_GetDict(baseline.decimal_module);
  const std::uint64_t version = DictVersion(dict);
  if (!baseline.decimal_imported || dict != baseline.decimal_dict || version == 0 ||
      version != baseline.decimal_version) {
    baseline.ClearDecimal();
    baseline.decimal_imported = true;
    baseline.decimal_dict = dict;
    for (int i = 0; i < kDecimalCount; ++i) {
      baseline.decimal_templates[i] = Lookup(dict, kDecimalNames[i]);
    }
    baseline.decimal_version = version;
  }
  // The templates' fields change in place, not in the dict: read every time.
  for (int i = 0; i < kDecimalCount; ++i) {
    PyObject* context = baseline.decimal_templates[i];
    Py_CLEAR(baseline.decimal_states[i]);
    baseline.decimal_raw[i] = context != nullptr && RawLayoutHolds(context);
    if (baseline.decimal_raw[i]) {
      ReadRaw(context, baseline.decimal_bytes[i]);
    } else if (context != nullptr) {
      baseline.decimal_states[i] = DecimalState(context);
    }
  }
}

void RestoreThreading(Baseline& baseline) {
  PyObject* module = baseline.threading_module;
  if (module == nullptr) return;
  PyObject* dict = PyModule_GetDict(module);
  if (baseline.threading_imported) {
    const std::uint64_t version = DictVersion(dict);
    if (dict == baseline.threading_dict && version != 0 && version == baseline.threading_version) {
      return;
    }
    for (int i = 0; i < kThreadingCount; ++i) {
      PutBack(dict, kThreadingNames[i], baseline.threading_values[i]);
    }
    baseline.threading_version = dict == baseline.threading_dict ? DictVersion(dict) : 0;
    return;
  }
  // Imported by a cell: threading's own initial values.
  Ref original(Lookup(dict, kOriginalExcepthook));
  PutBack(dict, kThreadingNames[0], Py_None);
  PutBack(dict, kThreadingNames[1], Py_None);
  if (original) PutBack(dict, kThreadingNames[2], original.get());
}

void RestoreDecimal(Baseline& baseline) {
  PyObject* module = baseline.decimal_module;
  if (module == nullptr) return;
  PyObject* dict = PyModule_GetDict(module);
  if (!baseline.decimal_imported) {
    for (int i = 0; i < kDecimalCount; ++i) {
      Ref context(Lookup(dict, kDecimalNames[i]));
      if (context) ResetDecimalTemplate(module, context.get(), i);
    }
    return;
  }
  const std::uint64_t version = DictVersion(dict);
  const bool same_dict = dict == baseline.decimal_dict;
  if (!same_dict || version == 0 || version != baseline.decimal_version) {
    for (int i = 0; i < kDecimalCount; ++i) {
      PutBack(dict, kDecimalNames[i], baseline.decimal_templates[i]);
    }
    baseline.decimal_version = same_dict ? DictVersion(dict) : 0;
  }
  for (int i = 0; i < kDecimalCount; ++i) {
    PyObject* context = baseline.decimal_templates[i];
    PyObject* state = baseline.decimal_states[i];
    if (context != nullptr && baseline.decimal_raw[i]) {
      RawDecimal now;
      ReadRaw(context, now);
      if (std::memcmp(now.bytes, baseline.decimal_bytes[i].bytes, kRawBytes) != 0) {
        WriteRaw(context, baseline.decimal_bytes[i]);
      }
      continue;
    }
    if (context == nullptr || state == nullptr) continue;
    Ref now(DecimalState(context));
    const int same = now ? PyObject_RichCompareBool(now.get(), state, Py_EQ) : 0;
    if (same != 1) InitDecimalContext(context, state, nullptr);
    PyErr_Clear();
  }
}

void RestoreBaseline(Baseline& baseline) {
  const std::uint64_t sys_version = DictVersion(baseline.sys_dict);
  if (sys_version == 0 || sys_version != baseline.sys_version) {
    for (int i = 0; i < kSysCount; ++i) {
      PutBack(baseline.sys_dict, kSysNames[i], baseline.sys_values[i]);
    }
    baseline.sys_version = DictVersion(baseline.sys_dict);
  }
  if (Py_GetRecursionLimit() != baseline.recursion_limit) {
    Py_SetRecursionLimit(baseline.recursion_limit);
  }
  if (SwitchInterval(baseline.sys_dict) != baseline.switch_interval) {
    SetSwitchInterval(baseline.sys_dict, baseline.switch_interval);
  }
  // A cell that imported threading or decimal changed sys.modules.
  FindModules(baseline);
  RestoreThreading(baseline);
  RestoreDecimal(baseline);
}

}  // namespace

namespace {

// Takes `count` out of the cells running, once (needs the GIL).
void Uncount(CellRunningCount& count, Baseline* baseline) {
  if (count.state != 1) return;
  count.state = 2;
  if (baseline == nullptr) return;
  if (baseline->running > 0) --baseline->running;
  for (auto it = baseline->counted.begin(); it != baseline->counted.end(); ++it) {
    if (*it == &count) {
      baseline->counted.erase(it);
      break;
    }
  }
}

}  // namespace

InterpreterStateGuard::InterpreterStateGuard(CellRunningCount* count)
    : count_(count != nullptr ? count : &own_count_) {
  PyThreadState* thread = PyThreadState_Get();
  trace_function_ = reinterpret_cast<void*>(thread->c_tracefunc);
  trace_object_ = Py_XNewRef(thread->c_traceobj);
  profile_function_ = reinterpret_cast<void*>(thread->c_profilefunc);
  profile_object_ = Py_XNewRef(thread->c_profileobj);
  Baseline* baseline = CurrentBaseline();
  if (baseline == nullptr) {
    PyErr_Clear();
    return;
  }
  // Cells declared late since the last guard started stop counting now.
  for (std::size_t i = baseline->counted.size(); i-- > 0;) {
    CellRunningCount* other = baseline->counted[i];
    if (other->late.load(std::memory_order_acquire)) Uncount(*other, baseline);
  }
  count_->state = 1;
  baseline->counted.push_back(count_);
  if (baseline->running++ == 0) TakeBaseline(*baseline);
  PyErr_Clear();
}


void InterpreterStateGuard::Detach(CellRunningCount& count) {
  if (count.state != 1) return;
  Baseline* baseline = CurrentBaseline();
  if (baseline == nullptr) PyErr_Clear();
  Uncount(count, baseline);
}

InterpreterStateGuard::~InterpreterStateGuard() {
  PyThreadState* thread = PyThreadState_Get();
  // First, before anything below can run Python (and so let a stopper in).
  const bool counted = count_->state != 0;
  Baseline* baseline = counted ? CurrentBaseline() : nullptr;
  if (counted) Uncount(*count_, baseline);
  auto trace = reinterpret_cast<Py_tracefunc>(trace_function_);
  auto profile = reinterpret_cast<Py_tracefunc>(profile_function_);
  if (thread->c_tracefunc != trace || thread->c_traceobj != trace_object_) {
    PyEval_SetTrace(trace, trace_object_);
  }
  if (thread->c_profilefunc != profile || thread->c_profileobj != profile_object_) {
    PyEval_SetProfile(profile, profile_object_);
  }
  Py_CLEAR(trace_object_);
  Py_CLEAR(profile_object_);
  if (baseline != nullptr) RestoreBaseline(*baseline);
  PyErr_Clear();
}

}  // namespace dolsot
