#include "http/transport_error.h"

#include <fmt/format.h>

namespace pagoda::http {

FailedAnswer plain_text_answer(const TransportError& error) {
  HttpResponse response;
  response.status = error.status;
  response.content_type = "text/plain";
  response.body = error.message;
  return {std::move(response), ""};
}

TransportError internal_error(std::string_view request_id) {
  return {500, fmt::format("internal error (request {})", request_id), "internal_error"};
}

}  // namespace pagoda::http
