// A guard for tests of code that used to hang (ranks waiting for a peer
// forever): a regression fails the test instead of hanging CI.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <thread>

namespace pagoda::test {

// Runs `body` on a thread of its own and waits up to `limit` for it to
// return: true when it did; false, with a test failure, when it did not.
// A body that does not return is left running (detached), so it must own
// everything it touches: capture by value, shared_ptrs for shared state.
inline bool finishes_within(std::chrono::seconds limit, std::function<void()> body) {
  auto done = std::make_shared<std::promise<void>>();
  std::future<void> finished = done->get_future();
  std::thread([done, body = std::move(body)] {
    body();
    done->set_value();
  }).detach();
  if (finished.wait_for(limit) == std::future_status::ready) return true;
  ADD_FAILURE() << "did not finish within " << limit.count() << " s (hung?)";
  return false;
}

}  // namespace pagoda::test
