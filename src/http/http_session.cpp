#include "http/http_session.h"

#include <fmt/format.h>

#include <array>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <optional>
#include <vector>

#include "core/log.h"
#include "http/connection_registry.h"
#include "http/cors.h"
#include "http/http_parse.h"

namespace pagoda::http {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

const char* http_reason(int status) {
  auto reason = beast::http::obsolete_reason(static_cast<beast::http::status>(status));
  return reason.empty() ? "Unknown" : reason.data();
}

namespace {

constexpr auto kLingerTimeout = std::chrono::seconds(5);
constexpr auto kRefusedLingerTimeout = std::chrono::seconds(1);
constexpr size_t kReadChunk = 16384;
constexpr size_t kMaxLingerBytes = 64 << 20;

class HttpSession;

// The Responder of one request: posts every call to its session's strand,
// tagged with the request's sequence number so late calls are ignored.
class SessionResponder : public Responder {
 public:
  // Holds the session weakly: only its own pending operations keep it alive,
  // so a responder kept by a request that outlives the connection (or the
  // server) neither keeps the socket nor posts into a stopped io_context.
  SessionResponder(std::weak_ptr<HttpSession> session, uint64_t seq,
                   std::shared_ptr<PostGate> gate)
      : session_(std::move(session)), seq_(seq), gate_(std::move(gate)) {}
  ~SessionResponder() override;
  void send(HttpResponse response) override;
  void start_stream(int status, std::string content_type, HttpHeaders headers) override;
  void write(std::string data) override;
  void end_stream() override;
  void fail(FailedAnswer answer) override;
  void on_cancel(std::function<void()> fn) override;

 private:
  template <typename Fn>
  bool post(Fn&& fn);

  std::weak_ptr<HttpSession> session_;
  uint64_t seq_;
  std::shared_ptr<PostGate> gate_;
  std::atomic<bool> finished_{false};  // send() or end_stream() was called
};

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(tcp::socket socket, const HttpLimits& limits, RequestCallback callback,
              ErrorFormat errors, std::shared_ptr<ConnectionStats> stats,
              std::shared_ptr<ConnectionRegistry> registry, std::shared_ptr<PostGate> gate,
              std::shared_ptr<const CorsPolicy> cors)
      : stream_(std::move(socket)),
        limits_(limits),
        callback_(std::move(callback)),
        errors_(std::move(errors)),
        stats_(std::move(stats)),
        registry_(std::move(registry)),
        gate_(std::move(gate)),
        cors_(std::move(cors)) {
    ++stats_->num_connections;
  }
  ~HttpSession() {
    end_active();
    registry_->remove(registry_id_);  // the io_context stopped before close()
    --stats_->num_connections;
  }

  // Admits the connection from `peer` (possibly shedding an idle one) and
  // serves it, or answers 503 when every connection at the limit is busy.
  void start(std::string peer) {
    net::dispatch(stream_.get_executor(), [self = shared_from_this(), peer = std::move(peer)] {
      self->registry_id_ = self->registry_->admit(
          peer, [weak = std::weak_ptr<HttpSession>(self), executor = self->executor()] {
            net::post(executor, [weak] {
              if (auto session = weak.lock()) session->shed();
            });
          });
      if (self->registry_id_ == 0) return self->refuse(peer);
      self->read_header();
    });
  }
  net::any_io_executor executor() { return stream_.get_executor(); }

  // Responder calls, run on the strand.
  void do_send(uint64_t seq, HttpResponse response) {
    if (!accepts_response(seq)) return;
    response_started_ = response_complete_ = true;
    status_ = response.status;
    std::string data = response_head(response.status, response.content_type, response.headers,
                                     std::to_string(response.body.size()));
    data += response.body;
    enqueue(std::move(data));
  }
  void do_start_stream(uint64_t seq, int status, std::string content_type, HttpHeaders headers) {
    if (!accepts_response(seq)) return;
    response_started_ = streaming_ = true;
    status_ = status;
    if (version_ < 11) keep_alive_ = false;  // HTTP/1.0: the body ends when the connection does
    headers.insert(headers.begin(), {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}});
    enqueue(response_head(status, content_type, headers, version_ < 11 ? "" : "chunked"));
  }
  void do_write_data(uint64_t seq, std::string data) {
    if (seq != seq_ || closed_ || !streaming_ || response_complete_ || data.empty()) return;
    if (version_ < 11) return enqueue(std::move(data));
    std::string chunk = fmt::format("{:x}\r\n", data.size());
    chunk += data;
    chunk += "\r\n";
    enqueue(std::move(chunk));
  }
  void do_end_stream(uint64_t seq) {
    if (seq != seq_ || closed_ || !streaming_ || response_complete_) return;
    response_complete_ = true;
    enqueue(version_ < 11 ? std::string() : std::string("0\r\n\r\n"));
  }
  void do_fail(uint64_t seq, FailedAnswer answer) {
    if (seq != seq_ || closed_ || response_complete_) return;
    if (!response_started_) return do_send(seq, std::move(answer.response));
    do_write_data(seq, std::move(answer.stream_tail));
    do_end_stream(seq);
  }
  void do_set_cancel(uint64_t seq, std::function<void()> fn) {
    if (seq != seq_ || response_complete_) return;
    if (cancelled_) return fn();
    cancel_fn_ = std::move(fn);
  }
  void do_dropped(uint64_t seq) {
    if (seq != seq_ || closed_ || response_complete_) return;
    log_error("request {}: handler dropped its responder without answering", request_id_);
    do_fail(seq, errors_(internal_error(request_id_)));
  }

 private:
  enum class State { kReading, kHandling, kClosed };

  bool accepts_response(uint64_t seq) const {
    return seq == seq_ && !closed_ && !response_started_;
  }

  // --- admission -----------------------------------------------------------
  // The registry shed this idle connection to admit another.
  void shed() {
    if (closed_) return;
    log_debug("closing an idle connection to admit a new one (connection limit)");
    close();
  }

  void refuse(const std::string& peer) {
    log_debug("refusing a connection from {}: the connection limit is reached and none is idle",
              peer);
    linger_timeout_ = kRefusedLingerTimeout;
    reject(503,
           fmt::format("too many open connections (at most {}, {} per client address); retry later",
                       limits_.max_connections, limits_.max_connections_per_peer),
           "too_many_connections");
  }

  // --- reading -------------------------------------------------------------
  // Waits for the next request: between requests of a keep-alive connection
  // up to keep_alive_timeout for its first byte, then header_timeout for the
  // whole header (on a new connection header_timeout from the start).
  void read_header() {
    state_ = State::kReading;
    origin_.clear();
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(limits_.max_header_bytes));
    parser_->body_limit(static_cast<uint64_t>(limits_.max_body_bytes));
    if (seq_ == 0 || buffer_.size() > 0) return read_header_bytes();
    stream_.expires_after(limits_.keep_alive_timeout);
    stream_.async_read_some(buffer_.prepare(kReadChunk),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->buffer_.commit(n);
                              if (ec) return self->on_read_error(ec);
                              self->read_header_bytes();
                            });
  }

  void read_header_bytes() {
    stream_.expires_after(limits_.header_timeout);
    beast::http::async_read_header(
        stream_, buffer_, *parser_,
        beast::bind_front_handler(&HttpSession::on_header, shared_from_this()));
  }

  void on_header(beast::error_code ec, size_t) {
    if (ec) return on_read_error(ec);
    if (!registry_->set_busy(registry_id_)) return close();  // shed meanwhile
    const auto& req = parser_->get();
    version_ = req.version();
    keep_alive_ = req.keep_alive();
    if (cors_) origin_ = std::string(req[beast::http::field::origin]);
    if (beast::iequals(req[beast::http::field::expect], "100-continue")) {
      continue_.assign("HTTP/1.1 100 Continue\r\n\r\n");
      stream_.expires_after(limits_.io_timeout);
      net::async_write(stream_, net::buffer(continue_),
                       [self = shared_from_this()](beast::error_code ec, size_t) {
                         if (ec) return self->close();
                         self->read_body();
                       });
      return;
    }
    read_body();
  }

  void read_body() {
    stream_.expires_after(limits_.io_timeout);
    beast::http::async_read(stream_, buffer_, *parser_,
                            beast::bind_front_handler(&HttpSession::on_body, shared_from_this()));
  }

  void on_body(beast::error_code ec, size_t) {
    if (ec) return on_read_error(ec);
    dispatch();
  }

  void on_read_error(beast::error_code ec) {
    if (ec == beast::http::error::body_limit) {
      return reject(
          413, fmt::format("request body exceeds the limit of {} bytes", limits_.max_body_bytes),
          "request_too_large");
    }
    if (ec == beast::http::error::header_limit) {
      return reject(
          431,
          fmt::format("request headers exceed the limit of {} bytes", limits_.max_header_bytes),
          "headers_too_large");
    }
    const bool http_syntax =
        ec.category() == beast::http::make_error_code(beast::http::error::bad_method).category();
    if (http_syntax && ec != beast::http::error::end_of_stream &&
        ec != beast::http::error::partial_message) {
      return reject(400, fmt::format("malformed HTTP request: {}", ec.message()),
                    "bad_http_request");
    }
    close();  // end of stream, reset, timeout: nothing to answer
  }

  // Answers an unreadable request and closes, reading what the client still
  // sends so that it sees the answer instead of a reset.
  void reject(int status, std::string message, const char* code) {
    ++seq_;
    response_started_ = response_complete_ = streaming_ = cancelled_ = false;
    method_.clear();  // unknown: the request line may not have parsed
    path_.clear();
    begin_active();
    keep_alive_ = false;
    linger_ = true;
    state_ = State::kHandling;
    do_send(seq_, errors_(TransportError{status, std::move(message), code}).response);
  }

  void dispatch() {
    stream_.expires_never();
    ++seq_;
    state_ = State::kHandling;
    response_started_ = response_complete_ = streaming_ = cancelled_ = false;
    cancel_fn_ = nullptr;
    begin_active();
    HttpRequest request = to_http_request(parser_->release());
    request_id_ = request.request_id;
    method_ = request.method;
    path_ = request.path;
    watch_disconnect();
    if (cors_ && CorsPolicy::is_preflight(request)) return answer_preflight(request);
    auto responder = std::make_shared<SessionResponder>(weak_from_this(), seq_, gate_);
    try {
      callback_(std::move(request), responder);
    } catch (const std::exception& e) {
      log_error("request {}: unhandled exception: {}", request_id_, e.what());
      responder->fail(errors_(internal_error(request_id_)));
    }
  }

  // A CORS preflight is answered here, before the request callback (routing,
  // the API key): 200 "OK" with the Access-Control-Allow-* headers, or 400
  // naming what the policy refuses.
  void answer_preflight(const HttpRequest& request) {
    CorsPolicy::Preflight preflight = cors_->preflight(request);
    HttpResponse response;
    if (preflight.refused.empty()) {
      response.content_type = "text/plain";
      response.body = "OK";
    } else {
      response = errors_(TransportError{400, "Disallowed CORS " + preflight.refused,
                                        "cors_preflight_refused"})
                     .response;
    }
    response.headers.insert(response.headers.end(), preflight.headers.begin(),
                            preflight.headers.end());
    origin_.clear();  // the preflight's own headers stand instead of response_head's
    do_send(seq_, std::move(response));
  }

  // --- disconnect detection while a request is answered ----------------------
  // Reads what the client sends meanwhile into buffer_ (the start of the next
  // pipelined request, parsed once this one is answered), so that a later end
  // of stream or reset is seen and cancels the request. The read is on the
  // socket, outside the stream's timeout. A client more than one request
  // (max_header_bytes + max_body_bytes) ahead is closed.
  void watch_disconnect() {
    if (watching_ || closed_) return;
    if (static_cast<int64_t>(buffer_.size()) > limits_.max_header_bytes + limits_.max_body_bytes) {
      log_warn("request {}: client sent over {} bytes ahead while it was answered; closing",
               request_id_, buffer_.size());
      return close();
    }
    watching_ = true;
    stream_.socket().async_read_some(
        buffer_.prepare(kReadChunk),
        beast::bind_front_handler(&HttpSession::on_watch_read, shared_from_this()));
  }

  void on_watch_read(beast::error_code ec, size_t n) {
    watching_ = false;
    buffer_.commit(n);
    if (closed_) return;
    if (resume_after_watch_) {  // the response was written while this read was pending
      resume_after_watch_ = false;
      return read_header();
    }
    if (ec) {
      log_debug("request {}: client disconnected", request_id_);
      return close();
    }
    watch_disconnect();
  }

  // --- writing -------------------------------------------------------------
  std::string response_head(int status, const std::string& content_type,
                            const std::vector<std::pair<std::string, std::string>>& extra,
                            const std::string& length_or_chunked) {
    std::string head = fmt::format("HTTP/1.1 {} {}\r\nContent-Type: {}\r\n", status,
                                   http_reason(status), content_type);
    if (length_or_chunked == "chunked") {
      head += "Transfer-Encoding: chunked\r\n";
    } else if (!length_or_chunked.empty()) {
      head += fmt::format("Content-Length: {}\r\n", length_or_chunked);
    }
    head += keep_alive_ ? "Connection: keep-alive\r\n" : "Connection: close\r\n";
    head += fmt::format("X-Request-Id: {}\r\n", request_id_);
    for (const auto& [name, value] : extra) head += fmt::format("{}: {}\r\n", name, value);
    if (cors_) {
      for (const auto& [name, value] : cors_->response_headers(origin_)) {
        head += fmt::format("{}: {}\r\n", name, value);
      }
    }
    head += "\r\n";
    return head;
  }

  void enqueue(std::string data) {
    if (closed_) return;
    pending_bytes_ += data.size();
    // Only stream data can outrun the client; a complete response is written
    // whole, however large.
    if (streaming_ && static_cast<int64_t>(pending_bytes_) > limits_.max_pending_write_bytes) {
      log_warn("request {}: client reads too slowly ({} bytes queued); closing", request_id_,
               pending_bytes_);
      return close();
    }
    if (!data.empty()) queue_.push_back(std::move(data));
    if (!writing_) write_queued();
  }

  void write_queued() {
    if (queue_.empty()) {
      if (response_complete_) on_response_written();
      return;
    }
    writing_ = true;
    in_flight_.swap(queue_);
    buffers_.clear();
    for (const auto& s : in_flight_) buffers_.emplace_back(net::buffer(s));
    stream_.expires_after(limits_.io_timeout);
    net::async_write(stream_, buffers_,
                     beast::bind_front_handler(&HttpSession::on_write, shared_from_this()));
  }

  void on_write(beast::error_code ec, size_t bytes) {
    writing_ = false;
    pending_bytes_ -= std::min(pending_bytes_, bytes);
    in_flight_.clear();
    if (ec) return close();
    if (closed_) return;
    write_queued();
  }

  void on_response_written() {
    log_debug("{} {} {} -> {}", request_id_, method_, path_, status_);
    stream_.expires_never();
    cancel_fn_ = nullptr;
    end_active();
    if (linger_) return linger();
    if (!keep_alive_) {
      beast::error_code ec;
      stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
      return close();
    }
    registry_->set_idle(registry_id_);
    if (watching_) {  // read_header() once the disconnect watch has stopped using buffer_
      resume_after_watch_ = true;
      beast::error_code ec;
      stream_.socket().cancel(ec);
      return;
    }
    read_header();
  }

  void linger() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.expires_after(linger_timeout_);
    stream_.async_read_some(net::buffer(linger_buffer_),
                            [self = shared_from_this()](beast::error_code ec, size_t n) {
                              self->lingered_ += n;
                              if (ec || self->lingered_ > kMaxLingerBytes) return self->close();
                              self->linger();
                            });
  }

  // Closes the connection; cancels the request if its answer is unfinished.
  void close() {
    if (closed_) return;
    closed_ = true;
    state_ = State::kClosed;
    if (active_ && !response_complete_) {
      cancelled_ = true;
      if (cancel_fn_) std::exchange(cancel_fn_, nullptr)();
    }
    end_active();
    registry_->remove(std::exchange(registry_id_, 0));
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  void begin_active() {
    if (!active_) ++stats_->num_active_requests;
    active_ = true;
  }
  void end_active() {
    if (active_) --stats_->num_active_requests;
    active_ = false;
  }

  beast::tcp_stream stream_;
  HttpLimits limits_;
  RequestCallback callback_;
  ErrorFormat errors_;
  std::shared_ptr<ConnectionStats> stats_;
  std::shared_ptr<ConnectionRegistry> registry_;
  std::shared_ptr<PostGate> gate_;  // for the responders
  std::shared_ptr<const CorsPolicy> cors_;  // nullptr: no CORS headers, no preflight answers
  ConnectionRegistry::Id registry_id_ = 0;  // 0: not admitted, or removed
  beast::flat_buffer buffer_;
  std::optional<beast::http::request_parser<beast::http::string_body>> parser_;
  std::string continue_;

  State state_ = State::kReading;
  uint64_t seq_ = 0;                        // sequence number of the current request
  std::string request_id_, method_, path_;  // of the current request, for logs
  std::string origin_;  // the current request's Origin header, for its CORS headers
  int status_ = 0;
  unsigned version_ = 11;
  bool keep_alive_ = true;
  bool linger_ = false;
  bool active_ = false;  // a request is being answered (counted in stats_)
  bool response_started_ = false, response_complete_ = false, streaming_ = false;
  bool cancelled_ = false, closed_ = false, watching_ = false, writing_ = false;
  bool resume_after_watch_ = false;  // read_header() when the disconnect watch ends
  std::function<void()> cancel_fn_;

  std::vector<std::string> queue_, in_flight_;
  std::vector<net::const_buffer> buffers_;
  size_t pending_bytes_ = 0;
  std::chrono::seconds linger_timeout_ = kLingerTimeout;
  std::array<char, 16384> linger_buffer_;
  size_t lingered_ = 0;
};

// Runs fn(session) on the session's strand, if the session (and the server)
// still run; returns false when it does not.
template <typename Fn>
bool SessionResponder::post(Fn&& fn) {
  std::shared_ptr<HttpSession> s = session_.lock();
  if (!s) return false;  // the connection is closed
  gate_->post(s->executor(), [s, fn = std::forward<Fn>(fn)]() mutable { fn(*s); });
  return true;
}

SessionResponder::~SessionResponder() {
  if (!finished_) post([seq = seq_](HttpSession& s) { s.do_dropped(seq); });
}

void SessionResponder::send(HttpResponse response) {
  if (finished_.exchange(true)) return;
  post([seq = seq_, r = std::move(response)](HttpSession& s) mutable {
    s.do_send(seq, std::move(r));
  });
}

void SessionResponder::start_stream(int status, std::string content_type, HttpHeaders headers) {
  post([seq = seq_, status, ct = std::move(content_type),
        h = std::move(headers)](HttpSession& s) mutable {
    s.do_start_stream(seq, status, std::move(ct), std::move(h));
  });
}

void SessionResponder::write(std::string data) {
  post([seq = seq_, d = std::move(data)](HttpSession& s) mutable {
    s.do_write_data(seq, std::move(d));
  });
}

void SessionResponder::end_stream() {
  if (finished_.exchange(true)) return;
  post([seq = seq_](HttpSession& s) { s.do_end_stream(seq); });
}

void SessionResponder::fail(FailedAnswer answer) {
  if (finished_.exchange(true)) return;
  post([seq = seq_, a = std::move(answer)](HttpSession& s) mutable {
    s.do_fail(seq, std::move(a));
  });
}

void SessionResponder::on_cancel(std::function<void()> fn) {
  // A session that is gone closed its connection: cancel at once.
  auto cancel = std::make_shared<std::function<void()>>(std::move(fn));
  if (!post([seq = seq_, cancel](HttpSession& s) { s.do_set_cancel(seq, std::move(*cancel)); })) {
    (*cancel)();
  }
}

}  // namespace

void start_http_session(tcp::socket socket, const HttpLimits& limits, RequestCallback callback,
                        ErrorFormat errors, std::shared_ptr<ConnectionStats> stats,
                        std::shared_ptr<ConnectionRegistry> registry,
                        std::shared_ptr<PostGate> gate, std::shared_ptr<const CorsPolicy> cors) {
  beast::error_code ec;
  const tcp::endpoint peer = socket.remote_endpoint(ec);
  if (ec) return;  // already disconnected
  std::make_shared<HttpSession>(std::move(socket), limits, std::move(callback), std::move(errors),
                                std::move(stats), std::move(registry), std::move(gate),
                                std::move(cors))
      ->start(peer.address().to_string());
}

}  // namespace pagoda::http
