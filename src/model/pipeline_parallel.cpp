#include "model/pipeline_parallel.h"

#include <fmt/format.h>

#include <algorithm>

namespace pagoda {

Status validate_pipeline_parallel(const ModelConfig& c, int pp) {
  if (pp < 1)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("--pipeline-parallel-size {} must be at least 1", pp));
  if (c.num_layers < pp)
    return make_error(
        ErrorCode::kInvalidArgument,
        fmt::format("--pipeline-parallel-size {} exceeds num_hidden_layers {}", pp, c.num_layers));
  return {};
}

IndexRange pp_layers(const ModelConfig& c, PpStage s) {
  const int64_t base = c.num_layers / s.size, extra = c.num_layers % s.size;
  // Stages [size - 1 - extra, size - 1) take one more layer each.
  const int64_t first_extra = s.size - 1 - extra;
  auto begin_of = [&](int64_t stage) {
    return stage * base + std::max<int64_t>(0, std::min<int64_t>(stage, s.size - 1) - first_extra);
  };
  return {begin_of(s.rank), s.last() ? c.num_layers : begin_of(s.rank + 1)};
}

}  // namespace pagoda
