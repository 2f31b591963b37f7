#include "openai/batch_line.h"

#include <fmt/format.h>

#include <algorithm>

#include "openai/wire/ids.h"

namespace pagoda::openai {

namespace {

BatchLineError line_error(Json custom_id, std::string code, std::string message) {
  return BatchLineError{std::move(custom_id), std::move(code), std::move(message)};
}

std::string supported_urls() {
  std::string out;
  for (std::string_view url : kBatchUrls) out += fmt::format("{}{}", out.empty() ? "" : ", ", url);
  return out;
}

}  // namespace

bool is_batch_line(const Json& line) {
  return line.is_object() && line.contains("custom_id") && line.contains("body");
}

Result<BatchRequestLine, BatchLineError> parse_batch_line(std::string_view text) {
  Result<Json> parsed = parse_json_object(text);
  if (!parsed.ok()) return line_error(nullptr, "invalid_json", parsed.error().message);
  const Json& line = parsed.value();
  auto field = [&line](const char* name) { return line.find(name); };
  auto custom_id = field("custom_id");
  if (custom_id == line.end() || !custom_id->is_string()) {
    return line_error(nullptr, "invalid_request", "'custom_id' must be a string");
  }
  BatchRequestLine out;
  out.custom_id = custom_id->get<std::string>();
  auto method = field("method");
  if (method == line.end() || !method->is_string() || method->get<std::string>() != "POST") {
    return line_error(out.custom_id, "invalid_request", "'method' must be \"POST\"");
  }
  auto url = field("url");
  if (url == line.end() || !url->is_string()) {
    return line_error(out.custom_id, "invalid_request", "'url' must be a string");
  }
  out.url = url->get<std::string>();
  if (std::find(std::begin(kBatchUrls), std::end(kBatchUrls), out.url) == std::end(kBatchUrls)) {
    return line_error(
        out.custom_id, "unsupported_url",
        fmt::format("url {} is not supported; supported: {}", out.url, supported_urls()));
  }
  auto body = field("body");
  if (body == line.end() || !body->is_object()) {
    return line_error(out.custom_id, "invalid_request", "'body' must be a JSON object");
  }
  out.body = *body;
  return out;
}

Json batch_response_line(const std::string& custom_id, const std::string& request_id, int status,
                         Json body) {
  Json error = nullptr;
  if (status != 200) {
    const Json* e = body.is_object() && body.contains("error") ? &body["error"] : nullptr;
    auto text = [e](const char* key) -> std::string {
      return e && e->contains(key) && (*e)[key].is_string() ? (*e)[key].get<std::string>() : "";
    };
    std::string code = text("code");
    if (code.empty()) code = text("type");
    error = {{"code", code}, {"message", text("message")}};
  }
  return {{"id", random_id("batch_req_")},
          {"custom_id", custom_id},
          {"response",
           {{"status_code", status}, {"request_id", request_id}, {"body", std::move(body)}}},
          {"error", std::move(error)}};
}

Json batch_error_line(const BatchLineError& error) {
  return {{"id", random_id("batch_req_")},
          {"custom_id", error.custom_id},
          {"response", nullptr},
          {"error", {{"code", error.code}, {"message", error.message}}}};
}

}  // namespace pagoda::openai
