#include "http/connection_registry.h"

#include <sys/resource.h>

#include <algorithm>

namespace pagoda::http {

namespace {

constexpr int64_t kReservedDescriptors = 256;

int64_t open_file_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur == RLIM_INFINITY) return int64_t{1} << 20;
  return static_cast<int64_t>(limit.rlim_cur);
}

}  // namespace

HttpLimits resolve_connection_limits(HttpLimits limits) {
  if (limits.max_connections <= 0) {
    const int64_t files = open_file_limit();
    limits.max_connections = std::max({files - kReservedDescriptors, files / 2, int64_t{1}});
  }
  if (limits.max_connections_per_peer <= 0)
    limits.max_connections_per_peer = std::max(limits.max_connections * 3 / 4, int64_t{1});
  return limits;
}

int64_t raise_open_file_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return -1;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  return limit.rlim_cur == RLIM_INFINITY ? INT64_MAX : static_cast<int64_t>(limit.rlim_cur);
}

ConnectionRegistry::ConnectionRegistry(int64_t max_connections, int64_t max_per_peer)
    : max_connections_(max_connections), max_per_peer_(max_per_peer) {}

ConnectionRegistry::Id ConnectionRegistry::admit(const std::string& peer,
                                                 std::function<void()> shed) {
  std::function<void()> shed_victim;
  Id id = 0;
  {
    std::lock_guard lock(mu_);
    auto it = peers_.find(peer);
    const int64_t peer_count = it == peers_.end() ? 0 : it->second.count;
    const std::list<Id>* candidates = nullptr;
    if (peer_count >= max_per_peer_) {
      candidates = &it->second.idle;
    } else if (static_cast<int64_t>(entries_.size()) >= max_connections_) {
      candidates = &idle_;
    }
    if (candidates) {
      if (candidates->empty()) return 0;
      shed_victim = erase_locked(candidates->front());
    }
    id = next_id_++;
    Entry& entry = entries_[id];
    entry.peer = peer;
    entry.shed = std::move(shed);
    ++peers_[peer].count;
    mark_idle_locked(id, entry);
  }
  if (shed_victim) shed_victim();
  return id;
}

bool ConnectionRegistry::set_busy(Id id) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return false;
  unmark_idle_locked(it->second);
  return true;
}

void ConnectionRegistry::set_idle(Id id) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(id);
  if (it == entries_.end()) return;
  unmark_idle_locked(it->second);
  mark_idle_locked(id, it->second);
}

void ConnectionRegistry::remove(Id id) {
  std::function<void()> unused;  // destroyed after the lock is released
  std::lock_guard lock(mu_);
  if (entries_.count(id)) unused = erase_locked(id);
}

int64_t ConnectionRegistry::size() const {
  std::lock_guard lock(mu_);
  return static_cast<int64_t>(entries_.size());
}

void ConnectionRegistry::mark_idle_locked(Id id, Entry& entry) {
  entry.idle = true;
  entry.idle_pos = idle_.insert(idle_.end(), id);
  auto& peer_idle = peers_[entry.peer].idle;
  entry.peer_idle_pos = peer_idle.insert(peer_idle.end(), id);
}

void ConnectionRegistry::unmark_idle_locked(Entry& entry) {
  if (!entry.idle) return;
  entry.idle = false;
  idle_.erase(entry.idle_pos);
  peers_[entry.peer].idle.erase(entry.peer_idle_pos);
}

std::function<void()> ConnectionRegistry::erase_locked(Id id) {
  auto it = entries_.find(id);
  Entry& entry = it->second;
  unmark_idle_locked(entry);
  auto peer = peers_.find(entry.peer);
  if (--peer->second.count == 0) peers_.erase(peer);
  std::function<void()> shed = std::move(entry.shed);
  entries_.erase(it);
  return shed;
}

}  // namespace pagoda::http
