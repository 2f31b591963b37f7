// Transport-independent HTTP request/response types and the Responder through
// which a handler answers. Handlers never see sockets, so they are testable
// without a network.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pagoda::http {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // target without the query string, e.g. "/v1/completions"
  std::string query;   // after '?', without it
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-case
  std::string body;
  std::string request_id;  // assigned by the server; used in logs

  // The first header named `name` (lower-case), or "".
  std::string_view header(std::string_view name) const;
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  HttpHeaders headers;  // extra headers, e.g. Allow
};

// How an answer that fails ends: with `response` when nothing was sent yet;
// once a stream has started, with `stream_tail` as its last data.
struct FailedAnswer {
  HttpResponse response;
  std::string stream_tail;
};

// Decodes %XX escapes of a URL path segment ("a%2Fb" → "a/b"); malformed
// escapes are kept as they are.
std::string percent_decode(std::string_view text);

// How a handler answers one request: either send() once, or start_stream(),
// any number of write()s, then end_stream(). All methods are thread-safe and
// never block (data is queued per connection). Calls after the client went
// away are ignored.
class Responder {
 public:
  virtual ~Responder() = default;
  virtual void send(HttpResponse response) = 0;
  // Sends the status line and headers of a chunked response (`headers`: extra ones).
  virtual void start_stream(int status, std::string content_type, HttpHeaders headers) = 0;
  virtual void write(std::string data) = 0;
  virtual void end_stream() = 0;
  // Ends the answer with `answer`: its response if nothing was sent yet, else
  // its stream tail and the end of the stream.
  virtual void fail(FailedAnswer answer) = 0;
  // `fn` runs at most once, on some server thread, if the client disconnects
  // (or stops reading) before the response is complete; at once if it already
  // has. Registering again replaces the previous callback.
  virtual void on_cancel(std::function<void()> fn) = 0;
};

}  // namespace pagoda::http
