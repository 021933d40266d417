// BoundedText and CapOutput (see bounded_text.h).
#include "core/bounded_text.h"

#include <algorithm>
#include <string>

namespace dolsot {

std::size_t CountCodePoints(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char c : s) n += IsUtf8ContinuationByte(c) ? 0 : 1;
  return n;
}

namespace {

// Byte offset where the code point numbered `n` (0-based) starts; s.size()
// when s holds n code points or fewer.
std::size_t OffsetOfCodePoint(std::string_view s, std::size_t n) {
  std::size_t seen = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (IsUtf8ContinuationByte(static_cast<unsigned char>(s[i]))) continue;
    if (seen == n) return i;
    ++seen;
  }
  return s.size();
}

// Byte offset where the last `n` code points of `s` start.
std::size_t OffsetOfLastCodePoints(std::string_view s, std::size_t n) {
  if (n == 0) return s.size();
  std::size_t seen = 0;
  for (std::size_t i = s.size(); i > 0; --i) {
    if (IsUtf8ContinuationByte(static_cast<unsigned char>(s[i - 1]))) continue;
    if (++seen == n) return i - 1;
  }
  return 0;
}

std::string CutMarker(std::size_t cut, std::size_t total) {
  return "\n\n[... " + std::to_string(cut) + " of " + std::to_string(total) +
         " characters cut from the middle; keep large results in a variable and "
         "print only a slice of them ...]\n\n";
}

}  // namespace

// ---------------------------------------------------------------------------
// BoundedText

BoundedText::BoundedText(std::size_t max_chars)
    : max_chars_(max_chars), head_limit_(max_chars / 2), tail_limit_(max_chars - max_chars / 2) {}

void BoundedText::Append(std::string_view utf8, long long chars) {
  std::size_t n = chars < 0 ? CountCodePoints(utf8) : static_cast<std::size_t>(chars);
  total_chars_ += n;
  if (max_chars_ == 0) {
    head_.append(utf8);
    head_chars_ += n;
    return;
  }
  if (head_chars_ < head_limit_) {
    std::size_t take = std::min(n, head_limit_ - head_chars_);
    std::size_t offset = take == n ? utf8.size() : OffsetOfCodePoint(utf8, take);
    head_.append(utf8.substr(0, offset));
    head_chars_ += take;
    utf8.remove_prefix(offset);
    n -= take;
  }
  if (n == 0) return;
  if (n >= tail_limit_) {  // this chunk alone fills the tail
    tail_.assign(utf8.substr(OffsetOfLastCodePoints(utf8, tail_limit_)));
    tail_chars_ = tail_limit_;
    return;
  }
  tail_.append(utf8);
  tail_chars_ += n;
  if (tail_chars_ > 2 * tail_limit_) {  // trim now and then: amortized O(1)
    tail_.erase(0, OffsetOfLastCodePoints(tail_, tail_limit_));
    tail_chars_ = tail_limit_;
  }
}

std::string BoundedText::Text() const {
  if (!cut()) return head_ + tail_;
  std::string_view tail(tail_);
  tail.remove_prefix(OffsetOfLastCodePoints(tail, tail_limit_));
  return head_ + CutMarker(total_chars_ - head_chars_ - tail_limit_, total_chars_) +
         std::string(tail);
}

std::string KeepEnds(std::string_view text, std::size_t max_chars) {
  const std::size_t total = CountCodePoints(text);
  if (total <= max_chars) return std::string(text);
  std::string marker = "\n[... " + std::to_string(total) + " characters cut ...]\n";
  if (marker.size() + 2 > max_chars) return std::string(text.substr(0, OffsetOfCodePoint(text, max_chars)));
  const std::size_t room = max_chars - marker.size();
  const std::size_t head = room - room / 3;
  const std::size_t tail = room / 3;
  marker = "\n[... " + std::to_string(total - head - tail) + " characters cut ...]\n";
  return std::string(text.substr(0, OffsetOfCodePoint(text, head))) + marker +
         std::string(text.substr(OffsetOfLastCodePoints(text, tail)));
}

std::string CapOutput(std::string_view text, std::size_t max_chars) {
  BoundedText bounded(max_chars);
  bounded.Append(text);
  return bounded.Text();
}

}  // namespace dolsot
