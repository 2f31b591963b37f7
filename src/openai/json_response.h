// The API's HTTP answers: a JSON body, an error in OpenAI's shape, and how an
// answer that fails ends (with that error, as a last SSE event once it streams).
#pragma once

#include "http/http_types.h"
#include "openai/api_error.h"
#include "openai/wire/json_util.h"

namespace pagoda::openai {

// A JSON body (dump_json: never throws).
http::HttpResponse json_response(int status, const Json& body);
http::HttpResponse error_response(const ApiError& error);
// error_response(error), or `data: {"error": ...}` once the answer streams.
http::FailedAnswer failed_answer(const ApiError& error);

}  // namespace pagoda::openai
