// Result: the outcome, set once, and the text an agent reads.
#include "core/result.h"

#include <algorithm>
#include <array>
#include <numeric>
#include <tuple>

#include "core/bounded_text.h"

namespace dolsot {
namespace {

std::string JoinNames(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += ", ";
    out += names[i];
  }
  return out;
}

void AppendBlock(std::string& out, const std::string& block) {
  if (block.empty()) return;
  if (!out.empty() && out.back() != '\n') out += '\n';
  out += block;
}

// Room kept for Text()'s closing note and the figures line (engine prose:
// under 400 characters with the parts' own cut lines).
constexpr std::size_t kTextNoteRoom = 260;

// Cuts the parts to share `budget` characters: parts smaller than an equal
// share stay whole and leave their unused room to the others (max-min
// fairness); a cut part keeps its head and tail. Returns the cut parts'
// names, comma-separated.
template <typename Parts>
std::string ShareOut(Parts& parts, std::size_t budget) {
  std::array<std::size_t, std::tuple_size_v<Parts>> order{};
  std::array<std::size_t, std::tuple_size_v<Parts>> sizes{};
  for (std::size_t i = 0; i < parts.size(); ++i) sizes[i] = CountCodePoints(parts[i].text);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return sizes[a] < sizes[b]; });
  std::array<bool, std::tuple_size_v<Parts>> cut{};
  std::size_t left = budget;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const std::size_t i = order[k];
    const std::size_t share = left / (order.size() - k);
    if (sizes[i] > share) {
      parts[i].text = KeepEnds(parts[i].text, share);
      cut[i] = true;
    }
    left -= std::min(sizes[i], share);
  }
  std::string cut_names;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (cut[i]) cut_names += std::string(cut_names.empty() ? "" : ", ") + parts[i].name;
  }
  return cut_names;
}

}  // namespace

const char* OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kOk: return "ok";
    case Outcome::kError: return "error";
    case Outcome::kTimeout: return "timeout";
    case Outcome::kInterrupted: return "interrupted";
    case Outcome::kCrashed: return "crashed";
    case Outcome::kRejected: return "rejected";
    case Outcome::kWorkerLost: return "worker_lost";
  }
  return "unknown";
}

const char* DefaultErrorType(Outcome outcome) {
  switch (outcome) {
    case Outcome::kOk: return nullptr;
    case Outcome::kError: return "Error";
    case Outcome::kTimeout: return "TimeoutError";
    case Outcome::kInterrupted: return "KeyboardInterrupt";
    case Outcome::kCrashed: return "WorkerError";
    case Outcome::kRejected: return "CellRejected";
    case Outcome::kWorkerLost: return "WorkerError";
  }
  return "Error";
}

Result Result::Failure(Outcome outcome, int exit_code, std::string error,
                       std::vector<std::string> held) {
  Result result;
  result.ok = false;
  result.SetOutcome(outcome);
  result.exit_code = exit_code;
  result.error = std::move(error);
  if (const char* type = DefaultErrorType(outcome)) result.error_type = type;
  result.held = std::move(held);
  return result;
}

bool Result::SetOutcome(Outcome outcome) {
  if (outcome_) return false;
  outcome_ = outcome;
  return true;
}

std::string Result::HeldBanner() const {
  return "session now holds: " + (held.empty() ? std::string("nothing") : JoinNames(held));
}

std::string Result::DroppedBanner() const {
  if (dropped.empty()) return "";
  return "not persisted (live in this session process only): " + JoinNames(dropped);
}

std::string Result::Text() const {
  struct Part {
    const char* name;
    std::string text;
  };
  std::array<Part, 5> parts{{{"stdout", stdout_text},
                             {"value", value.value_or("")},
                             {"error", error.value_or("")},
                             {"dropped names", DroppedBanner()},
                             {"held names", HeldBanner()}}};
  std::string figures;
  if (!images.empty()) {
    figures = "[" + std::to_string(images.size()) + " figure" + (images.size() == 1 ? "" : "s") +
              ": PNG in Result.images]";
  }
  std::size_t total = 0;
  for (const Part& part : parts) total += CountCodePoints(part.text) + 1;
  std::string note;
  if (max_text != 0 && total + figures.size() > max_text) {
    std::string cut_names = ShareOut(parts, max_text > kTextNoteRoom ? max_text - kTextNoteRoom : 0);
    note = "[text cut to " + std::to_string(max_text) + " characters (" + cut_names +
           "): each keeps its head and tail; the Result's fields hold more. To see the rest, "
           "print a slice, e.g. print(x[:50]), or len(x).]";
  }
  std::string out;
  for (const Part& part : parts) AppendBlock(out, part.text);
  AppendBlock(out, figures);
  AppendBlock(out, note);
  return out;
}

}  // namespace dolsot
