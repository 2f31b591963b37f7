#include "backend/fused_norm_route.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <cstring>

namespace pagoda {

Result<int64_t> resolve_fused_norm_max_rows(int64_t option) {
  if (option > kMaxFusedNormRows) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("fused all-reduce + norm threshold {} rows exceeds {}", option,
                                  kMaxFusedNormRows));
  }
  if (option >= 0) return option;
  const char* env = std::getenv(kFusedNormMaxRowsEnv);
  if (env == nullptr || env[0] == '\0') return kDefaultFusedNormMaxRows;
  const char* end = env + std::strlen(env);
  int64_t v = -1;
  const auto [ptr, ec] = std::from_chars(env, end, v);
  if (ec != std::errc() || ptr != end || v < 0 || v > kMaxFusedNormRows) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}={}: expected a row count from 0 (never fused) to {}",
                                  kFusedNormMaxRowsEnv, env, kMaxFusedNormRows));
  }
  return v;
}

}  // namespace pagoda
