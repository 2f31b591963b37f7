// The listener on a real loopback socket, without a protocol: how it writes
// what a handler answers.
#include "http/http_listener.h"

#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <thread>

namespace pagoda::http {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
using tcp = net::ip::tcp;

// A complete response larger than max_pending_write_bytes is written whole.
TEST(HttpListenerTest, WritesALargeCompleteResponseWhole) {
  constexpr size_t kSize = 70 << 20;
  net::io_context server_ioc;
  auto listener = HttpListener::open(
      server_ioc, "127.0.0.1", 0, HttpLimits{},
      [](HttpRequest, std::shared_ptr<Responder> responder) {
        HttpResponse response;
        response.body.assign(kSize, 'x');
        response.body.back() = 'y';
        responder->send(std::move(response));
      },
      std::make_shared<ConnectionStats>());
  ASSERT_TRUE(listener.ok()) << listener.error().message;
  listener.value()->start();
  std::thread io([&] { server_ioc.run(); });
  net::io_context client_ioc;
  tcp::socket socket(client_ioc);
  socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), listener.value()->port()));
  net::write(socket, net::buffer(std::string("GET /big HTTP/1.1\r\nHost: x\r\n\r\n")));
  beast::flat_buffer buffer;
  beast::http::response_parser<beast::http::string_body> parser;
  parser.body_limit(boost::none);
  boost::system::error_code ec;
  beast::http::read(socket, buffer, parser, ec);
  EXPECT_FALSE(ec) << ec.message();
  EXPECT_EQ(parser.get().body().size(), kSize);
  EXPECT_EQ(parser.get().body().back(), 'y');
  socket.close();
  listener.value()->stop();
  server_ioc.stop();
  io.join();
}

}  // namespace
}  // namespace pagoda::http
