// The OpenAI-compatible API, independent of the transport: its routes and the
// one dispatch step that answers a request. The HTTP listener's handler is
// handle().
#pragma once

#include <memory>

#include "openai/service_context.h"

namespace pagoda::openai {

class OpenAiService {
 public:
  explicit OpenAiService(std::unique_ptr<ServiceContext> context);

  // Matches `request` to its route once (match_route over the API's routes),
  // then answers through `responder`: 401 without the API key (except on
  // /health), 503 for generation and tokenization while draining, 404 / 405
  // (with Allow) for a miss, otherwise the route's handler. Returns quickly.
  void handle(const http::HttpRequest& request, std::shared_ptr<http::Responder> responder);

  // New generation requests get 503 from now on.
  void set_draining() { context_->draining = true; }
  ServiceContext& context() { return *context_; }

 private:
  std::unique_ptr<ServiceContext> context_;
};

}  // namespace pagoda::openai
