// A small blocking HTTP(S) client over libcurl for the hub: requests with
// headers, redirects followed or not, and resumable downloads into a file.
// Proxies come from the usual environment variables (https_proxy, ...).
// One instance per thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/result.h"

namespace pagoda {

struct HttpResponse {
  long status = 0;
  std::string url;                             // the URL that gave this response
  std::map<std::string, std::string> headers;  // of this response; names lowercased
  std::string body;                            // empty for HEAD and for downloads

  // The header's value, or "" when absent. `name` in lower case.
  std::string header(const std::string& name) const;
};

// Request headers as "Name: value" lines.
using HttpHeaders = std::vector<std::string>;

class HttpClient {
 public:
  HttpClient();
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // One request. `method` "GET" or "HEAD"; redirects are followed only when
  // `follow_redirects`, else a 3xx is returned with its Location header.
  // Errors only for transport failures (no connection, timeout), naming the
  // URL; any HTTP status is a response.
  Result<HttpResponse> request(const std::string& method, const std::string& url,
                               const HttpHeaders& headers, bool follow_redirects);

  // GET `url` (following redirects) and append the body of a 2xx response to
  // `out`, asking for the bytes from `offset` on (a Range header) when
  // offset > 0. A 200 to a range request (the server ignored it) truncates
  // `out` first; `*offset_used` says where the written bytes start (offset
  // or 0). `on_bytes(total written so far incl. offset)` is called as data
  // arrives. The body of a non-2xx response is returned, not written. An
  // interrupted transfer is an error; what arrived stays in `out`.
  Result<HttpResponse> download(const std::string& url, const HttpHeaders& headers, uint64_t offset,
                                std::FILE* out, uint64_t* offset_used,
                                const std::function<void(uint64_t)>& on_bytes);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Percent-encodes `s` for a URL path; characters in `safe` (and unreserved
// ones: letters, digits, "-._~") stay as they are.
std::string url_quote(const std::string& s, const std::string& safe);

}  // namespace pagoda
