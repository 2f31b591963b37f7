// The OpenAI-protocol side of one benchmark request: the streamed request
// body for /v1/completions or /v1/chat/completions, and the interpretation of
// the SSE events that come back into a RequestRecord (see metrics.h for the
// timing definitions).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "bench/dataset.h"
#include "bench/metrics.h"
#include "sample/structured_output.h"

namespace pagoda::bench {

enum class Api { kCompletions, kChat };

// kChat when the endpoint path ends in "chat/completions", else kCompletions.
Api api_for_endpoint(std::string_view endpoint);

struct PayloadOptions {
  std::string model;
  bool ignore_eos = true;
  double temperature = 0.0;  // greedy: the cheapest sampling, and reproducible
  // json_object / json_schema: sent as response_format (bench_constraint.h).
  std::optional<StructuredOutputSpec> constraint;
};

// The JSON body: stream true, stream_options.include_usage true, max_tokens
// (completions) or max_completion_tokens (chat) = output_len, ignore_eos,
// and response_format when options.constraint is set.
// Completions send token ids as the prompt when the request has them; chat
// sends one user message with the prompt text.
std::string build_request_body(Api api, const BenchRequest& request, const PayloadOptions& options);

// Folds the events of one stream into `record`. Times are seconds on the
// benchmark clock; record.start_time must be set before the first event.
class StreamAccumulator {
 public:
  explicit StreamAccumulator(RequestRecord& record) : record_(record) {}

  // One SSE event's data, received at time t.
  void on_event(std::string_view data, double t);
  // Ends the stream: success when no error was seen and at least one choice
  // chunk arrived. `error` (e.g. a broken connection) marks it failed.
  void finish(const std::string& error = {});
  bool failed() const { return !error_.empty(); }

 private:
  RequestRecord& record_;
  double last_ = 0.0;
  std::string error_;
};

}  // namespace pagoda::bench
