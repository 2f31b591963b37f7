// Cross-origin resource sharing (CORS), with the semantics of vLLM's server
// (Starlette's CORSMiddleware), so that browser clients can call the API: the
// preflight (OPTIONS with Origin and Access-Control-Request-Method) is
// answered by the transport, before routing and the API key; every other
// response to a request with an Origin header carries the
// Access-Control-Allow-* headers the policy grants.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/http_types.h"

namespace pagoda::http {

struct CorsOptions {
  // "*" in a list allows every value; an empty origin list allows none (no
  // CORS headers are sent, and every preflight is refused).
  std::vector<std::string> allowed_origins{"*"};
  std::vector<std::string> allowed_methods{"*"};
  std::vector<std::string> allowed_headers{"*"};
  bool allow_credentials = false;
};

using HeaderList = std::vector<std::pair<std::string, std::string>>;

class CorsPolicy {
 public:
  explicit CorsPolicy(const CorsOptions& options);

  // OPTIONS with Origin and Access-Control-Request-Method headers.
  static bool is_preflight(const HttpRequest& request);

  struct Preflight {
    // "" when the origin, the method and every requested header are allowed;
    // else which are not, e.g. "origin, headers".
    std::string refused;
    // Access-Control-Allow-Origin (or Vary: Origin), -Methods, -Headers (the
    // requested ones when every header is allowed), -Max-Age and, with
    // credentials, -Credentials.
    HeaderList headers;
  };
  Preflight preflight(const HttpRequest& request) const;

  // The headers of an ordinary response to a request whose Origin header is
  // `origin` ("": it has none, no headers). Every origin allowed and no
  // credentials: Access-Control-Allow-Origin "*"; otherwise an allowed origin
  // is echoed, with Vary: Origin (and Access-Control-Allow-Credentials).
  HeaderList response_headers(std::string_view origin) const;

 private:
  bool origin_allowed(std::string_view origin) const;
  // The origin is echoed rather than "*": a list of origins, or credentials
  // (a browser refuses "*" on a credentialed request).
  bool echo_origin() const { return !any_origin_ || allow_credentials_; }

  std::vector<std::string> origins_;
  bool any_origin_ = false;
  bool allow_credentials_ = false;
  bool any_header_ = false;
  std::vector<std::string> methods_;  // "*" expanded to every method
  std::vector<std::string> headers_;  // lower-case, with the CORS-safelisted ones
  std::string allow_methods_;         // the Access-Control-Allow-Methods value
  std::string allow_headers_;         // the Access-Control-Allow-Headers value ("" with "*")
};

}  // namespace pagoda::http
