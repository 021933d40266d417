// The AST gate's floor: tree-sitter's parse (+ tree delete) alone, against the
// full path (parse + walk) and CheckCell (fast path when it applies), on the
// same source, interleaved, and CheckSessionCell (what a backend's gate runs)
// with a gate memory the input does not mention. Prints one line of medians
// in microseconds:
//   parse_us=<..> full_path_us=<..> check_cell_us=<..> session_cell_us=<..>
// Usage: gate_floor_bench <file> <runs>   (bench_gate.py --floor runs it)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "sandbox/check_cell.h"
#include "sandbox/tree_sitter_handles.h"

namespace {

double Median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values.empty() ? 0.0 : values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using dolsot::sandbox::Policy;
  if (argc != 3) {
    std::fprintf(stderr, "usage: gate_floor_bench <file> <runs>\n");
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  const std::string code = buffer.str();
  const int runs = std::max(1, std::atoi(argv[2]));
  Policy policy = dolsot::sandbox::DefaultPolicy();
  policy.AllowToolbox("tb", "mytools.api");  // as bench_gate.py's POLICY
  auto now = [] { return std::chrono::steady_clock::now(); };
  auto micros = [](auto d) { return std::chrono::duration<double, std::micro>(d).count(); };
  // A session's gate as the backends call it, with a memory of sealed names
  // the input does not mention (each costs one scan of the bytes).
  dolsot::GateMemory memory;
  memory.sealed_classes = {"LedgerAccount", "SealedCounter", "PrivateCache"};
  memory.sealed_methods = {"bump_counter", "refresh_cache", "apply_entry", "drain_queue"};
  std::vector<double> parse, full, check, session;
  for (int i = 0; i < runs + 2; ++i) {  // the first two rounds warm up
    auto t0 = now();
    dolsot::sandbox::TreePtr tree(ts_parser_parse_string(
        dolsot::sandbox::ThreadPythonParser(), nullptr, code.data(),
        static_cast<uint32_t>(code.size())));
    tree.reset();
    auto t1 = now();
    std::size_t full_findings = dolsot::sandbox::CheckCellFullPath(code, policy).size();
    auto t2 = now();
    std::size_t findings = dolsot::sandbox::CheckCell(code, policy).size();
    auto t3 = now();
    dolsot::GateMemory learned;
    std::size_t session_findings =
        dolsot::sandbox::CheckSessionCell(code, policy, memory, &learned).size();
    auto t4 = now();
    if (full_findings != 0 || findings != 0 || session_findings != 0) {
      std::fprintf(stderr, "the input must pass the gate\n");
      return 1;
    }
    if (i < 2) continue;
    parse.push_back(micros(t1 - t0));
    full.push_back(micros(t2 - t1));
    check.push_back(micros(t3 - t2));
    session.push_back(micros(t4 - t3));
  }
  std::printf("parse_us=%.1f full_path_us=%.1f check_cell_us=%.1f session_cell_us=%.1f\n",
              Median(parse), Median(full), Median(check), Median(session));
  return 0;
}
