// OutputSink: where a cell's output goes as it is written, besides the
// capture RunCell returns (cell_runner.h's CellRequest::sink).
#pragma once

#include <string_view>

namespace dolsot {

// Receives every chunk of stdout a cell writes, as it writes it (before the
// cap). A backend that must report output after killing a cell mirrors it here.
class OutputSink {
 public:
  virtual ~OutputSink() = default;
  virtual void Write(std::string_view text) = 0;
  // Receives each figure's PNG bytes as the cell shows it (before it joins
  // the Result's images). Default: ignored.
  virtual void Image(std::string_view /*png*/) {}
};

}  // namespace dolsot
