// GET /v1/models, /v1/models/{id}, /health, /version, /metrics.
#include <fmt/format.h>

#include "openai/json_response.h"
#include "openai/metrics_text.h"
#include "openai/service_context.h"

namespace pagoda::openai {

namespace {

Json model_card(const ServiceContext& ctx, const std::string& name) {
  return {{"id", name},
          {"object", "model"},
          {"created", ctx.created},
          {"owned_by", "pagoda"},
          {"root", ctx.model_name},
          {"parent", nullptr},
          {"max_model_len", ctx.engine.info().max_model_len}};
}

}  // namespace

void handle_models(ServiceContext& ctx, const http::HttpRequest&,
                   std::shared_ptr<http::Responder> responder) {
  Json cards = Json::array();
  for (const std::string& name : ctx.model_names) cards.push_back(model_card(ctx, name));
  responder->send(json_response(200, {{"object", "list"}, {"data", std::move(cards)}}));
}

void handle_model(ServiceContext& ctx, const http::HttpRequest& request,
                  std::shared_ptr<http::Responder> responder) {
  constexpr std::string_view kPrefix = "/v1/models/";
  const std::string id =
      http::percent_decode(std::string_view(request.path).substr(kPrefix.size()));
  if (!ctx.serves_model(id)) {
    responder->send(error_response(ApiError{404, fmt::format("The model `{}` does not exist.", id),
                                            "model", "model_not_found"}));
    return;
  }
  responder->send(json_response(200, model_card(ctx, id)));
}

void handle_health(ServiceContext& ctx, const http::HttpRequest&,
                   std::shared_ptr<http::Responder> responder) {
  if (ctx.draining) {
    responder->send(error_response(shutting_down_error()));
    return;
  }
  responder->send(json_response(200, Json::object()));
}

void handle_version(ServiceContext& ctx, const http::HttpRequest&,
                    std::shared_ptr<http::Responder> responder) {
  responder->send(json_response(200, {{"version", ctx.options.version}}));
}

void handle_metrics(ServiceContext& ctx, const http::HttpRequest&,
                    std::shared_ptr<http::Responder> responder) {
  http::HttpResponse response;
  response.content_type = kPrometheusContentType;
  response.body = format_prometheus(
      ctx.engine.metrics(), ctx.model_name, ctx.engine.info().tensor_parallel_size,
      ctx.engine.info().pipeline_parallel_size, ctx.engine.info().weight_precision);
  responder->send(std::move(response));
}

}  // namespace pagoda::openai
