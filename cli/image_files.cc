// WriteImageFiles (see image_files.h): O_EXCL names, whole writes.
#include "cli/image_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/unique_fd.h"

namespace dolsot::cli {
namespace {

// Numbers tried per image before giving up (a directory holding this many
// figures of one session is left to its owner to tidy).
constexpr int kMaxNumber = 100000;

Status WriteAll(int fd, const std::string& bytes) {
  std::size_t written = 0;
  while (written < bytes.size()) {
    ssize_t n = ::write(fd, bytes.data() + written, bytes.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status(ErrorCode::kIo, std::strerror(errno));
    written += static_cast<std::size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::vector<std::string>> WriteImageFiles(std::string_view directory,
                                                   std::string_view session_id,
                                                   const std::vector<std::string>& images,
                                                   int base_fd) {
  std::vector<std::string> paths;
  const std::string prefix = directory == "." ? "" : std::string(directory) + "/";
  int number = 1;
  for (const std::string& png : images) {
    UniqueFd file;
    std::string path;
    for (; number <= kMaxNumber; ++number) {
      path = prefix + "dolsot-" + std::string(session_id) + "-" + std::to_string(number) + ".png";
      file = UniqueFd(::openat(base_fd, path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644));
      if (file || errno != EEXIST) break;
    }
    if (!file) {
      return Status(ErrorCode::kIo, "cannot write the figure " + path + ": " +
                                        (number > kMaxNumber ? std::string("every name is taken")
                                                             : std::strerror(errno)));
    }
    if (Status written = WriteAll(file.get(), png); !written.ok()) {
      return Status(ErrorCode::kIo, "cannot write the figure " + path + ": " + written.message());
    }
    paths.push_back(path);
    ++number;
  }
  return paths;
}

}  // namespace dolsot::cli
