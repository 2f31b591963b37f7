#include "openai/api_error.h"

namespace pagoda::openai {

ApiError invalid_field(std::string param, std::string message) {
  return ApiError{400, std::move(message), std::move(param), ""};
}

ApiError shutting_down_error() {
  return ApiError{503, "the server is shutting down", "", "service_unavailable"};
}

ApiError internal_error(const std::string& request_id) {
  return api_error_from(http::internal_error(request_id));
}

ApiError api_error_from(const Error& error) {
  switch (error.code) {
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kUnsupported:
      return ApiError{400, error.message, "", ""};
    case ErrorCode::kNotFound:
      return ApiError{404, error.message, "", ""};
    case ErrorCode::kResourceExhausted:
      return ApiError{429, error.message, "", "rate_limit_exceeded"};
    default:
      return ApiError{500, error.message, "", "internal_error"};
  }
}

ApiError api_error_from(const http::TransportError& error) {
  return ApiError{error.status, error.message, "", error.code};
}

const char* error_type_for_status(int status) {
  if (status == 401) return "authentication_error";
  if (status == 429) return "rate_limit_error";
  if (status >= 500) return "server_error";
  return "invalid_request_error";
}

Json api_error_json(const ApiError& error) {
  auto or_null = [](const std::string& s) { return s.empty() ? Json() : Json(s); };
  return {{"error",
           {{"message", error.message},
            {"type", error_type_for_status(error.status)},
            {"param", or_null(error.param)},
            {"code", or_null(error.code)}}}};
}

}  // namespace pagoda::openai
