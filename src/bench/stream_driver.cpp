#include "bench/stream_driver.h"

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <deque>
#include <memory>

#include "bench/openai_stream.h"
#include "bench/sse_parser.h"

namespace pagoda::bench {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr size_t kMaxErrorBody = 512;  // bytes of a non-200 body kept in the error

class Driver {
 public:
  Driver(const StreamTarget& target, const std::vector<PlannedRequest>& plan,
         int64_t max_concurrency, const ProgressFn& on_progress,
         tcp::resolver::results_type endpoints)
      : target_(target),
        plan_(plan),
        max_concurrency_(max_concurrency),
        on_progress_(on_progress),
        endpoints_(std::move(endpoints)),
        timer_(ioc_),
        records_(plan.size()) {}

  DriveResult run();

  asio::io_context& ioc() { return ioc_; }
  const StreamTarget& target() const { return target_; }
  const tcp::resolver::results_type& endpoints() const { return endpoints_; }
  const PlannedRequest& planned(size_t i) const { return plan_[i]; }
  RequestRecord& record(size_t i) { return records_[i]; }
  double now() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  void on_done(size_t i);

 private:
  void dispatch_due();
  void arrive(size_t i);
  void launch(size_t i);

  const StreamTarget& target_;
  const std::vector<PlannedRequest>& plan_;
  int64_t max_concurrency_;
  const ProgressFn& on_progress_;
  asio::io_context ioc_;
  tcp::resolver::results_type endpoints_;
  asio::steady_timer timer_;
  std::vector<RequestRecord> records_;
  std::deque<size_t> waiting_;  // due but held back by max_concurrency
  size_t next_ = 0;             // next request to arrive
  int64_t num_active_ = 0, num_done_ = 0, num_failed_ = 0;
  Clock::time_point start_;
  double end_ = 0.0;
};

// One streamed request: connect, send, read the header, then read the body
// piece by piece, timestamping the SSE events each piece completes.
class StreamCall : public std::enable_shared_from_this<StreamCall> {
 public:
  StreamCall(Driver& driver, size_t index)
      : d_(driver), index_(index), stream_(driver.ioc()), acc_(driver.record(index)) {}

  void start() {
    const auto& t = d_.target();
    stream_.expires_after(std::chrono::milliseconds(static_cast<int64_t>(t.timeout_s * 1000.0)));
    req_ = {http::verb::post, t.url.target(t.path), 11};
    req_.set(http::field::host, t.url.host);
    req_.set(http::field::user_agent, "pagoda-bench");
    req_.set(http::field::content_type, "application/json");
    req_.set(http::field::accept, "text/event-stream");
    if (!t.api_key.empty()) req_.set(http::field::authorization, "Bearer " + t.api_key);
    req_.keep_alive(false);
    req_.body() = d_.planned(index_).body;
    req_.prepare_payload();
    parser_.body_limit(std::uint64_t{1} << 40);  // not boost::none (Beast 1.74 bug)
    stream_.async_connect(d_.endpoints(), [self = shared_from_this()](beast::error_code ec,
                                                                      const tcp::endpoint&) {
      if (ec) return self->done("connect: " + ec.message());
      http::async_write(self->stream_, self->req_, [self](beast::error_code ec2, size_t) {
        if (ec2) return self->done("send: " + ec2.message());
        http::async_read_header(self->stream_, self->buffer_, self->parser_,
                                [self](beast::error_code ec3, size_t) { self->on_header(ec3); });
      });
    });
  }

 private:
  void on_header(beast::error_code ec) {
    if (ec) return done("reading the response header: " + ec.message());
    status_ = static_cast<int>(parser_.get().result_int());
    if (parser_.is_done()) return finish_body();
    read_body();
  }

  void read_body() {
    parser_.get().body().data = piece_.data();
    parser_.get().body().size = piece_.size();
    http::async_read_some(
        stream_, buffer_, parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->on_body(ec); });
  }

  void on_body(beast::error_code ec) {
    if (ec == http::error::need_buffer) ec = {};
    size_t got = piece_.size() - parser_.get().body().size;
    if (got > 0) take(std::string_view(piece_.data(), got));
    if (ec == http::error::end_of_stream && parser_.is_done()) ec = {};
    if (ec) return done("reading the stream: " + ec.message());
    if (acc_.failed() || parser_.is_done()) return finish_body();
    read_body();
  }

  void take(std::string_view bytes) {
    if (status_ != 200) {
      error_body_.append(
          bytes.substr(0, kMaxErrorBody - std::min(kMaxErrorBody, error_body_.size())));
      return;
    }
    double t = d_.now();
    for (const auto& event : sse_.feed(bytes)) acc_.on_event(event, t);
  }

  void finish_body() {
    if (status_ != 200) return done("HTTP " + std::to_string(status_) + ": " + error_body_);
    double t = d_.now();
    for (const auto& event : sse_.finish()) acc_.on_event(event, t);
    done({});
  }

  void done(const std::string& error) {
    acc_.finish(error);
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
    d_.on_done(index_);
  }

  Driver& d_;
  size_t index_;
  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  http::request<http::string_body> req_;
  http::response_parser<http::buffer_body> parser_;
  std::array<char, 16384> piece_{};
  SseParser sse_;
  StreamAccumulator acc_;
  int status_ = 0;
  std::string error_body_;
};

DriveResult Driver::run() {
  start_ = Clock::now();
  for (size_t i = 0; i < plan_.size(); ++i) records_[i].prompt_len = plan_[i].prompt_len;
  dispatch_due();
  ioc_.run();
  return {std::move(records_), plan_.empty() ? now() : end_};
}

void Driver::dispatch_due() {
  while (next_ < plan_.size() && plan_[next_].arrival <= now()) arrive(next_++);
  if (next_ >= plan_.size()) return;
  timer_.expires_at(start_ + std::chrono::duration_cast<Clock::duration>(
                                 std::chrono::duration<double>(plan_[next_].arrival)));
  timer_.async_wait([this](beast::error_code ec) {
    if (!ec) dispatch_due();
  });
}

void Driver::arrive(size_t i) {
  records_[i].arrival_time = now();
  if (max_concurrency_ > 0 && num_active_ >= max_concurrency_) {
    waiting_.push_back(i);
  } else {
    launch(i);
  }
}

void Driver::launch(size_t i) {
  ++num_active_;
  records_[i].start_time = now();
  std::make_shared<StreamCall>(*this, i)->start();
}

void Driver::on_done(size_t i) {
  --num_active_;
  ++num_done_;
  if (!records_[i].success) ++num_failed_;
  end_ = now();
  if (on_progress_) on_progress_(num_done_, num_failed_);
  if (!waiting_.empty()) {
    size_t next = waiting_.front();
    waiting_.pop_front();
    launch(next);
  }
}

}  // namespace

Result<DriveResult> drive_requests(const StreamTarget& target,
                                   const std::vector<PlannedRequest>& plan, int64_t max_concurrency,
                                   const ProgressFn& on_progress) {
  asio::io_context resolve_ctx;
  tcp::resolver resolver(resolve_ctx);
  beast::error_code ec;
  auto endpoints = resolver.resolve(target.url.host, target.url.port, ec);
  if (ec)
    return make_error(ErrorCode::kIo, "cannot resolve '" + target.url.host + ":" + target.url.port +
                                          "': " + ec.message());
  Driver driver(target, plan, max_concurrency, on_progress, std::move(endpoints));
  return driver.run();
}

}  // namespace pagoda::bench
