// POST /tokenize and POST /detokenize, with vLLM's request and response shapes:
//   {"prompt": str, "add_special_tokens": true, "return_token_strs": false}
//   or {"messages": [...], "add_generation_prompt": true, "add_special_tokens": false, "tools"?}
//   → {"count", "max_model_len", "tokens", "token_strs"}
//   {"tokens": [ids]} → {"prompt": text}
#include <fmt/format.h>

#include "openai/chat_prompt.h"
#include "openai/field_reader.h"
#include "openai/json_response.h"
#include "openai/logprobs_format.h"
#include "openai/service_context.h"
#include "openai/wire/json_util.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::openai {

namespace {

// Parses the body and checks "model"; sends the error and returns nullopt on failure.
std::optional<Json> read_body(const ServiceContext& ctx, const http::HttpRequest& request,
                              http::Responder& responder) {
  auto body = parse_json_object(request.body);
  if (!body.ok()) {
    responder.send(error_response(api_error_from(body.error())));
    return std::nullopt;
  }
  if (auto error = ctx.check_model(body.value())) {
    responder.send(error_response(*error));
    return std::nullopt;
  }
  return std::move(body.value());
}

void tokenize(const ServiceContext& ctx, const Json& body, http::Responder& responder) {
  FieldReader reader(body);
  const bool return_strs = reader.boolean("return_token_strs").value_or(false);
  std::vector<int32_t> ids;
  if (reader.value("messages")) {
    if (reader.error()) return responder.send(error_response(*reader.error()));
    auto prompt = build_chat_prompt(ctx, body);
    if (!prompt.ok()) return responder.send(error_response(prompt.error()));
    ids = std::move(prompt.value().token_ids);
  } else {
    auto text = reader.string("prompt");
    const bool add_special = reader.boolean("add_special_tokens").value_or(true);
    if (!text && !reader.error())
      reader.fail(invalid_field("prompt", "either 'prompt' or 'messages' is required"));
    if (reader.error()) return responder.send(error_response(*reader.error()));
    ids = ctx.engine.tokenizer().encode(*text, add_special, /*parse_special=*/true);
  }
  Json strs = nullptr;
  if (return_strs) {
    strs = Json::array();
    for (int32_t id : ids) strs.push_back(token_text(ctx.engine.tokenizer(), id));
  }
  responder.send(json_response(200, {{"count", ids.size()},
                                     {"max_model_len", ctx.engine.info().max_model_len},
                                     {"tokens", ids},
                                     {"token_strs", std::move(strs)}}));
}

void detokenize(const ServiceContext& ctx, const Json& body, http::Responder& responder) {
  FieldReader reader(body);
  const int64_t vocab = ctx.engine.tokenizer().vocab_size();
  auto tokens = reader.integer_list("tokens", 0, vocab - 1);
  if (!tokens && !reader.error()) reader.fail(invalid_field("tokens", "'tokens' is required"));
  if (reader.error()) return responder.send(error_response(*reader.error()));
  std::vector<int32_t> ids(tokens->begin(), tokens->end());
  responder.send(json_response(200, {{"prompt", ctx.engine.tokenizer().decode(ids, false)}}));
}

}  // namespace

void handle_tokenize(ServiceContext& ctx, const http::HttpRequest& request,
                     std::shared_ptr<http::Responder> responder) {
  ctx.run_on_worker(responder, request, [&ctx, request, responder] {
    if (auto body = read_body(ctx, request, *responder)) tokenize(ctx, *body, *responder);
  });
}

void handle_detokenize(ServiceContext& ctx, const http::HttpRequest& request,
                       std::shared_ptr<http::Responder> responder) {
  ctx.run_on_worker(responder, request, [&ctx, request, responder] {
    if (auto body = read_body(ctx, request, *responder)) detokenize(ctx, *body, *responder);
  });
}

}  // namespace pagoda::openai
