#include "openai/request_log.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/log.h"
#include "core/utf8.h"
#include "sample/sampling_fields.h"

namespace pagoda::openai {

namespace {

using Json = nlohmann::json;

// The first `max_chars` code points of `text` (whole when nullopt), and
// whether it was cut.
std::pair<std::string_view, bool> cut_text(std::string_view text,
                                           std::optional<int64_t> max_chars) {
  if (!max_chars) return {text, false};
  size_t end = 0;
  for (int64_t n = 0; n < *max_chars && end < text.size(); ++n) {
    end += utf8_len(static_cast<unsigned char>(text[end]));
  }
  end = std::min(end, text.size());
  return {text.substr(0, end), end < text.size()};
}

Json params_json(const SamplingParams& params) {
  Json out = Json::object();
  for_each_numeric_field([&](const auto& field) {
    const auto& value = params.*field.member;
    if constexpr (std::decay_t<decltype(field)>::kOptional) {
      if (value) out[std::string(field.name)] = *value;
    } else {
      out[std::string(field.name)] = value;
    }
  });
  for (const BoolField& field : kBoolSamplingFields)
    out[std::string(field.name)] = params.*field.member;
  if (params.seed) out["seed"] = *params.seed;
  if (!params.stop.empty()) out["stop"] = params.stop;
  if (!params.stop_token_ids.empty()) out["stop_token_ids"] = params.stop_token_ids;
  if (!params.logit_bias.empty()) {
    Json bias = Json::object();
    for (const auto& [id, value] : params.logit_bias) bias[std::to_string(id)] = value;
    out["logit_bias"] = std::move(bias);
  }
  return out;
}

}  // namespace

std::string request_log_line(std::string_view request_id, std::string_view prompt,
                             std::span<const int32_t> prompt_token_ids,
                             const SamplingParams& params, std::optional<int64_t> max_log_len) {
  const auto [text, text_cut] = cut_text(prompt, max_log_len);
  size_t num_ids = prompt_token_ids.size();
  if (max_log_len) num_ids = std::min<size_t>(num_ids, static_cast<size_t>(*max_log_len));
  std::string ids;
  for (size_t i = 0; i < num_ids; ++i) ids += (i ? ", " : "") + std::to_string(prompt_token_ids[i]);
  if (num_ids < prompt_token_ids.size()) ids += ", ...";
  const std::string quoted =
      Json(std::string(text)).dump(-1, ' ', false, Json::error_handler_t::replace);
  return fmt::format("request {}: prompt: {}{}, prompt_token_ids: [{}], params: {}", request_id,
                     quoted, text_cut ? "..." : "", ids,
                     params_json(params).dump(-1, ' ', false, Json::error_handler_t::replace));
}

void log_request(const RequestLogOptions& options, std::string_view request_id,
                 std::string_view prompt, std::span<const int32_t> prompt_token_ids,
                 const SamplingParams& params) {
  if (!options.enabled) return;
  log_info("{}",
           request_log_line(request_id, prompt, prompt_token_ids, params, options.max_log_len));
}

}  // namespace pagoda::openai
