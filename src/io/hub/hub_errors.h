// Clear errors for what a hub answers, in words a user can act on: a gated or
// private repo names HF_TOKEN, a 404 says "no such repo or revision", a
// transport failure names the URL and says how to work offline.
#pragma once

#include <string>

#include "core/result.h"
#include "io/hub/http_client.h"

namespace pagoda {

// What was asked of the hub, for messages.
struct HubRequestContext {
  std::string repo_id;
  std::string revision;
  std::string file;        // empty for the repo listing
  bool has_token = false;  // a token was sent
};

// The error for a non-success response `r` (status >= 400) from `r.url`,
// refined by the hub's X-Error-Code header (RepoNotFound, RevisionNotFound,
// EntryNotFound, GatedRepo) as huggingface_hub does.
Error hub_http_error(const HttpResponse& r, const HubRequestContext& what);

// `transport` (a failure to reach the hub) with a hint on working offline.
Error hub_network_error(const Error& transport, const HubRequestContext& what);

}  // namespace pagoda
