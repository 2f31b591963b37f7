#include "http/http_parse.h"

#include <fmt/format.h>

#include <atomic>
#include <boost/asio/buffer.hpp>
#include <boost/beast/http/parser.hpp>
#include <cctype>

namespace pagoda::http {

namespace beast = boost::beast;

namespace {
std::atomic<uint64_t> g_next_request_id{1};
}  // namespace

HttpRequest to_http_request(beast::http::request<beast::http::string_body> req) {
  HttpRequest out;
  out.method = std::string(req.method_string());
  const std::string_view target(req.target().data(), req.target().size());
  const size_t q = target.find('?');
  out.path = std::string(target.substr(0, q));
  if (q != std::string_view::npos) out.query = std::string(target.substr(q + 1));
  for (const auto& field : req) {
    std::string name(field.name_string());
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    out.headers.emplace_back(std::move(name), std::string(field.value()));
  }
  out.body = std::move(req.body());
  out.request_id = fmt::format("req-{}", g_next_request_id++);
  return out;
}

ParsedHttpRequest parse_http_request(std::string_view bytes, const HttpLimits& limits) {
  beast::http::request_parser<beast::http::string_body> parser;
  parser.header_limit(static_cast<uint32_t>(limits.max_header_bytes));
  parser.body_limit(static_cast<uint64_t>(limits.max_body_bytes));
  parser.eager(true);
  boost::beast::error_code ec;
  const size_t used = parser.put(boost::asio::buffer(bytes.data(), bytes.size()), ec);
  if (ec || !parser.is_done()) return {};
  return {to_http_request(parser.release()), used};
}

}  // namespace pagoda::http
