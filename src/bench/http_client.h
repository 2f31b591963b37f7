// Plain HTTP/1.1 client pieces of the benchmark: base-URL parsing and a
// one-shot request (GET /v1/models, POST /tokenize) on a fresh connection.
// Only http:// is supported (the benchmark talks to a local or in-cluster
// server; put a TLS proxy in front otherwise).
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"

namespace pagoda::bench {

struct HttpUrl {
  std::string host;
  std::string port;       // "80" when the URL names none
  std::string base_path;  // path prefix without a trailing '/', e.g. "" or "/proxy"

  // base_path + path (path starts with '/').
  std::string target(std::string_view path) const { return base_path + std::string(path); }
};

// "http://host[:port][/prefix]". Errors name the URL and the problem.
Result<HttpUrl> parse_base_url(std::string_view url);

struct HttpResponse {
  int status = 0;
  std::string body;
};

// Sends one request and reads the whole response. body empty: no body.
// api_key non-empty: "Authorization: Bearer <key>". Errors: resolution,
// connection, timeout (kIo), each naming the URL.
Result<HttpResponse> http_fetch(const HttpUrl& url, std::string_view method, std::string_view path,
                                const std::string& body, const std::string& api_key,
                                double timeout_s);

}  // namespace pagoda::bench
