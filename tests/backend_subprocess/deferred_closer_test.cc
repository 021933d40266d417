// DeferredCloser: holds descriptors until a batch is full or CloseAll, and
// closes each exactly once whatever thread queues or drains it.
#include "backend_subprocess/deferred_closer.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <thread>
#include <utility>
#include <vector>

#include "backend_subprocess/protocol.h"

namespace dolsot {
namespace {

// A socket pair: the first end is queued, the second tells whether it closed.
struct Pair {
  UniqueFd queued;
  UniqueFd watcher;
};

Pair MakePair() {
  auto pair = protocol::SocketPair();
  EXPECT_TRUE(pair.ok());
  return Pair{std::move(pair->first), std::move(pair->second)};
}

// Whether the peer of `watcher` is closed (now, without waiting).
bool PeerClosed(const UniqueFd& watcher) {
  pollfd p{watcher.get(), POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLHUP) != 0;
}

TEST(DeferredCloser, HoldsDescriptorsUntilTheBatchIsFull) {
  DeferredCloser closer(3);
  std::vector<UniqueFd> watchers;
  for (int i = 0; i < 2; ++i) {
    Pair p = MakePair();
    closer.Add(std::move(p.queued));
    watchers.push_back(std::move(p.watcher));
  }
  EXPECT_EQ(closer.Pending(), 2u);
  for (const auto& w : watchers) EXPECT_FALSE(PeerClosed(w));
  Pair third = MakePair();
  closer.Add(std::move(third.queued));
  watchers.push_back(std::move(third.watcher));
  EXPECT_EQ(closer.Pending(), 0u);
  for (const auto& w : watchers) EXPECT_TRUE(PeerClosed(w));
}

TEST(DeferredCloser, CloseAllAndTheDestructorCloseWhatWaits) {
  Pair a = MakePair(), b = MakePair();
  {
    DeferredCloser closer(8);
    closer.Add(std::move(a.queued));
    closer.Add(UniqueFd());  // nothing to close: not queued
    EXPECT_EQ(closer.Pending(), 1u);
    closer.CloseAll();
    EXPECT_EQ(closer.Pending(), 0u);
    EXPECT_TRUE(PeerClosed(a.watcher));
    closer.Add(std::move(b.queued));
    EXPECT_FALSE(PeerClosed(b.watcher));
  }
  EXPECT_TRUE(PeerClosed(b.watcher));
}

TEST(DeferredCloser, ThreadsQueueingAndDrainingCloseEachOnce) {
  constexpr int kThreads = 4;
  constexpr int kEach = 50;
  std::vector<std::vector<UniqueFd>> watchers(kThreads);
  std::vector<std::vector<UniqueFd>> queued(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kEach; ++i) {
      Pair p = MakePair();
      queued[t].push_back(std::move(p.queued));
      watchers[t].push_back(std::move(p.watcher));
    }
  }
  DeferredCloser closer(7);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (auto& fd : queued[t]) {
        closer.Add(std::move(fd));
        if (t == 0) closer.CloseAll();  // a drainer racing the others
      }
    });
  }
  for (auto& th : threads) th.join();
  closer.CloseAll();
  for (const auto& list : watchers) {
    for (const auto& w : list) EXPECT_TRUE(PeerClosed(w));
  }
  // Each was closed once: a second close of a number would have hit a
  // descriptor opened meanwhile, and the watchers (still open) would fail
  // their poll with POLLNVAL instead.
  for (const auto& list : watchers) {
    for (const auto& w : list) {
      pollfd p{w.get(), POLLIN, 0};
      ASSERT_EQ(::poll(&p, 1, 0), 1);
      EXPECT_EQ(p.revents & POLLNVAL, 0);
    }
  }
}

}  // namespace
}  // namespace dolsot
