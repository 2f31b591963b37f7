// The server on a real loopback socket over the FakeEngine: HTTP/1.1
// keep-alive, chunked SSE, limits, malformed requests, disconnects and drain.
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <future>
#include <thread>

#include "fake_engine.h"
#include "openai/server.h"

namespace pagoda::openai {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using json = nlohmann::ordered_json;

class HttpServerTest : public ::testing::Test {
 protected:
  void SetUp() override { start_server(); }
  void TearDown() override { stop_server(); }

  // (Re)starts the engine and the server; `tweak` adjusts the options.
  void start_server(const std::function<void(ServerOptions&)>& tweak = {},
                    std::chrono::milliseconds step_time = std::chrono::milliseconds(2)) {
    stop_server();
    testing::FakeEngineOptions options;
    options.tokenizer_path = std::string(PAGODA_SHARED_DIR) + "/models/stories260K";
    options.step_time = step_time;
    auto engine = testing::FakeEngine::create(options);
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    engine_ = std::move(engine.value());
    ServerOptions server_options;
    server_options.port = 0;
    server_options.num_io_threads = 2;
    server_options.limits.max_body_bytes = 4096;
    server_options.flush_timeout = std::chrono::seconds(5);
    if (tweak) tweak(server_options);
    auto server = Server::start(*engine_, server_options);
    ASSERT_TRUE(server.ok()) << server.error().message;
    server_ = std::move(server.value());
  }

  // The server goes first: the engine must outlive it (Server's contract);
  // requests still live in the engine then answer into a closed gate.
  void stop_server() {
    server_.reset();
    engine_.reset();
  }

  // A connection from `source` (a loopback address) to the server.
  tcp::socket connect(const char* source = "127.0.0.1") {
    tcp::socket socket(ioc_);
    socket.open(tcp::v4());
    socket.bind(tcp::endpoint(net::ip::make_address(source), 0));
    socket.connect(tcp::endpoint(net::ip::make_address("127.0.0.1"), server_->port()));
    return socket;
  }
  // Whether the server closes `socket` within `timeout` (data it sends first
  // is skipped).
  static bool closed_within(tcp::socket& socket, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd pfd{socket.native_handle(), POLLIN, 0};
      if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) return false;
      char buf[4096];
      if (::recv(socket.native_handle(), buf, sizeof(buf), 0) <= 0) return true;
    }
  }
  // Closes `socket` with a reset (SO_LINGER 0) instead of a FIN.
  static void reset(tcp::socket& socket) {
    socket.set_option(net::socket_base::linger(true, 0));
    socket.close();
  }
  // Sends a request that runs for long on the slow engine (not streamed).
  static void send_long_request(tcp::socket& socket) {
    const json request = {{"prompt", "go"}, {"max_tokens", 400}, {"ignore_eos", true}};
    net::write(socket, net::buffer(post("/v1/completions", request.dump())));
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

TEST_F(HttpServerTest, DisconnectAfterAnExtraByteAbortsTheRequest) {
  // The client sends one byte more than its request (a stray CR), then resets
  // the connection: the reset must still be seen and the request aborted.
  start_server({}, std::chrono::milliseconds(20));
  const size_t before = engine_->aborted_ids().size();
  auto socket = connect();
  send_long_request(socket);
  wait_for([&] { return engine_->num_live() == 1; });
  net::write(socket, net::buffer(std::string("\r")));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  reset(socket);
  wait_for([&] { return engine_->aborted_ids().size() == before + 1; });
  wait_for([&] { return engine_->num_live() == 0; });
}

TEST_F(HttpServerTest, ServerDestroyedWhileRequestsRunThenTheEngine) {
  // ~Server without shutdown(): the engine still holds the requests, whose
  // responders must neither keep the sessions nor post into the destroyed
  // I/O context when the engine drops them (this hung or crashed about one
  // suite run in ten before the responders held their sessions weakly).
  start_server({}, std::chrono::milliseconds(20));
  std::vector<tcp::socket> sockets;
  for (int i = 0; i < 8; ++i) {
    sockets.push_back(connect());
    send_long_request(sockets.back());
  }
  wait_for([&] { return engine_->num_live() == 8; });
  server_.reset();
  EXPECT_EQ(engine_->num_live(), 8);
  engine_.reset();  // drops the live requests and their responders
}

TEST_F(HttpServerTest, RequestPipelinedWhileOneRunsIsAnsweredNext) {
  auto socket = connect();
  net::write(socket,
             net::buffer(post("/v1/completions",
                              R"({"prompt": "go", "max_tokens": 50, "ignore_eos": true})")));
  wait_for([&] { return engine_->num_live() == 1; });
  net::write(socket, net::buffer(std::string("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")));
  beast::flat_buffer buffer;
  auto first = read_response(socket, buffer);
  EXPECT_EQ(json::parse(first.body())["usage"]["completion_tokens"], 50);
  EXPECT_EQ(read_response(socket, buffer).body(), "{}");
}

TEST_F(HttpServerTest, ShedsTheOldestIdleConnectionAtTheLimit) {
  start_server([](ServerOptions& o) { o.limits.max_connections = 64; });
  std::vector<tcp::socket> idle;
  for (int i = 0; i < 100; ++i) idle.push_back(connect());
  auto socket = connect();
  net::write(socket, net::buffer(std::string("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")));
  beast::flat_buffer buffer;
  EXPECT_EQ(read_response(socket, buffer).result_int(), 200);
  EXPECT_TRUE(closed_within(idle.front(), std::chrono::seconds(5))) << "the oldest was not shed";
  EXPECT_FALSE(closed_within(idle.back(), std::chrono::milliseconds(100)));
  wait_for([&] { return server_->stats().num_connections <= 64; });
}

TEST_F(HttpServerTest, RefusesWith503WhenEveryConnectionIsBusy) {
  start_server(
      [](ServerOptions& o) {
        o.limits.max_connections = 4;
        o.limits.max_connections_per_peer = 4;
      },
      std::chrono::milliseconds(20));
  std::vector<tcp::socket> busy;
  for (int i = 0; i < 4; ++i) {
    busy.push_back(connect());
    send_long_request(busy.back());
  }
  wait_for([&] { return engine_->num_live() == 4; });
  auto socket = connect();
  net::write(socket, net::buffer(std::string("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")));
  beast::flat_buffer buffer;
  auto response = read_response(socket, buffer);
  EXPECT_EQ(response.result_int(), 503);
  EXPECT_FALSE(response.keep_alive());
  const json error = json::parse(response.body())["error"];
  EXPECT_EQ(error["type"], "server_error");
  EXPECT_EQ(error["code"], "too_many_connections");
  EXPECT_TRUE(closed_within(socket, std::chrono::seconds(5)));
  EXPECT_EQ(engine_->num_live(), 4) << "no busy connection was shed";
  for (auto& s : busy) reset(s);
  wait_for([&] { return engine_->num_live() == 0; });
}

TEST_F(HttpServerTest, PerPeerLimitShedsThatPeersIdleAndSparesOtherPeers) {
  start_server([](ServerOptions& o) { o.limits.max_connections_per_peer = 3; },
               std::chrono::milliseconds(20));
  const std::string health = "GET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  beast::flat_buffer buffer;
  {
    // An idle connection of the peer makes room for its new one.
    auto idle = connect("127.0.0.2");
    std::vector<tcp::socket> busy;
    for (int i = 0; i < 2; ++i) {
      busy.push_back(connect("127.0.0.2"));
      send_long_request(busy.back());
    }
    wait_for([&] { return engine_->num_live() == 2; });
    auto socket = connect("127.0.0.2");
    net::write(socket, net::buffer(health));
    EXPECT_EQ(read_response(socket, buffer).result_int(), 200);
    EXPECT_TRUE(closed_within(idle, std::chrono::seconds(5)));
    for (auto& s : busy) reset(s);
    wait_for([&] { return engine_->num_live() == 0; });
  }
  std::vector<tcp::socket> busy;
  for (int i = 0; i < 3; ++i) {
    busy.push_back(connect("127.0.0.1"));
    send_long_request(busy.back());
  }
  wait_for([&] { return engine_->num_live() == 3; });
  auto refused = connect("127.0.0.1");
  net::write(refused, net::buffer(health));
  EXPECT_EQ(read_response(refused, buffer).result_int(), 503);
  auto other = connect("127.0.0.3");
  net::write(other, net::buffer(health));
  EXPECT_EQ(read_response(other, buffer).result_int(), 200);
  for (auto& s : busy) reset(s);
  wait_for([&] { return engine_->num_live() == 0; });
}

TEST_F(HttpServerTest, SlowHeaderIsClosedAfterTheHeaderTimeout) {
  start_server([](ServerOptions& o) { o.limits.header_timeout = std::chrono::seconds(1); });
  auto socket = connect();
  const std::string header = "GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaa";
  const auto start = std::chrono::steady_clock::now();
  bool closed = false;
  boost::system::error_code ec;
  for (char c : header) {  // a byte every 250 ms: about 13 s if never closed
    net::write(socket, net::buffer(&c, 1), ec);
    if (ec || closed_within(socket, std::chrono::milliseconds(250))) {
      closed = true;
      break;
    }
  }
  EXPECT_TRUE(closed);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
}

TEST_F(HttpServerTest, IdleKeepAliveConnectionIsClosedAfterTheKeepAliveTimeout) {
  start_server([](ServerOptions& o) { o.limits.keep_alive_timeout = std::chrono::seconds(1); });
  auto socket = connect();
  net::write(socket, net::buffer(std::string("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")));
  beast::flat_buffer buffer;
  EXPECT_TRUE(read_response(socket, buffer).keep_alive());
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(closed_within(socket, std::chrono::seconds(5)));
  EXPECT_GT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(800));
}

}  // namespace
}  // namespace pagoda::openai
