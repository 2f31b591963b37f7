#include "engine/run_ahead_policy.h"

#include <utility>

namespace pagoda {

RunAheadPolicy::RunAheadPolicy(Config config, NowFn now)
    : config_(config), now_(now ? std::move(now) : NowFn(&Clock::now)) {}

void RunAheadPolicy::on_busy_arrival() { last_busy_arrival_ = now_(); }

bool RunAheadPolicy::run_ahead(size_t num_seqs) const {
  if (static_cast<int64_t>(num_seqs) >= config_.small_batch) return true;
  if (!last_busy_arrival_) return true;
  return std::chrono::duration<double>(now_() - *last_busy_arrival_).count() >
         config_.arrival_window_s;
}

}  // namespace pagoda
