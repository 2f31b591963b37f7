#include "parallel/cpu_communicator.h"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "core/float_elements.h"

namespace pagoda {
namespace {

// One (src, dst) channel of send/recv; guarded by the group's mutex.
struct Mailbox {
  bool full = false;
  std::vector<uint8_t> bytes;
};

// What the ranks of one group share. One mutex guards the barrier, the
// mailboxes and the abort; a rank waits on `cv` for any of them to change.
struct Group {
  explicit Group(int n)
      : size(n), posted(static_cast<size_t>(n)), mailboxes(static_cast<size_t>(n * n)) {}
  const int size;
  std::mutex mu;
  std::condition_variable cv;
  // The barrier: ranks arrived in the current generation.
  int arrived = 0;
  uint64_t generation = 0;
  // Set once by abort(); every wait then ends and every op returns at once.
  bool aborted = false;
  std::string abort_reason;
  // all_reduce_sum: each rank's tensor, then the f32 sums.
  std::vector<Tensor> posted;
  std::vector<float> sum;
  std::vector<Mailbox> mailboxes;  // [src * size + dst]
  Mailbox& mailbox(int src, int dst) { return mailboxes[static_cast<size_t>(src * size + dst)]; }

  // Waits until every rank has arrived; false (at once) once aborted.
  bool arrive_and_wait() {
    std::unique_lock lock(mu);
    if (aborted) return false;
    const uint64_t gen = generation;
    if (++arrived == size) {
      arrived = 0;
      ++generation;
      cv.notify_all();
      return true;
    }
    cv.wait(lock, [&] { return aborted || generation != gen; });
    return generation != gen;
  }

  void abort(const std::string& why) {
    {
      std::lock_guard lock(mu);
      if (aborted) return;
      aborted = true;
      abort_reason = why;
    }
    cv.notify_all();
  }

  bool is_aborted() {
    std::lock_guard lock(mu);
    return aborted;
  }
};

class CpuCommunicator final : public Communicator {
 public:
  CpuCommunicator(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return group_->size; }
  std::string name() const override { return "cpu threads"; }
  Status status() const override {
    if (!status_.ok()) return status_;
    std::lock_guard lock(group_->mu);
    if (group_->aborted)
      return make_error(ErrorCode::kInternal, "aborted: " + group_->abort_reason);
    return {};
  }
  void abort(const std::string& why) override { group_->abort(why); }

  void all_reduce_sum(Tensor& x) override {
    Group& g = *group_;
    if (g.is_aborted()) return;
    g.posted[static_cast<size_t>(rank_)] = x;
    const int64_t n = x.numel();
    if (rank_ == 0 && static_cast<int64_t>(g.sum.size()) < n) g.sum.resize(static_cast<size_t>(n));
    if (!g.arrive_and_wait()) return;  // every tensor posted, sum sized
    // Every rank checks the same posts, so all skip together on a mismatch.
    for (const Tensor& t : g.posted) {
      if (t.numel() != n || t.dtype != x.dtype || !is_float_dtype(t.dtype)) {
        fail(fmt::format("all_reduce_sum: ranks passed different or non-float tensors ({} elements here)", n));
        if (g.arrive_and_wait()) g.arrive_and_wait();
        return;
      }
    }
    const int64_t lo = n * rank_ / g.size, hi = n * (rank_ + 1) / g.size;
    for (int64_t i = lo; i < hi; ++i) {
      float s = 0.0f;
      for (const Tensor& t : g.posted) s += load_float_element(t.dtype, t.data, i);
      g.sum[static_cast<size_t>(i)] = s;
    }
    if (!g.arrive_and_wait()) return;  // all slices summed
    for (int64_t i = 0; i < n; ++i) store_float_element(x.dtype, x.data, i, g.sum[static_cast<size_t>(i)]);
    g.arrive_and_wait();  // every rank has read the sums (the next call may resize them)
  }

  void all_gather_columns(const Tensor& x, Tensor& out) override {
    Group& g = *group_;
    if (g.is_aborted()) return;
    g.posted[static_cast<size_t>(rank_)] = x;
    if (!g.arrive_and_wait()) return;  // every rank's block posted
    const int64_t rows = x.ndim > 0 ? x.shape[0] : 0, cols = x.ndim > 1 ? x.shape[1] : 0;
    const int64_t width = out.ndim > 1 ? out.shape[1] : 0;
    bool same = x.ndim == 2 && out.ndim == 2 && out.shape[0] == rows && out.dtype == x.dtype &&
                width <= g.size * cols;
    // Every rank checks the same posts, so all skip together on a mismatch.
    for (const Tensor& t : g.posted)
      same = same && t.ndim == 2 && t.shape[0] == rows && t.shape[1] == cols && t.dtype == x.dtype;
    if (!same) {
      fail(
          fmt::format("all_gather_columns: ranks passed different blocks, or out [{}, {}] does not "
                      "fit {} of [{}, {}]",
                      out.ndim > 0 ? out.shape[0] : 0, width, g.size, rows, cols));
    } else {
      const size_t es = dtype_size(x.dtype);
      for (int j = 0; j < g.size; ++j) {
        const int64_t first = j * cols, n = std::clamp<int64_t>(width - first, 0, cols);
        const auto* src = static_cast<const uint8_t*>(g.posted[static_cast<size_t>(j)].data);
        for (int64_t r = 0; r < rows; ++r) {
          std::memcpy(static_cast<uint8_t*>(out.data) + (r * width + first) * es,
                      src + r * cols * es, static_cast<size_t>(n) * es);
        }
      }
    }
    g.arrive_and_wait();  // every rank has read the posts (their owners may reuse them)
  }

  void send(const Tensor& x, int peer) override {
    if (!check_peer(peer, "send")) return;
    Group& g = *group_;
    Mailbox& m = g.mailbox(rank_, peer);
    std::unique_lock lock(g.mu);
    g.cv.wait(lock, [&] { return g.aborted || !m.full; });
    if (g.aborted) return;
    m.bytes.assign(static_cast<const uint8_t*>(x.data), static_cast<const uint8_t*>(x.data) + x.nbytes());
    m.full = true;
    g.cv.notify_all();
  }

  void recv(Tensor& x, int peer) override {
    if (!check_peer(peer, "recv")) return;
    Group& g = *group_;
    Mailbox& m = g.mailbox(peer, rank_);
    std::unique_lock lock(g.mu);
    g.cv.wait(lock, [&] { return g.aborted || m.full; });
    if (g.aborted) return;
    if (m.bytes.size() == x.nbytes()) {
      std::memcpy(x.data, m.bytes.data(), m.bytes.size());
    } else {
      fail(fmt::format("recv from rank {}: {} bytes sent, {} expected", peer, m.bytes.size(), x.nbytes()));
    }
    m.full = false;
    g.cv.notify_all();
  }

 private:
  bool check_peer(int peer, const char* op) {
    if (peer >= 0 && peer < group_->size && peer != rank_) return true;
    fail(fmt::format("{}: peer {} is not another rank of this group of {}", op, peer, group_->size));
    return false;
  }
  void fail(std::string message) {
    if (status_.ok()) status_ = make_error(ErrorCode::kInternal, "cpu communicator rank " + std::to_string(rank_) + ": " + message);
  }

  std::shared_ptr<Group> group_;
  int rank_;
  Status status_;  // written by this rank's thread only
};

}  // namespace

std::vector<std::unique_ptr<Communicator>> create_cpu_communicators(int size) {
  auto group = std::make_shared<Group>(size);
  std::vector<std::unique_ptr<Communicator>> comms;
  for (int r = 0; r < size; ++r) comms.push_back(std::make_unique<CpuCommunicator>(group, r));
  return comms;
}

}  // namespace pagoda
