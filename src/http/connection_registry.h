// The open connections of a listener, for the connection limits: counts them
// overall and per peer (remote IP address), and keeps the idle ones (waiting
// for a request header, no request in flight) in the order they became idle,
// so that a new connection at a limit can take the place of the one idle the
// longest. Thread-safe; every call is O(1) (hash maps and linked lists).
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "http/http_session.h"

namespace pagoda::http {

// Fills in the derived connection limits of `limits` (those left 0):
// max_connections: the open-file limit minus 256 descriptors for the rest of
// the process (at least half of it); max_connections_per_peer: 3/4 of
// max_connections, so one reverse proxy or load generator can use most of the
// server while other clients still get in.
HttpLimits resolve_connection_limits(HttpLimits limits);

// Raises the soft RLIMIT_NOFILE to the hard limit (one descriptor per open
// connection). Returns the soft limit now in force.
int64_t raise_open_file_limit();

class ConnectionRegistry {
 public:
  using Id = uint64_t;  // 0: none

  // Both limits must be positive.
  ConnectionRegistry(int64_t max_connections, int64_t max_per_peer);

  // Admits a connection from `peer`, idle. At the peer's limit the connection
  // of `peer` idle the longest is shed to make room, at the overall limit the
  // one idle the longest of any peer; its `shed` is called (after the lock is
  // released, on the caller's thread) and must close it soon. Returns 0 when
  // no connection could be shed: the new one must be refused.
  Id admit(const std::string& peer, std::function<void()> shed);
  // A request header arrived: the connection is not sheddable until
  // set_idle(). Returns false when it was shed already (its `shed` runs or
  // ran): it must close instead of answering.
  bool set_busy(Id id);
  // The connection waits for its next request: sheddable, as the newest idle.
  void set_idle(Id id);
  // The connection is closed. A no-op for a shed connection or for 0.
  void remove(Id id);

  int64_t size() const;

 private:
  struct Entry {
    std::string peer;
    std::function<void()> shed;
    bool idle = false;
    std::list<Id>::iterator idle_pos, peer_idle_pos;  // valid while idle
  };
  struct Peer {
    int64_t count = 0;
    std::list<Id> idle;  // idle longest first
  };

  void mark_idle_locked(Id id, Entry& entry);
  void unmark_idle_locked(Entry& entry);
  // Forgets `id` (shed or removed); returns its shed callback.
  std::function<void()> erase_locked(Id id);

  const int64_t max_connections_, max_per_peer_;
  mutable std::mutex mu_;
  std::unordered_map<Id, Entry> entries_;
  std::unordered_map<std::string, Peer> peers_;
  std::list<Id> idle_;  // idle longest first, of every peer
  Id next_id_ = 1;
};

}  // namespace pagoda::http
