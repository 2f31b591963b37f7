#include "server/router.h"

#include <fmt/format.h>

namespace pagoda::server {

void Router::add(std::string method, std::string path, Handler handler) {
  routes_.push_back({std::move(method), std::move(path), false, std::move(handler)});
}

void Router::add_prefix(std::string method, std::string prefix, Handler handler) {
  routes_.push_back({std::move(method), std::move(prefix), true, std::move(handler)});
}

bool Router::matches(const Route& route, const std::string& path) const {
  if (!route.is_prefix) return route.path == path;
  return path.size() > route.path.size() && path.compare(0, route.path.size(), route.path) == 0;
}

void Router::dispatch(const HttpRequest& request, std::shared_ptr<Responder> responder) const {
  std::string allow;
  for (const auto& route : routes_) {
    if (!matches(route, request.path)) continue;
    if (route.method == request.method) {
      route.handler(request, std::move(responder));
      return;
    }
    if (!allow.empty()) allow += ", ";
    allow += route.method;
  }
  if (allow.empty()) {
    responder->send(error_response(ApiError{
        404, fmt::format("no route for {} {}", request.method, request.path), "", "not_found"}));
    return;
  }
  HttpResponse response =
      error_response(ApiError{405,
                              fmt::format("method {} is not allowed on {}; allowed: {}",
                                          request.method, request.path, allow),
                              "", "method_not_allowed"});
  response.headers.emplace_back("Allow", allow);
  responder->send(std::move(response));
}

}  // namespace pagoda::server
