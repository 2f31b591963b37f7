#include "io/hub/hub_errors.h"

#include <fmt/format.h>

namespace pagoda {

namespace {

std::string token_hint(bool has_token) {
  if (has_token) {
    return "the token sent (HF_TOKEN or the token file $HF_HOME/token) has no access to it: accept "
           "the repo's terms on its page with that account, or use another token";
  }
  return "set HF_TOKEN to an access token of an account that was granted access (or save one in "
         "$HF_HOME/token, e.g. with `hf auth login`)";
}

std::string body_excerpt(const std::string& body) {
  std::string s = body.substr(0, 200);
  for (char& c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s.empty() ? std::string() : ": " + s;
}

}  // namespace

Error hub_http_error(const HttpResponse& r, const HubRequestContext& what) {
  const std::string code = r.header("x-error-code");
  const std::string where = fmt::format("HTTP {} from {}", r.status, r.url);
  if (code == "RevisionNotFound") {
    return make_error(ErrorCode::kNotFound, fmt::format("no such revision '{}' in repo '{}' ({})",
                                                        what.revision, what.repo_id, where));
  }
  if (code == "EntryNotFound") {
    return make_error(ErrorCode::kNotFound,
                      fmt::format("no file '{}' in repo '{}' at revision '{}' ({})", what.file,
                                  what.repo_id, what.revision, where));
  }
  if (code == "GatedRepo" || ((r.status == 401 || r.status == 403) && code != "RepoNotFound")) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("repo '{}' is gated or private ({}): {}", what.repo_id, where,
                                  token_hint(what.has_token)));
  }
  if (code == "RepoNotFound" || r.status == 404) {
    std::string msg = fmt::format("no such repo or revision: '{}' at revision '{}' ({})",
                                  what.repo_id, what.revision, where);
    if (r.status == 401 && !what.has_token) msg += "; if it is private or gated, set HF_TOKEN";
    return make_error(ErrorCode::kNotFound, msg);
  }
  return make_error(ErrorCode::kIo, fmt::format("{}{}", where, body_excerpt(r.body)));
}

Error hub_network_error(const Error& transport, const HubRequestContext& what) {
  return make_error(
      ErrorCode::kIo,
      fmt::format("cannot download '{}' from the hub: {}. Without network, a model already in the "
                  "Hugging Face cache loads with HF_HUB_OFFLINE=1 (download it once where there is "
                  "network, or copy a cache there: HF_HUB_CACHE / --download-dir), or pass a local "
                  "folder or .gguf file",
                  what.repo_id, transport.message));
}

}  // namespace pagoda
