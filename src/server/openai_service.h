// The OpenAI-compatible API, independent of the transport: authentication,
// the drain gate and the route table. The HTTP listener feeds it requests.
#pragma once

#include <memory>

#include "server/router.h"
#include "server/service_context.h"

namespace pagoda::server {

class OpenAiService {
 public:
  explicit OpenAiService(std::unique_ptr<ServiceContext> context);

  // Answers `request` through `responder`: 401 without the API key (except
  // GET /health), 503 for generation and tokenization while draining,
  // otherwise the route's handler (404/405 from the router). Returns quickly.
  void handle(const HttpRequest& request, std::shared_ptr<Responder> responder);

  // New generation requests get 503 from now on.
  void set_draining() { context_->draining = true; }
  ServiceContext& context() { return *context_; }

 private:
  std::unique_ptr<ServiceContext> context_;
  Router router_;
};

}  // namespace pagoda::server
