// Result: the outcome, set once, and the text an agent reads.
#include "core/result.h"

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
  std::string out = stdout_text;
  if (value) AppendBlock(out, *value);
  if (error) AppendBlock(out, *error);
  AppendBlock(out, DroppedBanner());
  AppendBlock(out, HeldBanner());
  return out;
}

}  // namespace dolsot
