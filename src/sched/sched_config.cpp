#include "sched/sched_config.h"

#include <fmt/format.h>

namespace pagoda {

namespace {

Status at_least(const char* field, int64_t value, int64_t min) {
  if (value >= min) return Status::Ok();
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("scheduler config: {} = {} must be >= {}", field, value, min));
}

}  // namespace

Status SchedulerConfig::validate() const {
  PAGODA_RETURN_IF_ERROR(at_least("max_num_batched_tokens", max_num_batched_tokens, 1));
  PAGODA_RETURN_IF_ERROR(at_least("max_num_seqs", max_num_seqs, 1));
  PAGODA_RETURN_IF_ERROR(at_least("max_waiting", max_waiting, 0));
  PAGODA_RETURN_IF_ERROR(at_least("max_chunk_tokens", max_chunk_tokens, 0));
  PAGODA_RETURN_IF_ERROR(at_least("max_model_len", max_model_len, 2));
  PAGODA_RETURN_IF_ERROR(at_least("kv.block_size", kv.block_size, 1));
  PAGODA_RETURN_IF_ERROR(at_least("kv.num_blocks", kv.num_blocks, 1));
  int64_t capacity = int64_t{kv.num_blocks} * kv.block_size;
  if (capacity < max_model_len) {
    return make_error(
        ErrorCode::kInvalidArgument,
        fmt::format("scheduler config: the KV pool ({} blocks x {} tokens = {}) cannot hold one "
                    "sequence of max_model_len = {}",
                    kv.num_blocks, kv.block_size, capacity, max_model_len));
  }
  return Status::Ok();
}

}  // namespace pagoda
