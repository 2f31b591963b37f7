#include "bench/openai_stream.h"

#include <nlohmann/json.hpp>

#include "bench/bench_constraint.h"

namespace pagoda::bench {

using nlohmann::json;

Api api_for_endpoint(std::string_view endpoint) {
  constexpr std::string_view kChatSuffix = "chat/completions";
  if (endpoint.size() >= kChatSuffix.size() &&
      endpoint.substr(endpoint.size() - kChatSuffix.size()) == kChatSuffix)
    return Api::kChat;
  return Api::kCompletions;
}

std::string build_request_body(Api api, const BenchRequest& request,
                               const PayloadOptions& options) {
  json body = {{"model", options.model},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}},
               {"temperature", options.temperature}};
  if (options.ignore_eos) body["ignore_eos"] = true;
  if (options.constraint) body["response_format"] = response_format_json(*options.constraint);
  if (api == Api::kChat) {
    body["messages"] = json::array({{{"role", "user"}, {"content", request.prompt_text}}});
    body["max_completion_tokens"] = request.output_len;
  } else {
    if (!request.prompt_ids.empty()) {
      body["prompt"] = request.prompt_ids;
    } else {
      body["prompt"] = request.prompt_text;
    }
    body["max_tokens"] = request.output_len;
  }
  return body.dump(-1, ' ', false, json::error_handler_t::replace);
}

void StreamAccumulator::on_event(std::string_view data, double t) {
  if (failed() || data == "[DONE]") return;
  json chunk;
  try {
    chunk = json::parse(data);
  } catch (const json::exception& e) {
    error_ = "malformed stream chunk: " + std::string(data.substr(0, 200));
    return;
  }
  if (!chunk.is_object()) {
    error_ = "stream chunk is not a JSON object: " + std::string(data.substr(0, 200));
    return;
  }
  if (auto it = chunk.find("error"); it != chunk.end() && !it->is_null()) {
    error_ = "server error in stream: " + it->dump();
    return;
  }
  if (auto it = chunk.find("choices"); it != chunk.end() && it->is_array() && !it->empty()) {
    if (record_.num_chunks == 0) {
      record_.ttft = t - record_.start_time;
    } else {
      record_.itl.push_back(t - last_);
    }
    last_ = t;
    ++record_.num_chunks;
    record_.latency = t - record_.start_time;
  }
  if (auto it = chunk.find("usage"); it != chunk.end() && it->is_object()) {
    auto ct = it->find("completion_tokens");
    if (ct != it->end() && ct->is_number_integer()) record_.output_tokens = ct->get<int64_t>();
    auto pt = it->find("prompt_tokens");
    if (pt != it->end() && pt->is_number_integer()) record_.prompt_len = pt->get<int64_t>();
  }
}

void StreamAccumulator::finish(const std::string& error) {
  if (error_.empty() && !error.empty()) error_ = error;
  if (error_.empty() && record_.num_chunks == 0)
    error_ = "never received a stream chunk with a choice (no TTFT)";
  record_.success = error_.empty();
  record_.error = error_;
}

}  // namespace pagoda::bench
