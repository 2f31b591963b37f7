#include "http/http_listener.h"

#include <fmt/format.h>

#include <boost/asio/post.hpp>

#include "core/log.h"

namespace pagoda::http {

namespace net = boost::asio;
using tcp = net::ip::tcp;

HttpListener::HttpListener(net::io_context& ioc, HttpLimits limits, RequestCallback callback,
                           ErrorFormat errors, std::shared_ptr<ConnectionStats> stats,
                           std::shared_ptr<PostGate> gate, std::shared_ptr<const CorsPolicy> cors)
    : ioc_(ioc),
      strand_(net::make_strand(ioc)),
      acceptor_(strand_),
      retry_timer_(strand_),
      limits_(resolve_connection_limits(limits)),
      callback_(std::move(callback)),
      errors_(std::move(errors)),
      stats_(std::move(stats)),
      registry_(std::make_shared<ConnectionRegistry>(limits_.max_connections,
                                                     limits_.max_connections_per_peer)),
      gate_(std::move(gate)),
      cors_(std::move(cors)) {}

Result<std::shared_ptr<HttpListener>> HttpListener::open(
    net::io_context& ioc, const std::string& host, uint16_t port, HttpLimits limits,
    RequestCallback callback, std::shared_ptr<ConnectionStats> stats,
    std::shared_ptr<PostGate> gate, ErrorFormat errors, std::shared_ptr<const CorsPolicy> cors) {
  auto listener =
      std::make_shared<HttpListener>(ioc, limits, std::move(callback), std::move(errors),
                                     std::move(stats), std::move(gate), std::move(cors));
  boost::system::error_code ec;
  tcp::resolver resolver(ioc);
  auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
  if (ec || results.empty()) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("--host '{}': cannot resolve: {}", host, ec.message()));
  }
  const tcp::endpoint endpoint = *results.begin();
  auto& acceptor = listener->acceptor_;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec) acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return make_error(ErrorCode::kIo,
                      fmt::format("cannot listen on {}:{}: {}", host, port, ec.message()));
  }
  listener->port_ = acceptor.local_endpoint().port();
  return listener;
}

void HttpListener::start() {
  net::post(strand_, [self = shared_from_this()] { self->accept(); });
}

void HttpListener::stop() {
  net::post(strand_, [self = shared_from_this()] {
    boost::system::error_code ec;
    self->retry_timer_.cancel();
    self->acceptor_.close(ec);
  });
}

void HttpListener::accept() {
  if (!acceptor_.is_open()) return;
  acceptor_.async_accept(
      net::make_strand(ioc_),
      [self = shared_from_this()](boost::system::error_code ec, tcp::socket socket) {
        self->on_accept(ec, std::move(socket));
      });
}

void HttpListener::on_accept(boost::system::error_code ec, tcp::socket socket) {
  if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
  if (ec) {
    // Out of file descriptors or similar: back off instead of spinning.
    log_warn("accept failed: {}; retrying in 100 ms", ec.message());
    retry_timer_.expires_after(std::chrono::milliseconds(100));
    retry_timer_.async_wait([self = shared_from_this()](boost::system::error_code wait_ec) {
      if (!wait_ec) self->accept();
    });
    return;
  }
  boost::system::error_code opt_ec;
  socket.set_option(tcp::no_delay(true), opt_ec);
  start_http_session(std::move(socket), limits_, callback_, errors_, stats_, registry_, gate_,
                     cors_);
  accept();
}

}  // namespace pagoda::http
