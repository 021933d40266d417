// LspConnection: LSP base-protocol framing over a non-blocking socket, with
// nlohmann-json for the messages (see lsp_connection.h).
#include "typecheck/lsp_connection.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>

#include <nlohmann/json.hpp>

namespace dolsot::typecheck {
namespace {

using nlohmann::json;

constexpr std::string_view kHeaderEnd = "\r\n\r\n";
constexpr std::string_view kLengthHeader = "content-length:";

// Milliseconds left before `deadline`, for poll (0 when it has passed).
int MillisLeft(Deadline deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
  if (left.count() <= 0) return 0;
  return left.count() > 60000 ? 60000 : static_cast<int>(left.count()) + 1;
}

// The Content-Length of a frame's header block, or nullopt when it has none
// or an unreadable one.
std::optional<std::size_t> ContentLength(std::string_view headers) {
  while (!headers.empty()) {
    std::size_t end = headers.find("\r\n");
    std::string_view line = headers.substr(0, end);
    headers = end == std::string_view::npos ? std::string_view() : headers.substr(end + 2);
    if (line.size() < kLengthHeader.size()) continue;
    bool match = std::equal(kLengthHeader.begin(), kLengthHeader.end(), line.begin(),
                            [](char want, char got) {
                              return want == (got >= 'A' && got <= 'Z' ? got - 'A' + 'a' : got);
                            });
    if (!match) continue;
    std::string_view value = line.substr(kLengthHeader.size());
    std::size_t first = value.find_first_not_of(" \t");
    std::size_t last = value.find_last_not_of(" \t");
    value = first == std::string_view::npos ? std::string_view()
                                             : value.substr(first, last - first + 1);
    std::size_t length = 0;
    auto [next, error] = std::from_chars(value.data(), value.data() + value.size(), length);
    if (error != std::errc() || next != value.data() + value.size()) return std::nullopt;
    return length;
  }
  return std::nullopt;
}

// The peer closed its end (however the socket reports it).
Status ServerExited() { return Status(ErrorCode::kUnavailable, "ty server exited"); }

json Message(std::string_view method, const json& params) {
  return {{"jsonrpc", "2.0"}, {"method", method}, {"params", params}};
}

}  // namespace

LspConnection::LspConnection(int fd) : fd_(fd) {
  if (fd_ >= 0) fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
}

LspConnection::~LspConnection() {
  if (fd_ >= 0) close(fd_);
}

Status LspConnection::Send(const json& message, Deadline deadline) {
  // Text that is not UTF-8 (a cell holding a lone surrogate) is sent with
  // U+FFFD in its place rather than refused: CPython refuses such a cell too.
  std::string body = message.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string frame = "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  std::size_t sent = 0;
  while (sent < frame.size()) {
    ssize_t n = send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) return ServerExited();
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return IoError("writing to ty server: " + std::string(std::strerror(errno)));
    }
    DOLSOT_RETURN_IF_ERROR(WaitFor(POLLOUT, deadline));
  }
  return Status::Ok();
}

Status LspConnection::WaitFor(short events, Deadline deadline) {
  pollfd fd{fd_, events, 0};
  while (true) {
    int wait_ms = MillisLeft(deadline);
    if (wait_ms == 0) {
      return Status(ErrorCode::kTimeout, "ty server did not answer before the cell's deadline");
    }
    int ready = poll(&fd, 1, wait_ms);
    if (ready > 0) return Status::Ok();
    if (ready < 0 && errno != EINTR) return IoError("poll: " + std::string(std::strerror(errno)));
  }
}

StatusOr<json> LspConnection::Receive(Deadline deadline) {
  while (true) {
    std::size_t header_end = inbox_.find(kHeaderEnd);
    if (header_end != std::string::npos) {
      std::optional<std::size_t> length =
          ContentLength(std::string_view(inbox_).substr(0, header_end));
      if (!length) return CorruptError("ty server sent a frame without a Content-Length");
      if (*length > kMaxLspMessageBytes) return CorruptError("ty server sent an oversized message");
      std::size_t body_start = header_end + kHeaderEnd.size();
      if (inbox_.size() - body_start >= *length) {
        std::string_view body = std::string_view(inbox_).substr(body_start, *length);
        json message = json::parse(body, nullptr, /*allow_exceptions=*/false);
        inbox_.erase(0, body_start + *length);
        if (message.is_discarded()) return CorruptError("ty server sent malformed JSON");
        return message;
      }
    } else if (inbox_.size() > kMaxLspMessageBytes) {
      return CorruptError("ty server sent an oversized frame header");
    }
    char buffer[65536];
    ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
    if (n > 0) {
      inbox_.append(buffer, static_cast<std::size_t>(n));
    } else if (n == 0 || errno == ECONNRESET) {
      return ServerExited();
    } else if (errno == EAGAIN || errno == EINTR) {
      DOLSOT_RETURN_IF_ERROR(WaitFor(POLLIN, deadline));
    } else {
      return IoError("reading from ty server: " + std::string(std::strerror(errno)));
    }
  }
}

Status LspConnection::Notify(std::string_view method, const json& params, Deadline deadline) {
  return Send(Message(method, params), deadline);
}

StatusOr<long> LspConnection::Request(std::string_view method, const json& params,
                                      Deadline deadline) {
  long id = next_id_++;
  json message = Message(method, params);
  message["id"] = id;
  DOLSOT_RETURN_IF_ERROR(Send(message, deadline));
  return id;
}

StatusOr<json> LspConnection::AwaitResult(long id, std::string_view method, Deadline deadline) {
  while (true) {
    StatusOr<json> message = Receive(deadline);
    if (!message.ok()) return message.status();
    if (!message->is_object()) continue;
    auto message_id = message->find("id");
    if (message->contains("method")) {
      if (message_id == message->end()) continue;  // a notification (logs, progress)
      DOLSOT_RETURN_IF_ERROR(
          Send({{"jsonrpc", "2.0"}, {"id", *message_id}, {"result", nullptr}}, deadline));
      continue;
    }
    if (message_id == message->end() || !message_id->is_number_integer() ||
        message_id->get<long>() != id) {
      continue;
    }
    if (auto error = message->find("error"); error != message->end()) {
      std::string text = "?";
      if (error->is_object()) {
        auto error_message = error->find("message");
        if (error_message != error->end() && error_message->is_string()) {
          text = error_message->get<std::string>();
        }
      }
      return InternalError("ty server refused " + std::string(method) + ": " + text);
    }
    auto result = message->find("result");
    return result == message->end() ? json() : json(*result);
  }
}

StatusOr<json> LspConnection::Call(std::string_view method, const json& params,
                                   Deadline deadline) {
  StatusOr<long> id = Request(method, params, deadline);
  if (!id.ok()) return id.status();
  return AwaitResult(*id, method, deadline);
}

}  // namespace dolsot::typecheck
