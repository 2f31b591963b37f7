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

#include "http/http_types.h"
#include "http/post_gate.h"
#include "http/transport_error.h"

namespace pagoda::http {

struct HttpLimits {
  int64_t max_body_bytes = 32 << 20;    // larger bodies get 413
  int64_t max_header_bytes = 64 << 10;  // larger headers get 431
  // Stream data queued this far ahead of the client closes the connection
  // (a complete response is always written whole, bounded by io_timeout).
  int64_t max_pending_write_bytes = 64 << 20;
  // Open connections, overall and from one IP address; at a limit the oldest
  // idle connection (of that address) is closed to admit a new one, else the
  // new one gets 503. 0: derived (see resolve_connection_limits).
  int64_t max_connections = 0;
  int64_t max_connections_per_peer = 0;
  std::chrono::seconds header_timeout{10};      // a request header, from accept or its first byte
  std::chrono::seconds keep_alive_timeout{30};  // between requests, for the next one's first byte
  std::chrono::seconds io_timeout{120};         // one body read or one write
};

// Counters shared by all connections of a listener.
struct ConnectionStats {
  std::atomic<int64_t> num_connections{0};
  std::atomic<int64_t> num_active_requests{0};  // received, response not fully written
};

using RequestCallback = std::function<void(HttpRequest, std::shared_ptr<Responder>)>;

class ConnectionRegistry;
class CorsPolicy;

// Starts serving `socket` (whose executor must be a strand) once `registry`
// admits it (else it answers 503 and closes); the session keeps itself alive
// until the connection closes. `limits` has its connection limits resolved.
// `errors` words the errors the session answers itself. Responders post into
// the session through `gate`, so answers of handlers (or engine requests) that
// outlive the server are dropped. `cors` (nullptr: none) answers CORS
// preflights itself and adds its headers to every response (cors.h).
void start_http_session(boost::asio::ip::tcp::socket socket, const HttpLimits& limits,
                        RequestCallback callback, ErrorFormat errors,
                        std::shared_ptr<ConnectionStats> stats,
                        std::shared_ptr<ConnectionRegistry> registry,
                        std::shared_ptr<PostGate> gate, std::shared_ptr<const CorsPolicy> cors);

// The status line reason phrase ("OK", "Not Found", ...).
const char* http_reason(int status);

}  // namespace pagoda::http
