// Engine::add_requests's default: one add_request after another, the added
// ones aborted when one is refused (all or none, but not in one step).
#include "engine/engine_api.h"

namespace pagoda {

Status Engine::add_requests(std::vector<GenerateRequest> requests, size_t* failed) {
  std::vector<std::string> added;
  for (size_t i = 0; i < requests.size(); ++i) {
    std::string id = requests[i].request_id;
    if (Status st = add_request(std::move(requests[i])); !st.ok()) {
      for (const std::string& a : added) abort(a);
      if (failed != nullptr) *failed = i;
      return st;
    }
    added.push_back(std::move(id));
  }
  return Status::Ok();
}

}  // namespace pagoda
