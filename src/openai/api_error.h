// Errors in OpenAI's shape: {"error": {"message", "type", "param", "code"}}
// with the HTTP status that OpenAI (or vLLM) uses for the same failure.
#pragma once

#include <string>

#include "core/result.h"
#include "http/transport_error.h"
#include "openai/wire/json_util.h"

namespace pagoda::openai {

struct ApiError {
  int status = 400;
  std::string message;
  std::string param;  // the offending request field, e.g. "messages[1].content"; "" → null
  std::string code;   // e.g. "context_length_exceeded"; "" → null
};

// 400 invalid_request_error naming `param`.
ApiError invalid_field(std::string param, std::string message);

// 503 service_unavailable: the server is draining.
ApiError shutting_down_error();
// 500 internal_error naming the request id (the log has the details), worded
// as the transport words its own (http::internal_error).
ApiError internal_error(const std::string& request_id);

// Maps an engine/library error: kInvalidArgument → 400, kNotFound → 404,
// kUnsupported → 400, kResourceExhausted → 429, everything else → 500.
ApiError api_error_from(const Error& error);
// An error the transport answers itself (a malformed HTTP request, a limit), as
// the API words it: same status, message and code, no param.
ApiError api_error_from(const http::TransportError& error);

// "type" for a status: invalid_request_error (4xx), authentication_error (401),
// rate_limit_error (429), server_error (5xx).
const char* error_type_for_status(int status);

Json api_error_json(const ApiError& error);

// A T or the ApiError to answer with.
template <typename T>
using ApiResult = Result<T, ApiError>;

}  // namespace pagoda::openai
