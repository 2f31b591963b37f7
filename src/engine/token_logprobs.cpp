#include "engine/token_logprobs.h"

#include <algorithm>

namespace pagoda {

TokenLogprob make_token_logprob(const SampleOutput& so, size_t r, int32_t token, float lp, int32_t rank,
                                int32_t num_top) {
  TokenLogprob t;
  t.token_id = token;
  t.logprob = lp;
  t.rank = rank;
  const size_t k = so.token_ids.empty() ? 0 : so.top_ids.size() / so.token_ids.size();
  const size_t n = std::min(k, static_cast<size_t>(std::max(0, num_top)));
  for (size_t j = 0; j < n; ++j) t.top.push_back({so.top_ids[r * k + j], so.top_logprobs[r * k + j]});
  return t;
}

}  // namespace pagoda
