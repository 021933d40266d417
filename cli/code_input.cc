// Reading and checking a cell's code.
#include "cli/code_input.h"

#include <cstdio>

#include "cli/table.h"
#include "core/utf8.h"

namespace dolsot::cli {
namespace {

std::string TooLarge(std::size_t limit) {
  return "code is larger than " + std::to_string(limit) + " bytes (" + HumanSize(limit) +
         "), the largest cell dolsot accepts; put bulk data in a file and read it from the cell";
}

// "line L, column C" of byte `offset`, both 1-based.
std::string Where(std::string_view code, std::size_t offset) {
  std::size_t line = 1, line_start = 0;
  for (std::size_t i = 0; i < offset; ++i) {
    if (code[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return "line " + std::to_string(line) + ", column " + std::to_string(offset - line_start + 1);
}

std::string HexByte(unsigned char byte) {
  char buffer[8];
  std::snprintf(buffer, sizeof(buffer), "0x%02x", byte);
  return buffer;
}

}  // namespace

StatusOr<std::string> ReadCode(std::istream& in, std::size_t limit) {
  std::string code;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof(buffer)) || in.gcount() > 0) {
    code.append(buffer, static_cast<std::size_t>(in.gcount()));
    if (code.size() > limit) return InvalidArgument(TooLarge(limit));
  }
  // Bad input, like a cell that is too large: a usage error (exit 2).
  if (in.bad()) return InvalidArgument("could not read the code from stdin");
  return code;
}

Status CheckCode(std::string_view code, std::size_t limit) {
  if (code.size() > limit) return InvalidArgument(TooLarge(limit));
  if (auto nul = code.find('\0'); nul != std::string_view::npos) {
    return InvalidArgument("code contains a NUL byte at " + Where(code, nul) +
                           "; Python source cannot hold one");
  }
  if (auto bad = FindInvalidUtf8(code)) {
    return InvalidArgument("code is not valid UTF-8: byte " +
                           HexByte(static_cast<unsigned char>(code[*bad])) + " at " +
                           Where(code, *bad));
  }
  return Status::Ok();
}

}  // namespace dolsot::cli
