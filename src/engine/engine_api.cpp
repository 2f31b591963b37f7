// Engine::add_requests's default: one add_request after another, the added
// ones aborted when one is refused (all or none, but not in one step).
#include "engine/engine_api.h"

namespace pagoda {

Status Engine::add_requests(std::vector<GenerateRequest> requests, size_t* failed) {
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::string id = requests[i].request_id;
    Status st = add_request(std::move(requests[i]));
    if (!st.ok()) {
      for (size_t j = 0; j < i; ++j) abort(requests[j].request_id);
      if (failed != nullptr) *failed = i;
      return st;
    }
    requests[i].request_id = id;  // moved from: kept for the aborts above
  }
  return Status::Ok();
}

}  // namespace pagoda
