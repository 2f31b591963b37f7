// Maps (method, path) to a handler. An unknown path answers 404; a known path
// with another method answers 405 with an Allow header.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "server/http_types.h"

namespace pagoda::server {

using Handler = std::function<void(const HttpRequest&, std::shared_ptr<Responder>)>;

class Router {
 public:
  // Exact path match, e.g. ("POST", "/v1/completions").
  void add(std::string method, std::string path, Handler handler);
  // Matches every path that starts with `prefix` and has a non-empty rest,
  // e.g. "/v1/models/" matches "/v1/models/org/my-model".
  void add_prefix(std::string method, std::string prefix, Handler handler);

  // Runs the matching handler on the calling thread, or answers 404/405.
  void dispatch(const HttpRequest& request, std::shared_ptr<Responder> responder) const;

 private:
  struct Route {
    std::string method;
    std::string path;
    bool is_prefix = false;
    Handler handler;
  };
  bool matches(const Route& route, const std::string& path) const;

  std::vector<Route> routes_;
};

}  // namespace pagoda::server
