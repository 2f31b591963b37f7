#include "server/service_context.h"

#include <fmt/format.h>

#include <boost/asio/post.hpp>

#include "core/log.h"
#include "server/field_reader.h"
#include "server/ids.h"

namespace pagoda::server {

ServiceContext::ServiceContext(Engine& engine_, ServiceOptions options_,
                               boost::asio::any_io_executor io_,
                               boost::asio::any_io_executor workers_,
                               std::unique_ptr<ToolParser> tool_parser_)
    : engine(engine_),
      options(std::move(options_)),
      model_name(options.served_model_name.empty() ? engine.info().served_model_name
                                                   : options.served_model_name),
      system_fingerprint("fp_pagoda_" + options.version),
      created(unix_seconds()),
      io(std::move(io_)),
      workers(std::move(workers_)),
      tool_parser(std::move(tool_parser_)) {}

Result<std::unique_ptr<ServiceContext>> ServiceContext::create(
    Engine& engine, ServiceOptions options, boost::asio::any_io_executor io,
    boost::asio::any_io_executor workers) {
  std::unique_ptr<ToolParser> parser;
  if (options.tool_call_parser == "auto") {
    parser = detect_tool_parser(options.chat_template_text);
  } else if (options.tool_call_parser != "none") {
    PAGODA_ASSIGN_OR_RETURN(parser, make_tool_parser(options.tool_call_parser));
  }
  return std::make_unique<ServiceContext>(engine, std::move(options), std::move(io),
                                          std::move(workers), std::move(parser));
}

void ServiceContext::run_on_worker(std::shared_ptr<Responder> responder, std::string request_id,
                                   std::function<void()> fn) const {
  boost::asio::post(
      workers, [responder = std::move(responder), id = std::move(request_id), fn = std::move(fn)] {
        try {
          fn();
        } catch (const std::exception& e) {
          log_error("request {}: internal error: {}", id, e.what());
          responder->fail(internal_error(id));
        }
      });
}

std::optional<ApiError> ServiceContext::check_model(const Json& body) const {
  FieldReader reader(body);
  auto model = reader.string("model");
  if (reader.error()) return reader.error();
  if (model && *model != model_name) {
    return ApiError{
        404,
        fmt::format("The model `{}` does not exist; this server serves `{}`.", *model, model_name),
        "model", "model_not_found"};
  }
  return std::nullopt;
}

}  // namespace pagoda::server
