// A close-on-exec pipe for tests that sequence a child process without
// sleeping: [read_end] blocks until the other side writes or closes.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "core/unique_fd.h"

namespace dolsot::testing_support {

struct Pipe {
  Pipe() {
    int fds[2];
    EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
    read_end.Reset(fds[0]);
    write_end.Reset(fds[1]);
  }
  UniqueFd read_end;
  UniqueFd write_end;
};

}  // namespace dolsot::testing_support
