#include "openai/service_context.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/post.hpp>

#include "core/log.h"
#include "openai/chat_prompt.h"
#include "openai/field_reader.h"
#include "openai/json_response.h"
#include "openai/wire/ids.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::openai {

namespace {

int64_t longest_token_bytes(const Tokenizer& tokenizer) {
  size_t longest = 1;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) {
    longest = std::max(longest, tokenizer.id_to_token(id).size());
  }
  return static_cast<int64_t>(longest);
}

}  // namespace

ServiceContext::ServiceContext(Engine& engine_, ServiceOptions options_,
                               boost::asio::any_io_executor io_,
                               boost::asio::any_io_executor workers_,
                               boost::asio::any_io_executor heavy_workers_,
                               std::unique_ptr<ToolParser> tool_parser_,
                               std::unique_ptr<ReasoningParser> reasoning_parser_,
                               std::shared_ptr<http::PostGate> io_gate_)
    : engine(engine_),
      options(std::move(options_)),
      model_names(options.served_model_names.empty()
                      ? std::vector<std::string>{engine.info().served_model_name}
                      : options.served_model_names),
      model_name(model_names.front()),
      system_fingerprint("fp_pagoda_" + options.version),
      created(unix_seconds()),
      io(std::move(io_)),
      workers(workers_),
      heavy_workers(heavy_workers_ ? std::move(heavy_workers_) : std::move(workers_)),
      max_token_bytes(longest_token_bytes(engine.tokenizer())),
      tool_parser(std::move(tool_parser_)),
      reasoning_parser(std::move(reasoning_parser_)),
      io_gate(io_gate_ ? std::move(io_gate_) : std::make_shared<http::PostGate>()) {}

Result<std::unique_ptr<ServiceContext>> ServiceContext::create(
    Engine& engine, ServiceOptions options, boost::asio::any_io_executor io,
    boost::asio::any_io_executor workers, boost::asio::any_io_executor heavy_workers,
    std::shared_ptr<http::PostGate> io_gate) {
  std::unique_ptr<ToolParser> parser;
  if (options.tool_call_parser == "auto") {
    parser = detect_tool_parser(options.chat_template_text);
  } else if (options.tool_call_parser != "none") {
    PAGODA_ASSIGN_OR_RETURN(parser, make_tool_parser(options.tool_call_parser));
  }
  std::unique_ptr<ReasoningParser> reasoning;
  if (!options.reasoning_parser.empty()) {
    PAGODA_ASSIGN_OR_RETURN(reasoning, make_reasoning_parser(options.reasoning_parser));
  }
  auto context = std::make_unique<ServiceContext>(
      engine, std::move(options), std::move(io), std::move(workers), std::move(heavy_workers),
      std::move(parser), std::move(reasoning), std::move(io_gate));
  context->template_ignores_tools = chat_template_ignores_tools(engine);
  return context;
}

int64_t ServiceContext::max_prompt_bytes() const {
  return engine.info().max_model_len * max_token_bytes * 4;
}

void ServiceContext::run_on_worker(std::shared_ptr<http::Responder> responder,
                                   const http::HttpRequest& request,
                                   std::function<void()> fn) const {
  const bool heavy = request.body.size() > options.heavy_body_bytes;
  ++num_on_lanes;
  boost::asio::post(
      heavy ? heavy_workers : workers,
      [this, responder = std::move(responder), id = request.request_id, fn = std::move(fn)] {
        try {
          fn();
        } catch (const std::exception& e) {
          log_error("request {}: internal error: {}", id, e.what());
          responder->fail(failed_answer(internal_error(id)));
        }
        --num_on_lanes;
      });
}

bool ServiceContext::serves_model(std::string_view name) const {
  return std::find(model_names.begin(), model_names.end(), name) != model_names.end();
}

std::optional<ApiError> ServiceContext::check_model(const Json& body) const {
  FieldReader reader(body);
  auto model = reader.string("model");
  if (reader.error()) return reader.error();
  if (model && !serves_model(*model)) {
    std::string names;
    for (const std::string& name : model_names) names += (names.empty() ? "`" : ", `") + name + "`";
    return ApiError{
        404, fmt::format("The model `{}` does not exist; this server serves {}.", *model, names),
        "model", "model_not_found"};
  }
  return std::nullopt;
}

}  // namespace pagoda::openai
