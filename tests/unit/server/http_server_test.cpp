// The server on a real loopback socket over the FakeEngine: HTTP/1.1
// keep-alive, chunked SSE, limits, malformed requests, disconnects and drain.
#include <gtest/gtest.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <future>
#include <thread>

#include "fake_engine.h"
#include "server/server.h"

namespace pagoda::server {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using json = nlohmann::ordered_json;

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::FakeEngineOptions options;
    options.tokenizer_path = std::string(PAGODA_SHARED_DIR) + "/models/stories260K";
    options.step_time = std::chrono::milliseconds(2);
    auto engine = testing::FakeEngine::create(options);
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    engine_ = std::move(engine.value());
    ServerOptions server_options;
    server_options.port = 0;
    server_options.num_io_threads = 2;
    server_options.limits.max_body_bytes = 4096;
    server_options.flush_timeout = std::chrono::seconds(5);
    auto server = Server::start(*engine_, server_options);
    ASSERT_TRUE(server.ok()) << server.error().message;
    server_ = std::move(server.value());
  }
  void TearDown() override {
    server_.reset();
    engine_.reset();
  }

  tcp::socket connect() {
    tcp::socket socket(ioc_);
    socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), server_->port()));
    return socket;
  }
  static std::string post(const std::string& path, const std::string& body,
                          const std::string& extra = "") {
    return "POST " + path +
           " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n" + extra + "\r\n" + body;
  }
  // Reads one response with Beast's client parser (dechunks bodies).
  static http::response<http::string_body> read_response(tcp::socket& socket,
                                                         beast::flat_buffer& buffer) {
    http::response<http::string_body> response;
    http::read(socket, buffer, response);
    return response;
  }
  // Reads until the server closes the connection.
  static std::string read_all(tcp::socket& socket) {
    std::string out;
    boost::system::error_code ec;
    char buf[4096];
    for (;;) {
      size_t n = socket.read_some(net::buffer(buf), ec);
      if (ec) break;
      out.append(buf, n);
    }
    return out;
  }
  void wait_for(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    EXPECT_TRUE(done());
  }

  net::io_context ioc_;
  std::unique_ptr<testing::FakeEngine> engine_;
  std::unique_ptr<Server> server_;
};

TEST_F(HttpServerTest, KeepAliveServesManyRequestsOnOneConnection) {
  auto socket = connect();
  beast::flat_buffer buffer;
  for (int i = 0; i < 3; ++i) {
    net::write(socket, net::buffer(post("/v1/completions",
                                        R"({"prompt": "SAY: hi there", "max_tokens": 5})")));
    auto response = read_response(socket, buffer);
    EXPECT_EQ(response.result_int(), 200);
    EXPECT_TRUE(response.keep_alive());
    EXPECT_EQ(json::parse(response.body())["choices"][0]["text"], "hi there");
  }
  // Two pipelined requests in one write are answered in order.
  net::write(
      socket,
      net::buffer(
          "GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /version HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(read_response(socket, buffer).body(), "{}");
  EXPECT_EQ(json::parse(read_response(socket, buffer).body())["version"], "0.0.0");
}

TEST_F(HttpServerTest, StreamsChunkedServerSentEvents) {
  auto socket = connect();
  net::write(socket, net::buffer(post("/v1/completions",
                                      R"({"prompt": "SAY: one two three", "stream": true})",
                                      "Connection: close\r\n")));
  const std::string raw = read_all(socket);
  ASSERT_NE(raw.find("Transfer-Encoding: chunked\r\n"), std::string::npos) << raw;
  ASSERT_NE(raw.find("Content-Type: text/event-stream\r\n"), std::string::npos);
  // De-chunk by hand (an independent reader of the framing).
  size_t pos = raw.find("\r\n\r\n") + 4;
  std::string body;
  for (;;) {
    const size_t line_end = raw.find("\r\n", pos);
    ASSERT_NE(line_end, std::string::npos);
    const size_t size = std::stoul(raw.substr(pos, line_end - pos), nullptr, 16);
    if (size == 0) {
      EXPECT_EQ(raw.substr(line_end), "\r\n\r\n");
      break;
    }
    body += raw.substr(line_end + 2, size);
    EXPECT_EQ(raw.substr(line_end + 2 + size, 2), "\r\n");
    pos = line_end + 2 + size + 2;
  }
  std::string text;
  size_t start = 0;
  std::vector<std::string> events;
  while (start < body.size()) {
    const size_t end = body.find("\n\n", start);
    ASSERT_NE(end, std::string::npos);
    events.push_back(body.substr(start + 6, end - start - 6));
    start = end + 2;
  }
  ASSERT_EQ(events.back(), "[DONE]");
  for (size_t i = 0; i + 1 < events.size(); ++i)
    text += json::parse(events[i])["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, "one two three");
}

TEST_F(HttpServerTest, BodyLimitIs413) {
  {
    auto socket = connect();
    net::write(socket, net::buffer(post("/v1/completions", std::string(5000, ' '))));
    beast::flat_buffer buffer;
    auto response = read_response(socket, buffer);
    EXPECT_EQ(response.result_int(), 413);
    EXPECT_EQ(json::parse(response.body())["error"]["code"], "request_too_large");
    EXPECT_FALSE(response.keep_alive());
  }
  {
    // Chunked, so the size is only known while reading.
    auto socket = connect();
    std::string request =
        "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (int i = 0; i < 5; ++i) request += "3e8\r\n" + std::string(1000, 'a') + "\r\n";
    request += "0\r\n\r\n";
    net::write(socket, net::buffer(request));
    beast::flat_buffer buffer;
    EXPECT_EQ(read_response(socket, buffer).result_int(), 413);
  }
}

TEST_F(HttpServerTest, MalformedHttpIs400AndExpectContinueWorks) {
  {
    auto socket = connect();
    net::write(socket, net::buffer(std::string("BLAH\r\n\r\n")));
    beast::flat_buffer buffer;
    EXPECT_EQ(read_response(socket, buffer).result_int(), 400);
  }
  {
    auto socket = connect();
    const std::string body = R"({"prompt": "SAY: ok", "max_tokens": 3})";
    net::write(socket,
               net::buffer("POST /v1/completions HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                           "Content-Length: " +
                           std::to_string(body.size()) + "\r\n\r\n"));
    char buf[25];
    net::read(socket, net::buffer(buf));
    EXPECT_EQ(std::string(buf, 25), "HTTP/1.1 100 Continue\r\n\r\n");
    net::write(socket, net::buffer(body));
    beast::flat_buffer buffer;
    EXPECT_EQ(json::parse(read_response(socket, buffer).body())["choices"][0]["text"], "ok");
  }
}

TEST_F(HttpServerTest, DisconnectAbortsStreamingAndNonStreamingRequests) {
  for (bool stream : {true, false}) {
    const size_t before = engine_->aborted_ids().size();
    {
      auto socket = connect();
      json request = {
          {"prompt", "go"}, {"max_tokens", 400}, {"ignore_eos", true}, {"stream", stream}};
      net::write(socket, net::buffer(post("/v1/completions", request.dump())));
      wait_for([&] { return engine_->num_live() == 1; });
      if (stream) {
        char buf[64];
        socket.read_some(net::buffer(buf));  // the stream has started
      }
    }  // closes the socket
    wait_for([&] { return engine_->aborted_ids().size() == before + 1; });
    wait_for([&] { return engine_->num_live() == 0; });
  }
}

TEST_F(HttpServerTest, ShutdownDrainsInFlightRequests) {
  auto socket = connect();
  net::write(socket,
             net::buffer(post("/v1/completions",
                              R"({"prompt": "go", "max_tokens": 100, "ignore_eos": true})")));
  wait_for([&] { return engine_->num_live() == 1; });
  auto done = std::async(std::launch::async, [&] { server_->shutdown(); });
  beast::flat_buffer buffer;
  auto response = read_response(socket, buffer);
  EXPECT_EQ(response.result_int(), 200);
  EXPECT_EQ(json::parse(response.body())["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(json::parse(response.body())["usage"]["completion_tokens"], 100);
  done.get();
  tcp::socket late(ioc_);
  boost::system::error_code ec;
  late.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), server_->port()), ec);
  EXPECT_TRUE(ec) << "the listener is closed after shutdown";
}

}  // namespace
}  // namespace pagoda::server
