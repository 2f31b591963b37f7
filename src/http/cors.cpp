#include "http/cors.h"

#include <algorithm>
#include <cctype>

namespace pagoda::http {

namespace {

// What "*" allows among methods, and the headers a browser may always send
// (the Fetch standard's CORS-safelisted request headers).
constexpr std::string_view kAllMethods[] = {"DELETE", "GET",  "HEAD", "OPTIONS",
                                            "PATCH",  "POST", "PUT"};
constexpr std::string_view kSafelistedHeaders[] = {"accept", "accept-language", "content-language",
                                                   "content-type"};
// Seconds a browser may cache a preflight's answer.
constexpr std::string_view kMaxAgeSeconds = "600";

bool contains(const std::vector<std::string>& list, std::string_view value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& item : items) {
    if (!out.empty()) out += ", ";
    out += item;
  }
  return out;
}

}  // namespace

CorsPolicy::CorsPolicy(const CorsOptions& options)
    : origins_(options.allowed_origins),
      any_origin_(contains(options.allowed_origins, "*")),
      allow_credentials_(options.allow_credentials),
      any_header_(contains(options.allowed_headers, "*")) {
  if (contains(options.allowed_methods, "*")) {
    methods_.assign(std::begin(kAllMethods), std::end(kAllMethods));
  } else {
    methods_ = options.allowed_methods;
  }
  allow_methods_ = join(methods_);
  headers_.assign(std::begin(kSafelistedHeaders), std::end(kSafelistedHeaders));
  for (const std::string& header : options.allowed_headers) {
    if (header != "*" && !contains(headers_, lower(header))) headers_.push_back(lower(header));
  }
  std::sort(headers_.begin(), headers_.end());
  if (!any_header_) allow_headers_ = join(headers_);
}

bool CorsPolicy::is_preflight(const HttpRequest& request) {
  return request.method == "OPTIONS" && !request.header("origin").empty() &&
         !request.header("access-control-request-method").empty();
}

bool CorsPolicy::origin_allowed(std::string_view origin) const {
  return any_origin_ || contains(origins_, origin);
}

CorsPolicy::Preflight CorsPolicy::preflight(const HttpRequest& request) const {
  const std::string_view origin = request.header("origin");
  const std::string_view method = request.header("access-control-request-method");
  const std::string_view requested = request.header("access-control-request-headers");
  Preflight out;
  std::vector<std::string> refused;
  if (!origin_allowed(origin)) {
    refused.emplace_back("origin");
  } else if (echo_origin()) {
    out.headers.emplace_back("Access-Control-Allow-Origin", std::string(origin));
  } else {
    out.headers.emplace_back("Access-Control-Allow-Origin", "*");
  }
  if (echo_origin()) out.headers.emplace_back("Vary", "Origin");
  if (!contains(methods_, method)) refused.emplace_back("method");
  out.headers.emplace_back("Access-Control-Allow-Methods", allow_methods_);
  if (any_header_) {
    if (!requested.empty()) out.headers.emplace_back("Access-Control-Allow-Headers", requested);
  } else {
    out.headers.emplace_back("Access-Control-Allow-Headers", allow_headers_);
    std::string_view rest = requested;
    while (!rest.empty()) {
      const size_t comma = rest.find(',');
      const std::string_view name = trim(rest.substr(0, comma));
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      if (!name.empty() && !contains(headers_, lower(name))) {
        refused.emplace_back("headers");
        break;
      }
    }
  }
  out.headers.emplace_back("Access-Control-Max-Age", kMaxAgeSeconds);
  if (allow_credentials_) out.headers.emplace_back("Access-Control-Allow-Credentials", "true");
  out.refused = join(refused);
  return out;
}

HeaderList CorsPolicy::response_headers(std::string_view origin) const {
  HeaderList out;
  if (origin.empty() || !origin_allowed(origin)) return out;
  if (echo_origin()) {
    out.emplace_back("Access-Control-Allow-Origin", std::string(origin));
    out.emplace_back("Vary", "Origin");
  } else {
    out.emplace_back("Access-Control-Allow-Origin", "*");
  }
  if (allow_credentials_) out.emplace_back("Access-Control-Allow-Credentials", "true");
  return out;
}

}  // namespace pagoda::http
