#include "openai/route_table.h"

namespace pagoda::openai {

namespace {

bool has_path(const Route& route, std::string_view path) {
  if (route.match == PathMatch::kExact) return route.path == path;
  return path.size() > route.path.size() && path.starts_with(route.path);
}

}  // namespace

RouteMatch match_route(std::span<const Route> routes, std::string_view method,
                       std::string_view path) {
  RouteMatch out;
  bool method_gated = false;
  for (const Route& route : routes) {
    if (route.method == method && route.drain_gated) method_gated = true;
    if (!has_path(route, path)) continue;
    if (!route.needs_api_key) out.needs_api_key = false;
    if (route.method == method) {
      if (!out.route) out.route = &route;
      continue;
    }
    if (!out.allow.empty()) out.allow += ", ";
    out.allow += route.method;
  }
  out.drain_gated = out.route ? out.route->drain_gated : method_gated;
  if (out.route) out.allow.clear();
  return out;
}

}  // namespace pagoda::openai
