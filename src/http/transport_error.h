// The errors the transport answers itself -- a malformed or oversized request,
// a refused connection, a handler that threw or dropped its Responder -- and
// the ErrorFormat through which the protocol served words them like its own.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "http/http_types.h"

namespace pagoda::http {

struct TransportError {
  int status = 500;
  std::string message;
  std::string code;  // a machine-readable name, e.g. "request_too_large"
};

// The answer to a transport error. Runs on I/O threads: must not block.
using ErrorFormat = std::function<FailedAnswer(const TransportError& error)>;

// The ErrorFormat of a listener given none: the message as a text/plain body;
// a stream just ends.
FailedAnswer plain_text_answer(const TransportError& error);

// 500 "internal_error" naming the request id (the log has the details).
TransportError internal_error(std::string_view request_id);

}  // namespace pagoda::http
