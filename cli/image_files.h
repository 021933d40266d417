// ImageFiles: the CLI writes the figures a cell returned (Result::images,
// PNG bytes) to files in the working directory, so an agent that only reads
// the command's output can open them.
#pragma once

#include <fcntl.h>

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace dolsot::cli {

// Writes each PNG as "dolsot-<session>-<n>.png" in `directory`, n the first
// number not taken (a file is never overwritten, and two calls racing for a
// name each get their own). Returns the paths written, `directory` + "/" +
// name (just the name when `directory` is "."). Stops at the first file it
// cannot write: kIo naming the file and why; the files written stay.
// `directory` is relative to `base_fd` (the server writes a caller's figures
// into that caller's working directory, opened as `base_fd`, with ".").
StatusOr<std::vector<std::string>> WriteImageFiles(std::string_view directory,
                                                   std::string_view session_id,
                                                   const std::vector<std::string>& images,
                                                   int base_fd = AT_FDCWD);

}  // namespace dolsot::cli
