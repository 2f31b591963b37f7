#include "io/hub/http_client.h"

#include <curl/curl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <mutex>

namespace pagoda {

namespace {

// Seconds to wait for a connection, and for a stalled transfer (under one
// byte per second) before giving up.
constexpr long kConnectTimeoutS = 15;
constexpr long kStallTimeoutS = 60;

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return std::string(s);
}

// State of one transfer, shared with curl's callbacks.
struct Transfer {
  HttpResponse response;
  std::FILE* out = nullptr;  // downloads: where a 2xx body goes
  uint64_t offset = 0;       // bytes already in `out` before this transfer
  uint64_t written = 0;      // bytes of this transfer written to `out`
  bool truncated = false;    // `out` was emptied (a 200 to a range request)
  bool write_failed = false;
  const std::function<void(uint64_t)>* on_bytes = nullptr;
};

// Collects the headers of the latest response (a new status line starts a
// new response when redirects are followed).
size_t on_header(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  std::string_view line(data, size * n);
  if (line.rfind("HTTP/", 0) == 0) {  // "HTTP/1.1 206 Partial Content"
    t->response.headers.clear();
    const size_t space = line.find(' ');
    t->response.status = space == std::string_view::npos
                             ? 0
                             : std::atol(std::string(line.substr(space + 1, 3)).c_str());
    return size * n;
  }
  const size_t colon = line.find(':');
  if (colon != std::string_view::npos) {
    t->response.headers[lower(std::string(line.substr(0, colon)))] = trim(line.substr(colon + 1));
  }
  return size * n;
}

size_t on_body(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * n;
  if (t->out == nullptr || t->response.status < 200 || t->response.status >= 300) {
    if (t->response.body.size() < (1u << 20)) t->response.body.append(data, bytes);
    return bytes;
  }
  if (t->written == 0 && t->offset > 0 && t->response.status == 200 && !t->truncated) {
    // The server ignored the Range header and sends the whole file.
    std::fflush(t->out);
    if (ftruncate(fileno(t->out), 0) != 0) {
      t->write_failed = true;
      return 0;
    }
    std::fseek(t->out, 0, SEEK_SET);
    t->offset = 0;
    t->truncated = true;
  }
  if (std::fwrite(data, 1, bytes, t->out) != bytes) {
    t->write_failed = true;
    return 0;
  }
  t->written += bytes;
  if (t->on_bytes != nullptr && *t->on_bytes) (*t->on_bytes)(t->offset + t->written);
  return bytes;
}

}  // namespace

std::string HttpResponse::header(const std::string& name) const {
  auto it = headers.find(name);
  return it == headers.end() ? std::string() : it->second;
}

struct HttpClient::Impl {
  CURL* curl = nullptr;

  // Runs one transfer on `t`. on_header sets the status from each status
  // line, so on_body knows the status of the response it receives.
  Result<HttpResponse> perform(const std::string& method, const std::string& url,
                               const HttpHeaders& headers, bool follow, Transfer& t,
                               uint64_t range_from) {
    curl_easy_reset(curl);
    curl_slist* list = nullptr;
    for (const std::string& h : headers) list = curl_slist_append(list, h.c_str());
    char error[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "pagoda");
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, follow ? 1L : 0L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, kConnectTimeoutS);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, kStallTimeoutS);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
    if (method == "HEAD") curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
    if (range_from > 0) {
      const std::string range = fmt::format("{}-", range_from);
      curl_easy_setopt(curl, CURLOPT_RANGE, range.c_str());
    }
    const CURLcode rc = curl_easy_perform(curl);
    curl_slist_free_all(list);
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &t.response.status);
    char* effective = nullptr;
    curl_easy_getinfo(curl, CURLINFO_EFFECTIVE_URL, &effective);
    t.response.url = effective != nullptr ? effective : url;
    if (t.write_failed) {
      return make_error(ErrorCode::kIo, fmt::format("writing the download of {} failed", url));
    }
    if (rc != CURLE_OK) {
      return make_error(ErrorCode::kIo, fmt::format("{} {} failed: {}", method, url,
                                                    error[0] ? error : curl_easy_strerror(rc)));
    }
    return std::move(t.response);
  }
};

HttpClient::HttpClient() : impl_(std::make_unique<Impl>()) {
  init_curl_once();
  impl_->curl = curl_easy_init();
}

HttpClient::~HttpClient() {
  if (impl_->curl != nullptr) curl_easy_cleanup(impl_->curl);
}

Result<HttpResponse> HttpClient::request(const std::string& method, const std::string& url,
                                         const HttpHeaders& headers, bool follow_redirects) {
  Transfer t;
  return impl_->perform(method, url, headers, follow_redirects, t, 0);
}

Result<HttpResponse> HttpClient::download(const std::string& url, const HttpHeaders& headers,
                                          uint64_t offset, std::FILE* out, uint64_t* offset_used,
                                          const std::function<void(uint64_t)>& on_bytes) {
  Transfer t;
  t.out = out;
  t.offset = offset;
  t.on_bytes = &on_bytes;
  auto r = impl_->perform("GET", url, headers, true, t, offset);
  std::fflush(out);
  if (offset_used != nullptr) *offset_used = t.offset;
  return r;
}

std::string url_quote(const std::string& s, const std::string& safe) {
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' ||
        safe.find(static_cast<char>(c)) != std::string::npos) {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("%{:02X}", c);
    }
  }
  return out;
}

}  // namespace pagoda
