// C++ host benchmark: RunCell called directly (the floor: the shared routine
// alone, on the caller's thread) against InProcessSession::Run (worker
// thread, live output mirror, deadline included), trivial cell, medians.
#include <pybind11/embed.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "backend_inprocess/in_process_session.h"
#include "embedded/cell_runner.h"

namespace py = pybind11;
using Clock = std::chrono::steady_clock;

template <typename F>
double MedianMicros(F&& f, int batches, int cells) {
  std::vector<double> per_cell;
  for (int b = 0; b < batches; ++b) {
    auto start = Clock::now();
    for (int i = 0; i < cells; ++i) f();
    per_cell.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count() / cells);
  }
  std::sort(per_cell.begin(), per_cell.end());
  return per_cell[per_cell.size() / 2];
}

int main(int argc, char** argv) {
  const int batches = argc > 1 ? std::atoi(argv[1]) : 9;
  const int cells = argc > 2 ? std::atoi(argv[2]) : 2000;
  py::scoped_interpreter interpreter;
  auto session = dolsot::InProcessSession::Create({});
  if (!session.ok()) {
    std::fprintf(stderr, "%s\n", session.status().ToString().c_str());
    return 1;
  }
  py::dict globals;
  dolsot::CellRequest request;
  request.code = "1 + 1";
  request.filename = "<cell>";
  double direct = MedianMicros([&] { dolsot::RunCell(globals.ptr(), request); }, batches, cells);
  double backend = MedianMicros([&] { (void)(*session)->Run("bench", "1 + 1", {}); }, batches, cells);
  std::printf("RunCell on the caller's thread : median %8.2f us/cell\n", direct);
  std::printf("InProcessSession::Run          : median %8.2f us/cell (%.2fx)\n", backend,
              backend / direct);
  (void)(*session)->Close();
  return 0;
}
