// The OpenAI batch file format, one request per line, as OpenAI's Batch API
// and `vllm run-batch` read and write it:
//   in:  {"custom_id": "...", "method": "POST", "url": "/v1/chat/completions",
//         "body": {...the request body...}}
//   out: {"id": "batch_req_...", "custom_id": "...",
//         "response": {"status_code": 200, "request_id": "...", "body": {...}},
//         "error": null}
// A request the API refused keeps its answer in "response" (status_code 4xx,
// body {"error": {...}}) and sums it up in "error": {"code", "message"}; a line
// that is no request at all (not JSON, a missing field, an unsupported url)
// has "response": null.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"
#include "openai/api_error.h"
#include "openai/wire/json_util.h"

namespace pagoda::openai {

// The urls a batch line may name; others (vLLM's /v1/embeddings, /score,
// /rerank) are refused per line.
inline constexpr std::string_view kBatchUrls[] = {"/v1/chat/completions", "/v1/completions"};

struct BatchRequestLine {
  std::string custom_id;
  std::string url;  // one of kBatchUrls
  Json body;        // a JSON object, validated later exactly as an HTTP body
};

// Why a line is no request: code "invalid_json", "invalid_request" (a missing
// or ill-typed custom_id / method / url / body, a method other than POST) or
// "unsupported_url". `custom_id` is null unless the line had a string one.
struct BatchLineError {
  Json custom_id;
  std::string code;
  std::string message;
};

// Whether a parsed line is in the batch format: an object with "custom_id"
// and "body" (the plain `pagoda generate` format has neither).
bool is_batch_line(const Json& line);

// Reads one line of a batch input file (JSON nested at most kMaxJsonDepth).
Result<BatchRequestLine, BatchLineError> parse_batch_line(std::string_view text);

// The output line of an answered request: `status` and `body` are the HTTP
// status and JSON body the server would send. For a status other than 200,
// "error" holds the body's error code (its type when the code is null) and
// message.
Json batch_response_line(const std::string& custom_id, const std::string& request_id, int status,
                         Json body);

// The output line of a line that is no request ("response": null).
Json batch_error_line(const BatchLineError& error);

}  // namespace pagoda::openai
