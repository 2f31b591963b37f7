// A route table and the one pass that matches a request against it. Each
// route says how it is reached (method, and its path exactly or as a prefix)
// and which stages of the dispatch apply to it: the API-key check and the
// drain gate. OpenAiService::handle is the dispatch that runs those stages.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "http/http_types.h"

namespace pagoda::openai {

struct ServiceContext;

// Answers `request` through `responder`; runs on an I/O thread and returns
// quickly (service_context.h).
using RouteHandler = void (*)(ServiceContext& ctx, const http::HttpRequest& request,
                              std::shared_ptr<http::Responder> responder);

enum class PathMatch {
  kExact,   // the request's path is the route's path
  kPrefix,  // the request's path starts with the route's path and goes on ("/v1/models/a/b")
};

struct Route {
  std::string_view method;  // "GET", "POST", ...
  std::string_view path;
  PathMatch match = PathMatch::kExact;
  // false: the route's path is answered without the API key, whatever the
  // method (a wrong method gets its 405, not a 401).
  bool needs_api_key = true;
  bool drain_gated = false;  // refused with 503 while the service drains
  RouteHandler handler = nullptr;
};

// What one pass over a table finds for a request's method and path.
struct RouteMatch {
  const Route* route = nullptr;  // the first route of that method and path; nullptr: a miss
  // For a miss, the methods of the routes that have the path, in table order
  // and ", "-separated: the Allow header of a 405; "" when none has it (404).
  std::string allow;
  // Whether the request needs the API key: unless a route that has its path
  // does not.
  bool needs_api_key = true;
  // Whether the drain gate refuses the request: the route's drain_gated; for a
  // miss, whether a route of the request's method is drain-gated, so that while
  // draining the gate answers every request of a gated method alike.
  bool drain_gated = false;
};

RouteMatch match_route(std::span<const Route> routes, std::string_view method,
                       std::string_view path);

}  // namespace pagoda::openai
