// HTTP/1.1 request parsing shared by the connection (http_session.cpp, which
// reads asynchronously with the same Beast parser and limits) and the request
// fuzzer (which parses a byte string).
#pragma once

#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <optional>
#include <string_view>

#include "http/http_session.h"
#include "http/http_types.h"

namespace pagoda::http {

// A parsed Beast request as the handlers see it: header names lower-cased, the
// target split at '?', a fresh request id ("req-N").
HttpRequest to_http_request(boost::beast::http::request<boost::beast::http::string_body> req);

struct ParsedHttpRequest {
  std::optional<HttpRequest> request;  // nullopt: incomplete, malformed or over a limit
  size_t consumed = 0;                 // bytes of `bytes` that the request took
};

// Parses the first request of `bytes` with `limits`' header and body limits.
ParsedHttpRequest parse_http_request(std::string_view bytes, const HttpLimits& limits);

}  // namespace pagoda::http
