// One HTTP/1.1 connection: reads requests (keep-alive, one at a time), hands
// each to the request callback with a Responder, and writes the answer from a
// per-connection queue so producers never block. While a request is being
// answered the socket is watched for a disconnect, which cancels the request.
#pragma once

#include <atomic>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>

#include "server/http_types.h"

namespace pagoda::server {

struct HttpLimits {
  int64_t max_body_bytes = 32 << 20;           // larger bodies get 413
  int64_t max_header_bytes = 64 << 10;         // larger headers get 431
  int64_t max_pending_write_bytes = 64 << 20;  // a reader this far behind is dropped
  std::chrono::seconds idle_timeout{120};      // wait for the next request
  std::chrono::seconds io_timeout{120};        // one body read or one write
};

// Counters shared by all connections of a listener.
struct ConnectionStats {
  std::atomic<int64_t> num_connections{0};
  std::atomic<int64_t> num_active_requests{0};  // received, response not fully written
};

using RequestCallback = std::function<void(HttpRequest, std::shared_ptr<Responder>)>;

// Starts serving `socket` (whose executor must be a strand); the session keeps
// itself alive until the connection closes.
void start_http_session(boost::asio::ip::tcp::socket socket, const HttpLimits& limits,
                        RequestCallback callback, std::shared_ptr<ConnectionStats> stats);

// The status line reason phrase ("OK", "Not Found", ...).
const char* http_reason(int status);

}  // namespace pagoda::server
