// Lets other threads (the engine's, the worker pool's) post into the server's
// I/O context only while it runs: the server closes the gate before stopping
// its threads, and later posts (events of requests it never drained, answers
// of handlers still running) are dropped instead of reaching a destroyed
// io_context.
#pragma once

#include <boost/asio/post.hpp>
#include <mutex>
#include <utility>

namespace pagoda::http {

class PostGate {
 public:
  template <typename Executor, typename Fn>
  void post(const Executor& executor, Fn&& fn) {
    std::lock_guard lock(mu_);
    if (open_) boost::asio::post(executor, std::forward<Fn>(fn));
  }
  void close() {
    std::lock_guard lock(mu_);
    open_ = false;
  }

 private:
  std::mutex mu_;
  bool open_ = true;
};

}  // namespace pagoda::http
