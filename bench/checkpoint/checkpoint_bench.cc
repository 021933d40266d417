// Benchmark of namespace checkpoints: SerializeNamespace/RestoreNamespace on 10 MB
// and 100 MB of plain state, against peers measured in the same run (a memcpy
// of the blob, pickle and dill of the whole namespace), plus the first-call
// cost with and without dill, each in a fresh process. Prints Markdown.
//
//   checkpoint_bench                 # the full table (about a minute)
//   checkpoint_bench --first-call plain|dill   # internal: one fresh-process sample
#include <pybind11/embed.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "backend_subprocess/checkpoint.h"

namespace py = pybind11;
using dolsot::RestoreNamespace;
using dolsot::SerializeNamespace;

namespace {

double Seconds(const std::function<void()>& body) {
  const auto start = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double Median(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

double MedianOf(int reps, const std::function<void()>& body) {
  std::vector<double> samples;
  for (int i = 0; i < reps; ++i) samples.push_back(Seconds(body));
  return Median(samples);
}

// The embedded interpreter starts without the venv: add <repo>/.venv's
// site-packages when dill is not otherwise importable.
void MakeDillImportable() {
  const std::string file = __FILE__;
  py::exec(
      "import importlib.util, os, sys\n"
      "if importlib.util.find_spec('dill') is None:\n"
      "    sys.path.append(os.path.join(REPO, '.venv', 'lib',\n"
      "        'python%d.%d' % sys.version_info[:2], 'site-packages'))\n",
      py::dict(py::arg("REPO") = file.substr(0, file.rfind("/bench/"))));
}

py::dict MainDict() { return py::module_::import("__main__").attr("__dict__"); }

void ClearMain() {
  py::exec(
      "for _k in [k for k in globals() if not (k.startswith('__') and k.endswith('__'))]:\n"
      "    del globals()[_k]\n"
      "globals().pop('_k', None)\n",
      MainDict());
}

// About `megabytes` of pickled state in __main__: half random bytes, a quarter
// a list of 32-bit ints, a quarter a dict of str -> int; or all bytes.
void BuildState(int megabytes, bool bytes_only) {
  ClearMain();
  py::dict scope;
  scope["MB"] = megabytes;
  scope["BYTES_ONLY"] = bytes_only;
  py::exec(
      "import os, random\n"
      "rng = random.Random(7)\n"
      "g = __import__('__main__').__dict__\n"
      "unit = 1 << 20\n"
      "if BYTES_ONLY:\n"
      "    g['payload'] = os.urandom(MB * unit)\n"
      "else:\n"
      "    g['payload'] = os.urandom(MB * unit // 2)\n"
      "    g['numbers'] = [rng.randrange(1 << 16, 1 << 31) for _ in range(MB * unit // 4 // 5)]\n"
      "    g['table'] = {'key%07d' % i: i for i in range(MB * unit // 4 // 17)}\n"
      "    g['config'] = {'name': 'run', 'steps': [1, 2, 3]}\n"
      "    g['note'] = 'hello'\n",
      scope);
}

struct Row {
  std::string label;
  double blob_mb;
  double serialize_s, restore_s, memcpy_s, pickle_dumps_s, pickle_loads_s, dill_dumps_s;
};

Row Measure(const std::string& label, int megabytes, bool bytes_only, int reps, bool with_dill) {
  BuildState(megabytes, bytes_only);
  Row row{label, 0, 0, 0, 0, 0, 0, -1};
  std::string blob = SerializeNamespace(MainDict().ptr(), {}).blob;
  row.blob_mb = static_cast<double>(blob.size()) / (1 << 20);
  row.serialize_s = MedianOf(reps, [&] { blob = SerializeNamespace(MainDict().ptr(), {}).blob; });
  std::string copy(blob.size(), '\0');
  row.memcpy_s = MedianOf(reps, [&] { std::memcpy(copy.data(), blob.data(), blob.size()); });
  // Peers: the whole namespace (minus dunders) as one pickle / one dill.
  py::object state = py::eval(
      "{k: v for k, v in globals().items() if not (k.startswith('__') and k.endswith('__'))}",
      MainDict());
  py::object pickle = py::module_::import("pickle");
  py::object whole;
  row.pickle_dumps_s = MedianOf(reps, [&] { whole = pickle.attr("dumps")(state, 5); });
  row.pickle_loads_s = MedianOf(reps, [&] { pickle.attr("loads")(whole); });
  if (with_dill) {
    py::object dill = py::module_::import("dill");
    row.dill_dumps_s = MedianOf(3, [&] { dill.attr("dumps")(state, 5); });
  }
  state = py::object();
  whole = py::object();
  std::vector<double> restores;
  for (int i = 0; i < reps; ++i) {
    ClearMain();
    restores.push_back(Seconds([&] { (void)RestoreNamespace(MainDict().ptr(), blob); }));
  }
  row.restore_s = Median(restores);
  ClearMain();
  return row;
}

void PrintRows(const std::vector<Row>& rows) {
  std::printf("| state | blob MB | serialize ms (MB/s) | restore ms (MB/s) | memcpy ms |"
              " pickle.dumps(all) ms | pickle.loads(all) ms | dill.dumps(all) ms |"
              " serialize / pickle.dumps | restore / pickle.loads |\n");
  std::printf("|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Row& r : rows) {
    char dill[32] = "n/a";
    if (r.dill_dumps_s >= 0) std::snprintf(dill, sizeof(dill), "%.0f", r.dill_dumps_s * 1e3);
    std::printf("| %s | %.1f | %.1f (%.0f) | %.1f (%.0f) | %.1f | %.1f | %.1f | %s | %.2f | %.2f |\n",
                r.label.c_str(), r.blob_mb, r.serialize_s * 1e3, r.blob_mb / r.serialize_s,
                r.restore_s * 1e3, r.blob_mb / r.restore_s, r.memcpy_s * 1e3,
                r.pickle_dumps_s * 1e3, r.pickle_loads_s * 1e3, dill,
                r.serialize_s / r.pickle_dumps_s, r.restore_s / r.pickle_loads_s);
  }
}

// One sample in this (fresh) process: the first SerializeNamespace of a small
// namespace, plain or with one cell-defined function (which imports dill).
int FirstCall(const std::string& kind) {
  py::scoped_interpreter interpreter;
  MakeDillImportable();
  py::exec("import os\nx = list(range(1000))\nd = {'a': 'b'}\n", MainDict());
  if (kind == "dill") py::exec("def f(v):\n    return v + 1\n", MainDict());
  dolsot::SerializedNamespace saved;
  const double seconds = Seconds([&] { saved = SerializeNamespace(MainDict().ptr(), {}); });
  const bool dill_loaded = py::module_::import("sys").attr("modules").contains("dill");
  if (!saved.dropped.empty() || dill_loaded != (kind == "dill")) {
    std::fprintf(stderr, "first-call %s: unexpected outcome (dill importable?)\n", kind.c_str());
    return 1;
  }
  std::printf("%.6f\n", seconds);
  return 0;
}

// Median over fresh processes of `self --first-call kind`.
double FirstCallMedian(const char* self, const char* kind, int runs) {
  std::vector<double> samples;
  const std::string command = std::string("'") + self + "' --first-call " + kind;
  for (int i = 0; i < runs; ++i) {
    FILE* child = popen(command.c_str(), "r");
    if (child == nullptr) return -1;
    double seconds = -1;
    if (std::fscanf(child, "%lf", &seconds) != 1) seconds = -1;
    if (pclose(child) != 0 || seconds < 0) return -1;
    samples.push_back(seconds);
  }
  return Median(samples);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--first-call") return FirstCall(argv[2]);
  const double plain = FirstCallMedian(argv[0], "plain", 7);
  const double with_dill = FirstCallMedian(argv[0], "dill", 7);
  std::printf("First SerializeNamespace in a fresh process (median of 7; small namespace):\n");
  std::printf("plain data: %.2f ms; plus one cell-defined function (imports dill): %.2f ms;"
              " ratio %.1fx\n\n", plain * 1e3, with_dill * 1e3, with_dill / plain);
  py::scoped_interpreter interpreter;
  MakeDillImportable();
  std::vector<Row> rows;
  rows.push_back(Measure("10 MB mixed", 10, false, 7, true));
  rows.push_back(Measure("100 MB mixed", 100, false, 5, false));
  rows.push_back(Measure("100 MB bytes", 100, true, 5, false));
  PrintRows(rows);
  return 0;
}
