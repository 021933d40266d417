// EnterWorkerSandbox / LockWorkerSandbox: the Python-aware half of the
// Sandbox (the kernel half is sandbox/sandbox_setup.h).
#include <Python.h>

#include "backend_subprocess/worker_sandbox.h"

#include <unistd.h>

#include "backend_subprocess/fork_guard.h"
#include "embedded/py_ref.h"
#include "sandbox/mount_plan.h"
#include "sandbox/sandbox_setup.h"

namespace dolsot {
namespace {

// What the interpreter needs to stay visible, and nothing of the host's own
// (docs/sandbox.md, "filesystem"): its prefixes and executable, its
// standard library, its site-packages with the package roots their .pth
// files put on sys.path, and each toolbox's own module or package. Other
// sys.path entries (a host script's folder, PYTHONPATH's directories) are
// not bound whole: projects keep .env files and keys there.
constexpr char kPythonPathsSource[] = R"(
def paths(toolboxes):
    import importlib.util, os, site, sys, sysconfig
    out = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix]
    try:
        out.append(os.path.realpath(sys.executable))
    except Exception:
        pass
    for key in ("stdlib", "platstdlib"):
        try:
            out.append(sysconfig.get_path(key))
        except Exception:
            pass
    sites = []
    for key in ("purelib", "platlib"):
        try:
            sites.append(sysconfig.get_path(key))
        except Exception:
            pass
    try:
        sites += site.getsitepackages()
    except Exception:
        pass
    if site.ENABLE_USER_SITE and site.USER_SITE:
        sites.append(site.USER_SITE)
    entries = [p for p in sys.path if isinstance(p, str) and p]
    # A site-packages directory put on the path by hand (PYTHONPATH).
    sites += [p for p in entries if os.path.basename(os.path.normpath(p)) in ("site-packages", "dist-packages")]
    on_path = {os.path.normcase(os.path.abspath(p)) for p in entries}
    for directory in sites:
        if not directory or os.path.normcase(os.path.abspath(directory)) not in on_path:
            continue
        out.append(directory)
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            if not name.endswith(".pth"):
                continue
            try:
                with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as f:
                    lines = f.read().splitlines()
            except OSError:
                continue
            for line in lines:
                line = line.strip()
                if not line or line.startswith("#") or line.startswith(("import ", "import\t")):
                    continue
                root = os.path.normcase(os.path.abspath(os.path.join(directory, line)))
                if root in on_path:
                    out.append(root)
    for entry in sys.path:
        # The standard library as a zip file (python3X.zip), when there is one.
        if (isinstance(entry, str) and entry.endswith(".zip") and os.path.isfile(entry)
                and any(entry.startswith(os.path.join(p, "")) for p in (sys.prefix, sys.base_prefix))):
            out.append(entry)
    # What the worker itself has imported (dolsot and what it needs) from
    # elsewhere: each top-level module's file or package directory.
    for name, module in list(sys.modules.items()):
        if "." in name or module is None:
            continue
        locations = getattr(module, "__path__", None)
        if locations is not None:
            try:
                out += [p for p in locations if isinstance(p, str) and os.path.isabs(p)]
            except Exception:
                pass
            continue
        origin = getattr(module, "__file__", None)
        if isinstance(origin, str) and os.path.isabs(origin):
            out.append(origin)
    for name in toolboxes:
        try:
            spec = importlib.util.find_spec(name.split('.')[0])
        except Exception:
            spec = None
        if spec is None:
            continue
        if spec.submodule_search_locations:
            out += [p for p in spec.submodule_search_locations if os.path.isabs(p)]
        elif spec.origin and os.path.isabs(spec.origin):
            out.append(spec.origin)
    return [p for p in out if isinstance(p, str) and p]
)";

// The raised exception's str(), taken off the error indicator.
std::string TakePythonError() {
  Ref value(TakeRaisedException());
  std::string text = "a Python error";
  if (value) {
    Ref s(PyObject_Str(value.get()));
    const char* utf8 = s ? PyUnicode_AsUTF8(s.get()) : nullptr;
    if (utf8 != nullptr) text = utf8;
  }
  PyErr_Clear();
  return text;
}

// Runs `source` (defining `function`) and calls it with `argument`.
PyObject* CallSnippet(const char* source, const char* function, PyObject* argument) {
  PyObject* globals = PyDict_New();
  if (globals == nullptr) return nullptr;
  PyDict_SetItemString(globals, "__builtins__", PyEval_GetBuiltins());
  PyObject* ran = PyRun_String(source, Py_file_input, globals, globals);
  PyObject* result = nullptr;
  if (ran != nullptr) {
    PyObject* fn = PyDict_GetItemString(globals, function);  // borrowed
    if (fn != nullptr) result = PyObject_CallOneArg(fn, argument);
  }
  Py_XDECREF(ran);
  Py_DECREF(globals);
  return result;
}

StatusOr<std::vector<std::string>> StringList(PyObject* list) {
  std::vector<std::string> out;
  if (list == nullptr || !PyList_Check(list)) {
    return InternalError("sandbox: listing the interpreter's paths: " + TakePythonError());
  }
  for (Py_ssize_t i = 0; i < PyList_Size(list); ++i) {
    PyObject* bytes = PyUnicode_EncodeFSDefault(PyList_GetItem(list, i));
    if (bytes == nullptr) {
      PyErr_Clear();
      continue;
    }
    out.emplace_back(PyBytes_AsString(bytes), static_cast<std::size_t>(PyBytes_Size(bytes)));
    Py_DECREF(bytes);
  }
  return out;
}

StatusOr<std::vector<std::string>> InterpreterPaths(const WorkerSettings& settings) {
  PyObject* names = PyList_New(0);
  for (const auto& [alias, module] : settings.toolboxes) {
    PyObject* name = PyUnicode_FromString(module.c_str());
    PyList_Append(names, name);
    Py_DECREF(name);
  }
  PyObject* list = CallSnippet(kPythonPathsSource, "paths", names);
  Py_DECREF(names);
  auto out = StringList(list);
  Py_XDECREF(list);
  return out;
}

// sys.path without the host's cwd, the scratch directory first.
Status PointSysPathAtScratch(const std::string& host_cwd) {
  PyObject* path = PySys_GetObject("path");  // borrowed
  if (path == nullptr || !PyList_Check(path)) return InternalError("sys.path is not a list");
  PyObject* fresh = PyList_New(0);
  PyObject* scratch = PyUnicode_FromString(kSandboxScratch);
  PyList_Append(fresh, scratch);
  Py_DECREF(scratch);
  for (Py_ssize_t i = 0; i < PyList_Size(path); ++i) {
    PyObject* entry = PyList_GetItem(path, i);
    const char* text = PyUnicode_Check(entry) ? PyUnicode_AsUTF8(entry) : nullptr;
    if (text == nullptr) PyErr_Clear();
    if (text != nullptr && (host_cwd == text || *text == '\0' || std::string(text) == kSandboxScratch)) continue;
    PyList_Append(fresh, entry);
  }
  int rc = PyList_SetSlice(path, 0, PyList_Size(path), fresh);
  Py_DECREF(fresh);
  if (rc != 0) return InternalError("sys.path: " + TakePythonError());
  return Status::Ok();
}

constexpr char kScrubSource[] = R"(
def scrub(spec):
    import os
    keep, extra = spec
    for name in list(os.environ):
        if name not in extra and not keep(name):
            del os.environ[name]
    os.environ.update(extra)
)";

pid_t ForkForSandbox() {
  fork_guard::EngineFork engine;
  PyOS_BeforeFork();
  pid_t pid = ::fork();
  int saved = errno;
  if (pid == 0) {
    PyOS_AfterFork_Child();
  } else {
    PyOS_AfterFork_Parent();
  }
  errno = saved;
  return pid;
}

PyObject* KeepsVariable(PyObject*, PyObject* name) {
  const char* text = PyUnicode_Check(name) ? PyUnicode_AsUTF8(name) : nullptr;
  if (text == nullptr) return nullptr;
  return PyBool_FromLong(SandboxKeepsVariable(text));
}

PyMethodDef kKeepsVariable = {"keep", KeepsVariable, METH_O, nullptr};

SandboxSetup SetupOf(const WorkerSettings& settings, std::vector<MountOp> plan) {
  SandboxSetup setup;
  setup.policy = *settings.sandbox;
  setup.plan = std::move(plan);
  setup.hidden = settings.sandbox_hidden;
  setup.hidden.push_back(settings.cwd);
  setup.fork_process = ForkForSandbox;
  return setup;
}

std::vector<MountOp> g_plan;  // the worker's plan, kept for LockWorkerSandbox
SessionWalls g_walls;         // what each keeper puts up (LockWorkerSandbox)
bool g_walled = false;

}  // namespace

StatusOr<SandboxReport> EnterWorkerSandbox(WorkerSettings& settings) {
  MountPlanInputs inputs;
  inputs.system_paths = BaseSystemPaths();
  auto python = InterpreterPaths(settings);
  if (!python.ok()) return python.status();
  inputs.system_paths.insert(inputs.system_paths.end(), python->begin(), python->end());
  inputs.mounts = settings.sandbox->mounts;
  inputs.hidden = settings.sandbox_hidden;
  inputs.hidden.push_back(settings.cwd);
  // The store's directories are sealed; the cwd (also among the hidden) is not.
  for (const std::string& h : settings.sandbox_hidden) {
    if (h != settings.cwd) inputs.sealed.push_back(h);
  }
  auto plan = PlanMounts(inputs, StatPathKind);
  if (!plan.ok()) return Status(plan.status().code(), "sandbox: " + plan.status().message());
  g_plan = *plan;
  auto report = EnterSandbox(SetupOf(settings, *plan));
  if (!report.ok()) return report.status();
  DOLSOT_RETURN_IF_ERROR(PointSysPathAtScratch(settings.cwd));
  settings.cwd = kSandboxScratch;
  return report;
}

Status LockWorkerSandbox(const WorkerSettings& settings, SandboxReport* report) {
  // The environment: the allow-list, HOME and TMPDIR at the scratch, the
  // policy's variables. (The host started the worker with no more than that
  // and the interpreter's own variables, which go here.)
  PyObject* keep = PyCFunction_New(&kKeepsVariable, nullptr);
  PyObject* extra = PyDict_New();
  auto set = [&](const std::string& name, const std::string& value) {
    PyObject* v = PyUnicode_DecodeFSDefaultAndSize(value.data(), value.size());
    if (v != nullptr) PyDict_SetItemString(extra, name.c_str(), v);
    Py_XDECREF(v);
  };
  set("HOME", kSandboxScratch);
  set("TMPDIR", kSandboxScratch);
  for (const auto& [name, value] : settings.sandbox->env) set(name, value);
  PyObject* spec = PyTuple_Pack(2, keep, extra);
  PyObject* done = CallSnippet(kScrubSource, "scrub", spec);
  Py_XDECREF(spec);
  Py_XDECREF(keep);
  Py_XDECREF(extra);
  if (done == nullptr) return InternalError("sandbox: scrubbing os.environ: " + TakePythonError());
  Py_DECREF(done);
  report->layers.push_back({"environment", true, "an allow-list (PATH, LANG, LC_*, TZ, TERM), "
                                                 "HOME and TMPDIR at the scratch, " +
                                                     std::to_string(settings.sandbox->env.size()) +
                                                     " variable(s) of the policy"});
  Status locked;
  Py_BEGIN_ALLOW_THREADS
  locked = LockSandbox(SetupOf(settings, g_plan), report, &g_walls);
  Py_END_ALLOW_THREADS
  g_walled = locked.ok();
  return locked;
}

const SessionWalls* WorkerSessionWalls() { return g_walled ? &g_walls : nullptr; }

}  // namespace dolsot
