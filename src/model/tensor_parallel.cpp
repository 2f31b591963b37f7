#include "model/tensor_parallel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "backend/backend.h"
#include "backend/communicator.h"

namespace pagoda {
namespace {

// [rank * n / size, (rank + 1) * n / size) for n divisible by size.
IndexRange split(int64_t n, TpShard s) {
  return {s.rank * (n / s.size), (s.rank + 1) * (n / s.size)};
}

Error bad_size(int tp, const std::string& what) {
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("--tensor-parallel-size {} {}", tp, what));
}

}  // namespace

Status validate_tensor_parallel(const ModelConfig& c, int tp) {
  if (tp < 1) return bad_size(tp, "must be at least 1");
  if (c.num_heads % tp != 0)
    return bad_size(tp, fmt::format("does not divide num_attention_heads {}", c.num_heads));
  if (c.num_kv_heads % tp != 0 && tp % c.num_kv_heads != 0)
    return bad_size(tp, fmt::format("neither divides nor is a multiple of num_key_value_heads {}",
                                    c.num_kv_heads));
  if (c.num_experts > 0 && tp > 1)
    return bad_size(tp,
                    "is not supported for mixture-of-experts models yet (experts are not sharded)");
  if (c.intermediate_size % tp != 0)
    return bad_size(tp, fmt::format("does not divide intermediate_size {}", c.intermediate_size));
  return {};
}

IndexRange tp_q_heads(const ModelConfig& c, TpShard s) {
  return split(c.num_heads, s);
}

IndexRange tp_kv_heads(const ModelConfig& c, TpShard s) {
  if (c.num_kv_heads >= s.size) return split(c.num_kv_heads, s);
  const int64_t head = s.rank * c.num_kv_heads / s.size;  // replicated on size / Hkv ranks
  return {head, head + 1};
}

IndexRange tp_intermediate(const ModelConfig& c, TpShard s) {
  return split(c.intermediate_size, s);
}

int64_t tp_vocab_block(const ModelConfig& c, int tp) {
  return (c.vocab_size + tp - 1) / tp;
}

IndexRange tp_vocab(const ModelConfig& c, TpShard s) {
  const int64_t block = tp_vocab_block(c, s.size);
  const int64_t begin = std::min<int64_t>(s.rank * block, c.vocab_size);
  return {begin, std::min<int64_t>(begin + block, c.vocab_size)};
}

bool tp_vocab_parallel_embedding(int tp_size) {
  const char* replicated = std::getenv("PAGODA_REPLICATED_EMBEDDING");
  const bool forced = replicated != nullptr && *replicated != '\0' &&
                      std::strcmp(replicated, "0") != 0;
  return tp_size > 1 && !forced;
}

ModelConfig tp_local_config(const ModelConfig& c, TpShard s) {
  ModelConfig local = c;
  local.num_heads = tp_q_heads(c, s).size();
  local.num_kv_heads = tp_kv_heads(c, s).size();
  local.intermediate_size = tp_intermediate(c, s).size();
  return local;
}

int64_t tp_min(Communicator* tp, Backend& backend, int64_t value) {
  if (tp == nullptr || tp->size() == 1) return value;
  constexpr int64_t kHalf = int64_t{1} << 20;  // both halves < 2^20: exact in f32, and their sums
  const auto n = static_cast<size_t>(tp->size());
  std::vector<float> slots(2 * n, 0.0f);
  slots[2 * static_cast<size_t>(tp->rank())] = static_cast<float>(value / kHalf);
  slots[2 * static_cast<size_t>(tp->rank()) + 1] = static_cast<float>(value % kHalf);
  DeviceBuffer buf(&backend, slots.size() * sizeof(float));
  backend.copy_to_device(buf.data(), slots.data(), slots.size() * sizeof(float));
  Tensor t = buf.tensor(DType::kF32, {static_cast<int64_t>(slots.size())});
  tp->all_reduce_sum(t);
  backend.copy_to_host(slots.data(), buf.data(), slots.size() * sizeof(float));
  int64_t lowest = value;
  for (size_t r = 0; r < n; ++r)
    lowest = std::min(lowest, static_cast<int64_t>(slots[2 * r]) * kHalf +
                                  static_cast<int64_t>(slots[2 * r + 1]));
  return lowest;
}

}  // namespace pagoda
