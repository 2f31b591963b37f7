// Requests ordered by (priority, arrival): the front is scheduled first, the
// back is the preemption victim (lowest priority, then latest arrival).
#pragma once

#include <cassert>
#include <cstdint>
#include <iterator>
#include <set>

#include "sched/request.h"

namespace pagoda {

struct QueueKey {
  int32_t priority = 0;
  uint64_t arrival = 0;
  RequestId id = 0;
  auto operator<=>(const QueueKey&) const = default;
};

inline QueueKey queue_key(const Request& r) {
  return {r.spec.priority, r.arrival, r.spec.id};
}

class RequestQueue {
 public:
  using Iterator = std::set<QueueKey>::const_iterator;

  bool empty() const { return keys_.empty(); }
  int32_t size() const { return static_cast<int32_t>(keys_.size()); }
  const QueueKey& front() const {
    assert(!empty());
    return *keys_.begin();
  }
  const QueueKey& back() const {
    assert(!empty());
    return *std::prev(keys_.end());
  }
  bool contains(const QueueKey& k) const { return keys_.contains(k); }
  void insert(const QueueKey& k) { keys_.insert(k); }
  void erase(const QueueKey& k) { keys_.erase(k); }
  Iterator begin() const { return keys_.begin(); }
  Iterator end() const { return keys_.end(); }

 private:
  std::set<QueueKey> keys_;
};

}  // namespace pagoda
