// An ordered set of block ids linked through per-block prev/next arrays:
// O(1) push_back, pop_front and erase with no allocation after construction.
// Order is insertion order, so the front is the block released longest ago.
#pragma once

#include <cassert>
#include <cstdint>
#include <vector>

namespace pagoda {

class BlockQueue {
 public:
  explicit BlockQueue(int32_t capacity)
      : prev_(capacity, kNone), next_(capacity, kNone), in_(capacity, 0) {}

  bool empty() const { return size_ == 0; }
  int32_t size() const { return size_; }
  bool contains(int32_t block) const { return in_[block] != 0; }
  int32_t front() const { return head_; }
  // The block after `block`, or -1 at the back.
  int32_t next(int32_t block) const { return next_[block]; }

  void push_back(int32_t block) {
    assert(!contains(block));
    prev_[block] = tail_;
    next_[block] = kNone;
    if (tail_ != kNone)
      next_[tail_] = block;
    else
      head_ = block;
    tail_ = block;
    in_[block] = 1;
    ++size_;
  }

  int32_t pop_front() {
    int32_t block = head_;
    erase(block);
    return block;
  }

  void erase(int32_t block) {
    assert(contains(block));
    int32_t p = prev_[block], n = next_[block];
    if (p != kNone)
      next_[p] = n;
    else
      head_ = n;
    if (n != kNone)
      prev_[n] = p;
    else
      tail_ = p;
    prev_[block] = next_[block] = kNone;
    in_[block] = 0;
    --size_;
  }

 private:
  static constexpr int32_t kNone = -1;
  std::vector<int32_t> prev_, next_;
  std::vector<uint8_t> in_;
  int32_t head_ = kNone;
  int32_t tail_ = kNone;
  int32_t size_ = 0;
};

}  // namespace pagoda
