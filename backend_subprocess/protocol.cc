// Framing, fd passing and payload encoding for the worker protocol. Every
// short read/write and EINTR is handled here and nowhere else.
#include "backend_subprocess/protocol.h"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/result_fields.h"
#include "core/spin_wait.h"

namespace dolsot::protocol {
namespace {

constexpr std::size_t kHeaderBytes = 8;

void PutLe32(char* p, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
std::uint32_t GetLe32(const char* p) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

std::string ErrnoText(const char* what, int err) {
  return std::string(what) + ": " + std::strerror(err);
}

bool PeerGone(int err) { return err == EPIPE || err == ECONNRESET || err == ENOTCONN; }

// Who wrote a message, over the reads that make it up.
class SenderTally {
 public:
  // One read, whose credentials named `pid` (0: none came with it).
  void Saw(pid_t pid) {
    if (!seen_) {
      pid_ = pid;
      seen_ = true;
    } else if (pid != pid_) {
      pid_ = 0;  // more than one writer: nobody is attested
    }
  }
  pid_t sender() const { return pid_ > 0 ? pid_ : 0; }

 private:
  bool seen_ = false;
  pid_t pid_ = 0;
};

// Sleeps until `fd` is ready for `events` (or hung up, or in error), keeping
// errno: for a socket that answered EAGAIN.
void AwaitReady(int fd, short events) {
  const int saved = errno;
  pollfd p{fd, events, 0};
  (void)::poll(&p, 1, -1);
  errno = saved;
}

// AwaitReady that also ends when `stop` (an eventfd; < 0: none) is readable:
// false then.
bool AwaitReadyUnlessStopped(int fd, short events, int stop) {
  if (stop < 0) {
    AwaitReady(fd, events);
    return true;
  }
  const int saved = errno;
  pollfd p[2] = {{fd, events, 0}, {stop, POLLIN, 0}};
  int ready;
  do {
    ready = ::poll(p, 2, -1);
  } while (ready < 0 && errno == EINTR);
  errno = saved;
  return p[1].revents == 0;
}

// Room for this many descriptors per read (a frame of ours carries two).
constexpr std::size_t kDescriptorRoom = 4;

// Reads exactly `n` bytes into `buf`, keeping passed descriptors in `frame`
// (fd, then fd2) and the attested writer of each read in `senders`; sets
// `*dropped` when the kernel dropped descriptors that came with a read
// because this process could not take them (out of file descriptors).
// Returns the number of bytes read before EOF (== n on success).
StatusOr<std::size_t> ReadFully(int sock, char* buf, std::size_t n, Deadline deadline,
                                Frame* frame, SenderTally* senders, bool* dropped) {
  std::size_t got = 0;
  // With a deadline, try a non-blocking read first and poll only when nothing
  // is there: when the data already arrived, that saves a poll.
  bool try_first = true;
  while (got < n) {
    int flags = MSG_CMSG_CLOEXEC;
    if (deadline) {
      if (try_first) {
        flags |= MSG_DONTWAIT;
      } else {
        DOLSOT_RETURN_IF_ERROR(WaitReadable(sock, deadline));
      }
    }
    iovec iov{buf + got, n - got};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred)) +
                                  CMSG_SPACE(sizeof(int) * kDescriptorRoom)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t r = ::recvmsg(sock, &msg, flags);
    if (r < 0) {
      if (errno == EAGAIN && (flags & MSG_DONTWAIT)) {
        try_first = false;
        continue;
      }
      if (errno == EAGAIN && !deadline) AwaitReady(sock, POLLIN);  // made non-blocking by the peer
      if (errno == EINTR || errno == EAGAIN) continue;
      if (errno == ECONNRESET) return got;
      return Status(ErrorCode::kIo, ErrnoText("reading a frame", errno));
    }
    pid_t writer = 0;
    std::size_t received = 0;  // descriptors installed by this read
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS &&
          c->cmsg_len >= CMSG_LEN(sizeof(ucred))) {
        ucred credentials;
        std::memcpy(&credentials, CMSG_DATA(c), sizeof credentials);
        writer = credentials.pid;
        continue;
      }
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      received += count;
      for (std::size_t i = 0; i < count; ++i) {
        int passed;
        std::memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
        if (!frame->fd.valid()) {
          frame->fd.Reset(passed);
        } else if (!frame->fd2.valid()) {
          frame->fd2.Reset(passed);
        } else {
          ::close(passed);  // more than two descriptors: not our protocol
        }
      }
    }
    // Truncated control data with room left for descriptors: the kernel
    // could not install one (EMFILE/ENFILE) and closed the rest. (More than
    // fit is a sender outside the protocol, caught by what reads the frame.)
    if ((msg.msg_flags & MSG_CTRUNC) != 0 && received < kDescriptorRoom) *dropped = true;
    if (r == 0) return got;
    senders->Saw(writer);
    got += static_cast<std::size_t>(r);
    try_first = true;
  }
  return got;
}

}  // namespace

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  int r;
  do {
    r = ::poll(&p, 1, 0);
  } while (r < 0 && errno == EINTR);
  return r > 0;
}

std::optional<Tag> PeekTag(int fd) {
  char tag[4];
  ssize_t got;
  do {
    got = ::recv(fd, tag, sizeof tag, MSG_PEEK | MSG_DONTWAIT);
  } while (got < 0 && errno == EINTR);
  if (got != static_cast<ssize_t>(sizeof tag)) return std::nullopt;
  return static_cast<Tag>(GetLe32(tag));
}

Status WaitReadable(int fd, Deadline deadline) {
  for (;;) {
    int timeout_ms = -1;
    if (deadline) {
      // Round up, so we never spin just before the deadline. (This once
      // truncated, so a deadline less than 1 ms past waited 1 ms more.)
      auto left = *deadline - Clock::now();
      if (left <= Clock::duration::zero()) return Status(ErrorCode::kTimeout, "deadline passed");
      timeout_ms = static_cast<int>(std::min<long long>(
          std::chrono::ceil<std::chrono::milliseconds>(left).count(), 1 << 30));
    }
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, timeout_ms);
    if (r > 0) return Status::Ok();
    if (r < 0 && errno != EINTR) return Status(ErrorCode::kIo, ErrnoText("poll", errno));
    if (r == 0 && deadline && Clock::now() >= *deadline) {
      return Status(ErrorCode::kTimeout, "deadline passed");
    }
  }
}

namespace {

// Sends one frame (header + the bytes of `slices`, together <= kMaxFrameBytes),
// with the descriptors (on a socket), or with write() on a pipe (`pipe`),
// waiting while it is full unless `stop` (an eventfd; < 0: none) is readable
// first.
Status WriteOneFrame(int fd, Tag tag, const std::string_view* slices, std::size_t count,
                     int pass_fd, int pass_fd2, bool pipe = false, int stop = -1) {
  std::size_t payload_size = 0;
  for (std::size_t i = 0; i < count; ++i) payload_size += slices[i].size();
  char header[kHeaderBytes];
  PutLe32(header, static_cast<std::uint32_t>(tag));
  PutLe32(header + 4, static_cast<std::uint32_t>(payload_size));
  const std::size_t total = kHeaderBytes + payload_size;
  std::size_t sent = 0;
  bool fd_sent = pass_fd < 0;
  while (sent < total) {
    constexpr int kMaxIov = 256;
    iovec iov[kMaxIov];
    int iovcnt = 0;
    std::size_t skip = sent;  // what went out already
    if (skip < kHeaderBytes) {
      iov[iovcnt++] = {header + skip, kHeaderBytes - skip};
      skip = 0;
    } else {
      skip -= kHeaderBytes;
    }
    for (std::size_t i = 0; i < count && iovcnt < kMaxIov; ++i) {
      if (slices[i].size() <= skip) {
        skip -= slices[i].size();
        continue;
      }
      iov[iovcnt++] = {const_cast<char*>(slices[i].data()) + skip, slices[i].size() - skip};
      skip = 0;
    }
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = iovcnt;
    alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))];
    if (!fd_sent) {
      int fds[2] = {pass_fd, pass_fd2};
      std::size_t fd_count = pass_fd2 >= 0 ? 2 : 1;
      std::memset(control, 0, sizeof(control));
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(fd_count * sizeof(int));
      cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(fd_count * sizeof(int));
      std::memcpy(CMSG_DATA(c), fds, fd_count * sizeof(int));
    }
    ssize_t r = pipe ? ::writev(fd, iov, iovcnt) : ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (r < 0) {
      // A socket a peer made non-blocking (it shares the file description)
      // is waited on, never spun on.
      if (errno == EAGAIN && !AwaitReadyUnlessStopped(fd, POLLOUT, stop)) {
        return Status(ErrorCode::kUnavailable, "stopped while the peer read nothing");
      }
      if (errno == EINTR || errno == EAGAIN) continue;
      if (PeerGone(errno)) return Status(ErrorCode::kUnavailable, "the peer process is gone");
      return Status(ErrorCode::kIo, ErrnoText("writing a frame", errno));
    }
    fd_sent = true;
    sent += static_cast<std::size_t>(r);
  }
  return Status::Ok();
}

Status WriteOneFrame(int fd, Tag tag, std::string_view payload, int pass_fd, int pass_fd2,
                     bool pipe = false, int stop = -1) {
  return WriteOneFrame(fd, tag, &payload, payload.empty() ? 0 : 1, pass_fd, pass_fd2, pipe, stop);
}

// The kMessageSize frame announcing a message of `size` bytes.
Status WriteMessageSize(int fd, std::uint64_t size, int pass_fd, int pass_fd2, bool pipe = false,
                        int stop = -1) {
  char bytes[8];
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((size >> (8 * i)) & 0xff);
  return WriteOneFrame(fd, Tag::kMessageSize, std::string_view(bytes, 8), pass_fd, pass_fd2, pipe,
                       stop);
}

Status OverCap(Tag tag, std::uint64_t size) {
  return Status(ErrorCode::kInvalidArgument,
                std::string("message ") + TagName(tag) + " of " + std::to_string(size) +
                    " bytes is over the protocol cap of " + std::to_string(kMaxMessageBytes) +
                    " bytes");
}

}  // namespace

Status WriteFrame(int fd, Tag tag, std::string_view payload, int pass_fd, int pass_fd2) {
  if (payload.size() > kMaxMessageBytes) return OverCap(tag, payload.size());
  // Descriptors ride with the first frame of the message.
  if (payload.size() > kMaxFrameBytes) {
    DOLSOT_RETURN_IF_ERROR(WriteMessageSize(fd, payload.size(), pass_fd, pass_fd2));
    pass_fd = pass_fd2 = -1;
  }
  while (payload.size() > kMaxFrameBytes) {
    DOLSOT_RETURN_IF_ERROR(
        WriteOneFrame(fd, Tag::kContinued, payload.substr(0, kMaxFrameBytes), pass_fd, pass_fd2));
    pass_fd = pass_fd2 = -1;
    payload.remove_prefix(kMaxFrameBytes);
  }
  return WriteOneFrame(fd, tag, payload, pass_fd, pass_fd2);
}

Status WriteFrameParts(int fd, Tag tag, const std::vector<std::string_view>& parts) {
  std::uint64_t total = 0;
  for (std::string_view part : parts) total += part.size();
  if (total > kMaxMessageBytes) return OverCap(tag, total);
  if (total > kMaxFrameBytes) DOLSOT_RETURN_IF_ERROR(WriteMessageSize(fd, total, -1, -1));
  std::vector<std::string_view> frame;  // this frame's slices of the parts
  std::size_t in_frame = 0;
  std::uint64_t left = total;  // not yet in a frame
  for (std::string_view part : parts) {
    while (!part.empty()) {
      const std::size_t take = std::min<std::size_t>(part.size(), kMaxFrameBytes - in_frame);
      frame.push_back(part.substr(0, take));
      part.remove_prefix(take);
      in_frame += take;
      left -= take;
      if (in_frame == kMaxFrameBytes && left > 0) {  // a full part, and more follows
        DOLSOT_RETURN_IF_ERROR(
            WriteOneFrame(fd, Tag::kContinued, frame.data(), frame.size(), -1, -1));
        frame.clear();
        in_frame = 0;
      }
    }
  }
  return WriteOneFrame(fd, tag, frame.data(), frame.size(), -1, -1);
}

Status WritePipeFrame(int fd, Tag tag, std::string_view payload, int stop_fd, bool ignored) {
  if (payload.size() > kMaxMessageBytes) return WriteFrame(fd, tag, payload);  // the same refusal
  // A pipe whose reader is gone raises SIGPIPE, which the process may not
  // ignore: blocked on this thread meanwhile, and taken back if raised.
  std::optional<ScopedPipeSignalBlock> block;
  if (!ignored) block.emplace();
  Status written = Status::Ok();
  if (payload.size() > kMaxFrameBytes) {
    written = WriteMessageSize(fd, payload.size(), -1, -1, /*pipe=*/true, stop_fd);
  }
  while (written.ok() && payload.size() > kMaxFrameBytes) {
    written = WriteOneFrame(fd, Tag::kContinued, payload.substr(0, kMaxFrameBytes), -1, -1,
                            /*pipe=*/true, stop_fd);
    payload.remove_prefix(kMaxFrameBytes);
  }
  if (written.ok()) written = WriteOneFrame(fd, tag, payload, -1, -1, /*pipe=*/true, stop_fd);
  return written;
}

namespace {

// Reserves room for a message announced as `size` bytes, with room for a
// reader to append a little without moving it (the host's gate memory,
// appended to a checkpoint's blob), advised for transparent huge pages when
// it is large (a 2 MiB fault instead of 512 small ones). Only the pages the
// bytes reach are ever touched. A reservation the system refuses is
// skipped: the message then grows as it arrives.
void ReserveForMessage(std::string& buffer, std::uint64_t size) {
  constexpr std::uint64_t kRoomToAppend = 64 << 10;
  try {
    buffer.reserve(static_cast<std::size_t>(size + kRoomToAppend));
  } catch (const std::exception&) {
    return;
  }
#ifdef MADV_HUGEPAGE
  // Only where malloc maps the buffer on its own (above glibc's largest mmap
  // threshold, 32 MiB): advice on its heap would outlive the buffer.
  if (buffer.capacity() < (std::size_t{32} << 20)) return;
  constexpr std::uintptr_t kHuge = std::uintptr_t{2} << 20;
  const auto begin = reinterpret_cast<std::uintptr_t>(buffer.data());
  const std::uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
  const std::uintptr_t last = (begin + buffer.capacity()) & ~(kHuge - 1);
  if (last > first) (void)::madvise(reinterpret_cast<void*>(first), last - first, MADV_HUGEPAGE);
#endif
}

// One whole message (its kContinued frames joined) into `frame`, its bytes
// from `read(to, n)`: StatusOr<size_t>, short only at EOF. The parts are read
// into one buffer, reserved once when the message was announced.
template <typename Read>
Status ReadMessageInto(Frame& frame, Read&& read) {
  std::string joined;  // the message so far, once it has more than one frame
  bool announced = false;
  bool continued = false;  // a kContinued frame came
  std::uint64_t total = 0;
  for (;;) {
    char header[kHeaderBytes];
    auto got = read(header, kHeaderBytes);
    if (!got.ok()) return got.status();
    const bool started = announced || continued;
    if (*got == 0 && !started) return Status(ErrorCode::kUnavailable, "the peer process is gone");
    if (*got < kHeaderBytes) {
      return CorruptError(!started ? std::string("truncated frame header: the peer died mid-frame")
                                   : "truncated message: the peer died after " +
                                         std::to_string(total) + " bytes of it");
    }
    auto tag = static_cast<Tag>(GetLe32(header));
    std::uint32_t length = GetLe32(header + 4);
    if (length > kMaxFrameBytes) {
      return CorruptError(std::string("frame ") + TagName(tag) + " claims " +
                          std::to_string(length) + " bytes, over the per-frame cap of " +
                          std::to_string(kMaxFrameBytes));
    }
    if (total + length > kMaxMessageBytes) {
      return CorruptError("a message of over " + std::to_string(kMaxMessageBytes) +
                          " bytes: over the protocol cap");
    }
    if (tag == Tag::kMessageSize) {
      char size[8];
      if (started || length != sizeof(size)) {
        return CorruptError("a MESSAGE_SIZE frame inside a message, or not of 8 bytes");
      }
      got = read(size, sizeof(size));
      if (!got.ok()) return got.status();
      if (*got < sizeof(size)) return CorruptError("truncated frame MESSAGE_SIZE");
      std::uint64_t announced_size = 0;
      for (int i = 7; i >= 0; --i) {
        announced_size = (announced_size << 8) | static_cast<unsigned char>(size[i]);
      }
      if (announced_size > kMaxMessageBytes) {
        return CorruptError("a message announced as " + std::to_string(announced_size) +
                            " bytes: over the protocol cap");
      }
      ReserveForMessage(joined, announced_size);
      announced = true;
      continue;
    }
    const bool last = tag != Tag::kContinued;
    if (last && !started) {
      // A message of one frame: its own buffer, sized for what it claims (at
      // most kMaxFrameBytes ahead of its bytes).
      std::string payload(length, '\0');
      if (length > 0) {
        got = read(payload.data(), length);
        if (!got.ok()) return got.status();
        if (*got < length) {
          return CorruptError(std::string("truncated frame ") + TagName(tag) + ": got " +
                              std::to_string(*got) + " of " + std::to_string(length) + " bytes");
        }
      }
      frame.tag = tag;
      frame.payload = std::move(payload);
      return Status::Ok();
    }
    continued = true;
    const std::size_t at = joined.size();
    joined.resize(at + length);  // within the reservation, or grown as it arrives
    if (length > 0) {
      got = read(joined.data() + at, length);
      if (!got.ok()) return got.status();
      if (*got < length) {
        return CorruptError(std::string("truncated frame ") + TagName(tag) + ": got " +
                            std::to_string(*got) + " of " + std::to_string(length) + " bytes");
      }
    }
    total += length;
    if (last) {
      // A claim far above what came: its reservation is not kept with it.
      if (joined.capacity() - joined.size() > joined.size() / 2 + (std::size_t{1} << 20)) {
        joined.shrink_to_fit();
      }
      frame.tag = tag;
      frame.payload = std::move(joined);
      return Status::Ok();
    }
  }
}

}  // namespace

StatusOr<Frame> ReadFrame(int fd, Deadline deadline) {
  Frame frame;
  SenderTally senders;
  bool dropped = false;
  DOLSOT_RETURN_IF_ERROR(ReadMessageInto(frame, [&](char* to, std::size_t n) {
    return ReadFully(fd, to, n, deadline, &frame, &senders, &dropped);
  }));
  if (dropped) {
    // Read whole, so the stream stays in step; what it carried is gone.
    rlimit limit{};
    std::string cap = "?";
    if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
      cap = std::to_string(limit.rlim_cur);
    }
    return Status(ErrorCode::kIo,
                  std::string(kDescriptorsDropped) + " (frame " + TagName(frame.tag) +
                      "): this process is out of file descriptors (RLIMIT_NOFILE " + cap +
                      "; a Repl's host holds two for each live session): raise the limit "
                      "(ulimit -n) or lower max_live_sessions");
  }
  frame.sender = senders.sender();
  return frame;
}

bool DescriptorsDropped(const Status& status) {
  return status.code() == ErrorCode::kIo &&
         std::string_view(status.message()).substr(0, kDescriptorsDropped.size()) ==
             kDescriptorsDropped;
}

StatusOr<Frame> BufferedFrameReader::Read(int fd, int stop_fd) {
  Frame frame;
  DOLSOT_RETURN_IF_ERROR(ReadMessageInto(
      frame, [&](char* to, std::size_t n) { return Take(fd, to, n, stop_fd); }));
  return frame;
}

StatusOr<std::size_t> BufferedFrameReader::Take(int fd, char* to, std::size_t n, int stop_fd) {
  std::size_t got = 0;
  while (got < n) {
    if (start_ < end_) {
      const std::size_t k = std::min(n - got, end_ - start_);
      std::memcpy(to + got, buffer_.get() + start_, k);
      start_ += k;
      got += k;
      continue;
    }
    start_ = end_ = 0;
    // A long read goes straight to its destination; a short one takes what
    // has come, up to a chunk (the rest of a small frame with its header).
    const bool direct = n - got >= kChunk;
    if (!direct && !buffer_) buffer_.reset(new char[kChunk]);  // not zeroed: only read bytes are taken
    // read(), not recv(): the stream may be a pipe.
    ssize_t r = direct ? ::read(fd, to + got, n - got) : ::read(fd, buffer_.get(), kChunk);
    if (!direct) end_ = r > 0 ? static_cast<std::size_t>(r) : 0;
    if (r < 0) {
      // Non-blocking (made so by the peer, or by the reader that owns
      // `stop_fd`): waited on, never spun on.
      if (errno == EAGAIN && !AwaitReadyUnlessStopped(fd, POLLIN, stop_fd)) {
        return Status(ErrorCode::kUnavailable, "stopped in the middle of a frame");
      }
      if (errno == EINTR || errno == EAGAIN) continue;
      if (errno == ECONNRESET) return got;
      return Status(ErrorCode::kIo, ErrnoText("reading a frame", errno));
    }
    if (r == 0) return got;
    if (direct) got += static_cast<std::size_t>(r);
  }
  return got;
}

Status AttestSenders(int socket) {
  int on = 1;
  if (::setsockopt(socket, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0) {
    return Status(ErrorCode::kIo, ErrnoText("setsockopt(SO_PASSCRED)", errno));
  }
  return Status::Ok();
}

StatusOr<std::pair<UniqueFd, UniqueFd>> SocketPair() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return Status(ErrorCode::kIo, ErrnoText("socketpair", errno));
  }
  return std::make_pair(UniqueFd(sv[0]), UniqueFd(sv[1]));
}

// ------------------------------------------------------------ payloads

PayloadWriter& PayloadWriter::U8(std::uint8_t v) {
  out_.push_back(static_cast<char>(v));
  return *this;
}
PayloadWriter& PayloadWriter::U32(std::uint32_t v) {
  char b[4];
  PutLe32(b, v);
  out_.append(b, 4);
  return *this;
}
PayloadWriter& PayloadWriter::U64(std::uint64_t v) {
  U32(static_cast<std::uint32_t>(v & 0xffffffffu));
  return U32(static_cast<std::uint32_t>(v >> 32));
}
PayloadWriter& PayloadWriter::F64(double v) {
  std::uint64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  return U64(bits);
}
PayloadWriter& PayloadWriter::Str(std::string_view s) {
  U32(static_cast<std::uint32_t>(s.size()));
  out_.append(s.data(), s.size());
  return *this;
}
PayloadWriter& PayloadWriter::Strs(const std::vector<std::string>& list) {
  U32(static_cast<std::uint32_t>(list.size()));
  for (const auto& s : list) Str(s);
  return *this;
}
PayloadWriter& PayloadWriter::OptStr(const std::optional<std::string>& s) {
  U8(s.has_value() ? 1 : 0);
  if (s) Str(*s);
  return *this;
}

bool PayloadReader::Take(std::size_t n, const char** at) {
  if (failed_ || n > data_.size() - pos_) {
    failed_ = true;
    return false;
  }
  *at = data_.data() + pos_;
  pos_ += n;
  return true;
}
std::uint8_t PayloadReader::U8() {
  const char* p;
  return Take(1, &p) ? static_cast<std::uint8_t>(*p) : 0;
}
std::uint32_t PayloadReader::U32() {
  const char* p;
  return Take(4, &p) ? GetLe32(p) : 0;
}
std::uint64_t PayloadReader::U64() {
  std::uint64_t lo = U32();
  std::uint64_t hi = U32();
  return lo | (hi << 32);
}
double PayloadReader::F64() {
  std::uint64_t bits = U64();
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}
std::string_view PayloadReader::StrView() {
  std::uint32_t n = U32();
  const char* p;
  if (!Take(n, &p)) return {};
  return {p, n};
}
std::string PayloadReader::Str() { return std::string(StrView()); }
std::vector<std::string> PayloadReader::Strs() {
  std::uint32_t n = U32();
  std::vector<std::string> out;
  // Each string needs at least its 4-byte length: reject absurd counts early.
  if (failed_ || n > (data_.size() - pos_) / 4) {
    failed_ = true;
    return out;
  }
  out.reserve(n);
  for (std::uint32_t i = 0; i < n && !failed_; ++i) out.push_back(Str());
  return out;
}
std::optional<std::string> PayloadReader::OptStr() {
  std::uint8_t has = U8();
  if (has == 0) return std::nullopt;
  if (has != 1) failed_ = true;
  return Str();
}
Status PayloadReader::Finish(const char* what) const {
  if (failed_) return CorruptError(std::string("malformed ") + what + " payload (truncated)");
  if (pos_ != data_.size()) {
    return CorruptError(std::string("malformed ") + what + " payload (" +
                        std::to_string(data_.size() - pos_) + " trailing bytes)");
  }
  return Status::Ok();
}

void WriteBindings(PayloadWriter& w, const Bindings& bindings) {
  w.U64(bindings.cells_run).Strs(bindings.names).Strs(bindings.values);
}

StatusOr<Bindings> ReadBindings(PayloadReader& r) {
  Bindings bindings;
  bindings.cells_run = r.U64();
  bindings.names = r.Strs();
  bindings.values = r.Strs();
  if (bindings.names.size() != bindings.values.size()) {
    return CorruptError("bindings: " + std::to_string(bindings.names.size()) + " names, " +
                        std::to_string(bindings.values.size()) + " values");
  }
  for (const std::string& name : bindings.names) {
    if (name.empty() || name.find('\0') != std::string::npos) {
      return CorruptError("bindings: a name that is empty or holds a NUL byte");
    }
  }
  return bindings;
}

void WriteBaseDigests(PayloadWriter& w, const BaseDigests& digests) {
  w.U64(digests.base.size).U32(digests.base.fingerprint);
  w.U32(static_cast<std::uint32_t>(digests.entries.size()));
  for (const auto& [name, digest] : digests.entries) w.Str(name).U64(digest.low).U64(digest.high);
}

StatusOr<BaseDigests> ReadBaseDigests(PayloadReader& r) {
  BaseDigests digests;
  digests.base.size = r.U64();
  digests.base.fingerprint = r.U32();
  const std::uint32_t count = r.U32();
  for (std::uint32_t i = 0; i < count; ++i) {
    std::string name = r.Str();
    Digest128 digest;
    digest.low = r.U64();
    digest.high = r.U64();
    if (r.failed()) break;  // ran out: the caller's Finish reports it
    if (name.empty() || name.find('\0') != std::string::npos) {
      return CorruptError("base digests: a name that is empty or holds a NUL byte");
    }
    digests.entries.emplace(std::move(name), digest);
  }
  return digests;
}

// RESULT's fields are core/result_fields.h's kResultWireFields, in order; a
// field the table gains and these switches miss does not compile.
#pragma GCC diagnostic push
#pragma GCC diagnostic error "-Wswitch"

void WriteResult(PayloadWriter& w, const Result& r) {
  for (ResultField field : kResultWireFields) {
    switch (field) {
      case ResultField::kOk: w.U8(r.ok ? 1 : 0); break;
      case ResultField::kValue: w.OptStr(r.value); break;
      case ResultField::kStdout: w.Str(r.stdout_text); break;
      case ResultField::kError: w.OptStr(r.error); break;
      case ResultField::kExitCode: w.I32(r.exit_code); break;
      case ResultField::kHeld: w.Strs(r.held); break;
      case ResultField::kDropped: w.Strs(r.dropped); break;
      case ResultField::kErrorType: w.OptStr(r.error_type); break;
      case ResultField::kReturned:
        w.OptStr(r.returned ? std::optional<std::string>(r.returned->pickle) : std::nullopt);
        break;
      case ResultField::kImages: w.Strs(r.images); break;
      case ResultField::kOutcome:  // kResultNotOnWire
      case ResultField::kSaveError:
      case ResultField::kMaxText:
      case ResultField::kText: break;
    }
  }
}

Result ReadResult(PayloadReader& in) {
  Result r;
  for (ResultField field : kResultWireFields) {
    switch (field) {
      case ResultField::kOk: r.ok = in.U8() != 0; break;
      case ResultField::kValue: r.value = in.OptStr(); break;
      case ResultField::kStdout: r.stdout_text = in.Str(); break;
      case ResultField::kError: r.error = in.OptStr(); break;
      case ResultField::kExitCode: r.exit_code = in.I32(); break;
      case ResultField::kHeld: r.held = in.Strs(); break;
      case ResultField::kDropped: r.dropped = in.Strs(); break;
      case ResultField::kErrorType: r.error_type = in.OptStr(); break;
      case ResultField::kReturned:
        if (std::optional<std::string> returned = in.OptStr()) {
          r.returned.emplace();
          r.returned->pickle = std::move(*returned);
        }
        break;
      case ResultField::kImages: r.images = in.Strs(); break;
      case ResultField::kOutcome:  // kResultNotOnWire
      case ResultField::kSaveError:
      case ResultField::kMaxText:
      case ResultField::kText: break;
    }
  }
  return r;
}

#pragma GCC diagnostic pop

std::string ToolCallPayload(std::uint64_t id, std::string_view name, std::string_view arguments) {
  PayloadWriter w;
  w.U64(id).Str(name).Str(arguments).U64(static_cast<std::uint64_t>(SpinNowNanos()));
  return w.Take();
}

std::string ToolReplyPayload(std::uint64_t id, const ToolReply& reply) {
  PayloadWriter w;
  w.U64(id).U8(reply.ok ? 1 : 0).Str(reply.payload).U64(static_cast<std::uint64_t>(SpinNowNanos()));
  return w.Take();
}

StatusOr<ToolCallMessage> ReadToolCall(std::string_view payload) {
  PayloadReader r(payload);
  ToolCallMessage m;
  m.id = r.U64();
  m.call.name = r.Str();
  m.call.arguments = r.Str();
  m.sent_at = static_cast<std::int64_t>(r.U64());
  DOLSOT_RETURN_IF_ERROR(r.Finish("TOOL_CALL"));
  return m;
}

StatusOr<ToolReplyMessage> ReadToolReply(std::string_view payload) {
  PayloadReader r(payload);
  ToolReplyMessage m;
  m.id = r.U64();
  m.reply.ok = r.U8() != 0;
  m.reply.payload = r.Str();
  m.sent_at = static_cast<std::int64_t>(r.U64());
  DOLSOT_RETURN_IF_ERROR(r.Finish("TOOL_REPLY"));
  return m;
}

const char* TagName(Tag tag) {
  switch (tag) {
    case Tag::kHello: return "HELLO";
    case Tag::kOpen: return "OPEN";
    case Tag::kShutdown: return "SHUTDOWN";
    case Tag::kHelloOk: return "HELLO_OK";
    case Tag::kHelloError: return "HELLO_ERROR";
    case Tag::kOpened: return "OPENED";
    case Tag::kImporting: return "IMPORTING";
    case Tag::kExitStatus: return "EXIT_STATUS";
    case Tag::kExitStatusReply: return "EXIT_STATUS_REPLY";
    case Tag::kLoad: return "LOAD";
    case Tag::kRun: return "RUN";
    case Tag::kRetire: return "RETIRE";
    case Tag::kPromote: return "PROMOTE";
    case Tag::kRenew: return "RENEW";
    case Tag::kRenewInPlace: return "RENEW_IN_PLACE";
    case Tag::kBranch: return "BRANCH";
    case Tag::kCheckpoint: return "CHECKPOINT";
    case Tag::kReady: return "READY";
    case Tag::kOutput: return "OUTPUT";
    case Tag::kImage: return "IMAGE";
    case Tag::kResult: return "RESULT";
    case Tag::kRunner: return "RUNNER";
    case Tag::kBranched: return "BRANCHED";
    case Tag::kCheckpointData: return "CHECKPOINT_DATA";
    case Tag::kToolCall: return "TOOL_CALL";
    case Tag::kToolReply: return "TOOL_REPLY";
    case Tag::kToolPipes: return "TOOL_PIPES";
    case Tag::kSnapshotRefreshed: return "SNAPSHOT_REFRESHED";
    case Tag::kContinued: return "CONTINUED";
    case Tag::kMessageSize: return "MESSAGE_SIZE";
  }
  return "UNKNOWN";
}

}  // namespace dolsot::protocol
