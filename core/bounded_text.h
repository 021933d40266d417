// BoundedText and CapOutput: the head and tail of a stream of UTF-8 text
// kept within a cap, in bounded memory. Pure C++ (no CPython): the Repl host
// and the CLI use it too.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "core/utf8.h"

namespace dolsot {

// Code points in `s` (known to be valid UTF-8).
std::size_t CountCodePoints(std::string_view s);

// Keeps the head and the tail of a stream of UTF-8 text within `max_chars`
// code points (0 = keep everything), in bounded memory however much is
// appended. Not thread-safe; needs no GIL.
class BoundedText {
 public:
  explicit BoundedText(std::size_t max_chars);
  // Appends `utf8`; `chars` is its length in code points when the caller
  // already knows it, or -1.
  void Append(std::string_view utf8, long long chars = -1);
  // The kept text; when something was cut, the head, a line saying how much
  // was cut (and to keep large results in a variable), then the tail.
  std::string Text() const;
  std::size_t total_chars() const { return total_chars_; }
  bool cut() const { return max_chars_ != 0 && total_chars_ > max_chars_; }

 private:
  std::size_t max_chars_;
  std::size_t head_limit_;
  std::size_t tail_limit_;
  std::string head_;
  std::size_t head_chars_ = 0;
  std::string tail_;
  std::size_t tail_chars_ = 0;
  std::size_t total_chars_ = 0;
};

// Keeps the head and tail of `text` within `max_chars` (0 = no cap), saying how
// much was cut and hinting to keep large results in a variable.
std::string CapOutput(std::string_view text, std::size_t max_chars);

// `text` when it holds at most `max_chars` code points; else its head and
// tail around a short line saying how many characters were cut, all within
// `max_chars` (just the head when even that line does not fit).
std::string KeepEnds(std::string_view text, std::size_t max_chars);

}  // namespace dolsot
