// FindNestedQuantifier: one pass over a regular expression with a stack of
// open groups (see regex_risk.h).
#include "sandbox/regex_risk.h"

#include <cstdint>
#include <string>
#include <vector>

namespace dolsot::sandbox {
namespace {

constexpr std::uint64_t kUnbounded = UINT64_MAX;

struct Group {
  std::size_t start = 0;
  bool atomic = false;       // (?>...): no backtracking into it from outside
  bool repeated = false;     // holds an item repeated a varying number of times (max >= 2)
  bool unbounded = false;    // holds an item repeated without bound
};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// A repeat at pattern[i] (`*`, `+`, `?`, `{m}`, `{m,}`, `{,n}`, `{m,n}`):
// its bounds and its length (with a lazy `?` or possessive `+`), or 0.
std::size_t ReadQuantifier(std::string_view p, std::size_t i, std::uint64_t& min,
                           std::uint64_t& max, bool& possessive) {
  std::size_t end = i;
  char c = p[i];
  if (c == '*' || c == '+') {
    min = c == '+' ? 1 : 0;
    max = kUnbounded;
    end = i + 1;
  } else if (c == '?') {
    min = 0;
    max = 1;
    end = i + 1;
  } else if (c == '{') {
    std::size_t j = i + 1;
    std::uint64_t low = 0, high = 0;
    bool has_low = false, has_high = false, comma = false;
    while (j < p.size() && IsDigit(p[j])) {
      low = low > 100'000'000 ? low : low * 10 + static_cast<std::uint64_t>(p[j] - '0');
      has_low = true;
      ++j;
    }
    if (j < p.size() && p[j] == ',') {
      comma = true;
      ++j;
      while (j < p.size() && IsDigit(p[j])) {
        high = high > 100'000'000 ? high : high * 10 + static_cast<std::uint64_t>(p[j] - '0');
        has_high = true;
        ++j;
      }
    }
    if (j >= p.size() || p[j] != '}' || (!has_low && !comma)) return 0;  // a literal `{`
    min = low;
    max = !comma ? low : has_high ? high : kUnbounded;
    end = j + 1;
  } else {
    return 0;
  }
  possessive = end < p.size() && p[end] == '+';
  if (end < p.size() && (p[end] == '?' || p[end] == '+')) ++end;
  return end - i;
}

// The end of a character class opened at p[i] == '['.
std::size_t SkipClass(std::string_view p, std::size_t i) {
  std::size_t j = i + 1;
  if (j < p.size() && p[j] == '^') ++j;
  if (j < p.size() && p[j] == ']') ++j;  // a leading `]` is literal
  while (j < p.size() && p[j] != ']') j += p[j] == '\\' ? 2 : 1;
  return j < p.size() ? j + 1 : p.size();
}

std::optional<std::size_t> Scan(std::string_view p) {
  std::vector<Group> open;
  open.push_back(Group{});  // the whole pattern
  // The last item: a group just closed (its flags) or an atom.
  bool last_item = false, last_group = false;
  Group closed;
  for (std::size_t i = 0; i < p.size();) {
    char c = p[i];
    std::uint64_t min = 0, max = 0;
    bool possessive = false;
    if (last_item) {
      if (std::size_t length = ReadQuantifier(p, i, min, max, possessive)) {
        Group& outer = open.back();
        if (last_group && !possessive && max >= 2 &&
            ((max == kUnbounded && closed.repeated) || closed.unbounded)) {
          return closed.start;
        }
        // Only a count that varies makes the match ambiguous (`a{2}` does not).
        if (!possessive && max >= 2 && max > min) {
          outer.repeated = true;
          if (max == kUnbounded) outer.unbounded = true;
        }
        last_item = false;
        i += length;
        continue;
      }
    }
    if (c == '\\') {
      i += 2;
      last_item = true;
      last_group = false;
    } else if (c == '[') {
      i = SkipClass(p, i);
      last_item = true;
      last_group = false;
    } else if (c == '(') {
      if (p.substr(i, 3) == "(?#") {  // a comment
        std::size_t end = p.find(')', i);
        i = end == std::string_view::npos ? p.size() : end + 1;
        continue;
      }
      Group group;
      group.start = i;
      group.atomic = p.substr(i, 3) == "(?>";
      open.push_back(group);
      last_item = false;
      ++i;
    } else if (c == ')') {
      if (open.size() > 1) {
        closed = open.back();
        open.pop_back();
        if (!closed.atomic) {  // what it holds counts for the group around it
          open.back().repeated = open.back().repeated || closed.repeated;
          open.back().unbounded = open.back().unbounded || closed.unbounded;
        } else {
          closed.repeated = closed.unbounded = false;
        }
        last_group = true;
      } else {
        last_group = false;  // unbalanced: re refuses the pattern
      }
      last_item = true;
      ++i;
    } else if (c == '|') {
      last_item = false;
      ++i;
    } else {
      last_item = true;
      last_group = false;
      ++i;
    }
  }
  return std::nullopt;
}

// The pattern as re.VERBOSE reads it: whitespace and `#` comments outside
// classes and escapes dropped. Offsets are not kept: the caller reports the
// literal.
std::string WithoutVerboseSpace(std::string_view p) {
  std::string out;
  for (std::size_t i = 0; i < p.size();) {
    char c = p[i];
    if (c == '\\') {
      out.append(p.substr(i, 2));
      i += 2;
    } else if (c == '[') {
      std::size_t end = SkipClass(p, i);
      out.append(p.substr(i, end - i));
      i = end;
    } else if (c == '#') {
      while (i < p.size() && p[i] != '\n') ++i;
    } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') {
      ++i;
    } else {
      out.push_back(c);
      ++i;
    }
  }
  return out;
}

}  // namespace

std::optional<std::size_t> FindNestedQuantifier(std::string_view pattern) {
  if (std::optional<std::size_t> found = Scan(pattern)) return found;
  if (pattern.find_first_of("# \t\n") == std::string_view::npos) return std::nullopt;
  if (Scan(WithoutVerboseSpace(pattern))) return 0;
  return std::nullopt;
}

}  // namespace dolsot::sandbox
