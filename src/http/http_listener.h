// Accepts TCP connections and starts an HttpSession (on its own strand) for each,
// within the connection limits of its HttpLimits (see ConnectionRegistry).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <memory>
#include <string>

#include "core/result.h"
#include "http/connection_registry.h"
#include "http/http_session.h"
#include "http/transport_error.h"

namespace pagoda::http {

class HttpListener : public std::enable_shared_from_this<HttpListener> {
 public:
  // Binds host:port (port 0: a free port) and listens. Errors name the address.
  // `callback` answers every request; `errors` words the errors the connections
  // answer themselves (see transport_error.h); `cors` (nullptr: none) answers
  // CORS preflights and adds its headers to every response (cors.h).
  static Result<std::shared_ptr<HttpListener>> open(
      boost::asio::io_context& ioc, const std::string& host, uint16_t port, HttpLimits limits,
      RequestCallback callback, std::shared_ptr<ConnectionStats> stats,
      std::shared_ptr<PostGate> gate = std::make_shared<PostGate>(),
      ErrorFormat errors = plain_text_answer, std::shared_ptr<const CorsPolicy> cors = nullptr);

  void start();  // accept loop; runs on the io_context threads
  void stop();   // stops accepting; thread-safe; open connections stay
  uint16_t port() const { return port_; }
  const HttpLimits& limits() const { return limits_; }  // with the connection limits resolved

  // `gate`: what the sessions' responders post through (see start_http_session).
  HttpListener(boost::asio::io_context& ioc, HttpLimits limits, RequestCallback callback,
               ErrorFormat errors, std::shared_ptr<ConnectionStats> stats,
               std::shared_ptr<PostGate> gate, std::shared_ptr<const CorsPolicy> cors);

 private:
  void accept();
  void on_accept(boost::system::error_code ec, boost::asio::ip::tcp::socket socket);

  boost::asio::io_context& ioc_;
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  boost::asio::ip::tcp::acceptor acceptor_;
  boost::asio::steady_timer retry_timer_;
  HttpLimits limits_;
  RequestCallback callback_;
  ErrorFormat errors_;
  std::shared_ptr<ConnectionStats> stats_;
  std::shared_ptr<ConnectionRegistry> registry_;
  std::shared_ptr<PostGate> gate_;
  std::shared_ptr<const CorsPolicy> cors_;
  uint16_t port_ = 0;
};

}  // namespace pagoda::http
