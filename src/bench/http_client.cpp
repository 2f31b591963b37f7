#include "bench/http_client.h"

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>

namespace pagoda::bench {

namespace beast = boost::beast;
namespace http = beast::http;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

Result<HttpUrl> parse_base_url(std::string_view url) {
  constexpr std::string_view kScheme = "http://";
  std::string u(url);
  if (u.rfind("https://", 0) == 0)
    return make_error(ErrorCode::kUnsupported,
                      "base URL '" + u + "': https is not supported, use http://");
  if (u.rfind(kScheme, 0) != 0)
    return make_error(ErrorCode::kInvalidArgument, "base URL '" + u + "' must start with http://");
  std::string rest = u.substr(kScheme.size());
  HttpUrl out;
  auto slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  if (slash != std::string::npos) out.base_path = rest.substr(slash);
  while (!out.base_path.empty() && out.base_path.back() == '/') out.base_path.pop_back();
  auto colon = authority.rfind(':');
  if (!authority.empty() && authority[0] == '[') {  // [ipv6]:port
    auto close = authority.find(']');
    if (close == std::string::npos)
      return make_error(ErrorCode::kInvalidArgument,
                        "base URL '" + u + "': unterminated [ipv6] host");
    out.host = authority.substr(1, close - 1);
    out.port = close + 1 < authority.size() && authority[close + 1] == ':'
                   ? authority.substr(close + 2)
                   : "80";
  } else if (colon != std::string::npos) {
    out.host = authority.substr(0, colon);
    out.port = authority.substr(colon + 1);
  } else {
    out.host = authority;
    out.port = "80";
  }
  if (out.host.empty())
    return make_error(ErrorCode::kInvalidArgument, "base URL '" + u + "' has no host");
  if (out.port.empty() || out.port.find_first_not_of("0123456789") != std::string::npos)
    return make_error(ErrorCode::kInvalidArgument,
                      "base URL '" + u + "' has a bad port '" + out.port + "'");
  return out;
}

Result<HttpResponse> http_fetch(const HttpUrl& url, std::string_view method, std::string_view path,
                                const std::string& body, const std::string& api_key,
                                double timeout_s) {
  std::string where = "http://" + url.host + ":" + url.port + url.target(path);
  asio::io_context ioc;
  beast::error_code ec;
  tcp::resolver resolver(ioc);
  auto endpoints = resolver.resolve(url.host, url.port, ec);
  if (ec) return make_error(ErrorCode::kIo, "cannot resolve " + where + ": " + ec.message());

  beast::tcp_stream stream(ioc);
  stream.expires_after(std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000.0)));
  http::request<http::string_body> req{http::string_to_verb({method.data(), method.size()}),
                                       url.target(path), 11};
  req.set(http::field::host, url.host);
  req.set(http::field::user_agent, "pagoda-bench");
  if (!api_key.empty()) req.set(http::field::authorization, "Bearer " + api_key);
  if (!body.empty()) {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
  }
  req.keep_alive(false);
  req.prepare_payload();

  beast::flat_buffer buffer;
  http::response_parser<http::string_body> parser;
  parser.body_limit(std::uint64_t{1}
                    << 40);  // not boost::none: Beast 1.74 then rejects every Content-Length
  beast::error_code result;
  stream.async_connect(endpoints, [&](beast::error_code e, const tcp::endpoint&) {
    if (e) return void(result = e);
    http::async_write(stream, req, [&](beast::error_code e2, size_t) {
      if (e2) return void(result = e2);
      http::async_read(stream, buffer, parser, [&](beast::error_code e3, size_t) { result = e3; });
    });
  });
  ioc.run();
  if (result)
    return make_error(ErrorCode::kIo,
                      std::string(method) + " " + where + " failed: " + result.message());
  HttpResponse out;
  out.status = static_cast<int>(parser.get().result_int());
  out.body = std::move(parser.get().body());
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
  return out;
}

}  // namespace pagoda::bench
