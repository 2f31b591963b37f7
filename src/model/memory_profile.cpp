#include "model/memory_profile.h"

#include <algorithm>
#include <vector>

namespace pagoda {

ProfileStep make_profile_step(int64_t max_tokens, int64_t max_seqs, int64_t max_len,
                              int64_t block_size, int64_t num_rows, int64_t vocab,
                              bool sliding_group) {
  const int64_t num_tokens = std::min(max_tokens, max_seqs * max_len);
  const int64_t seq_len = std::min(num_tokens, max_len);
  const int64_t num_seqs = (num_tokens + seq_len - 1) / seq_len;
  ProfileStep p;
  p.table_width = static_cast<int32_t>((seq_len + block_size - 1) / block_size);
  StepBatch& s = p.step;
  s.max_blocks_per_seq = p.table_width;
  s.query_start_loc.push_back(0);
  for (int64_t q = 0; q < num_seqs; ++q) {
    const int64_t len = std::min(seq_len, num_tokens - q * seq_len);
    const int64_t first_block = p.num_blocks;
    for (int64_t pos = 0; pos < len; ++pos) {
      const int64_t t = static_cast<int64_t>(s.token_ids.size());
      s.token_ids.push_back(static_cast<int32_t>(t % vocab));
      s.positions.push_back(static_cast<int32_t>(pos));
      s.slot_mapping.push_back(
          static_cast<int32_t>((first_block + pos / block_size) * block_size + pos % block_size));
    }
    const int64_t blocks = (len + block_size - 1) / block_size;
    for (int64_t b = 0; b < p.table_width; ++b)
      s.block_tables.push_back(static_cast<int32_t>(b < blocks ? first_block + b : first_block));
    p.num_blocks += blocks;
    s.seq_lens.push_back(static_cast<int32_t>(len));
    s.query_start_loc.push_back(static_cast<int32_t>(s.token_ids.size()));
  }
  if (sliding_group) {
    s.sliding_block_tables = s.block_tables;
    s.sliding_slot_mapping = s.slot_mapping;
  }
  SamplingBatch& b = s.sampling;
  b.penalty_offsets.push_back(0);
  b.bias_offsets.push_back(0);
  b.mask_words = static_cast<int32_t>((vocab + 31) / 32);
  std::vector<uint32_t> all_allowed(static_cast<size_t>(b.mask_words), ~0u);
  if (vocab % 32 != 0) all_allowed.back() = (1u << (vocab % 32)) - 1u;
  for (int64_t r = 0; r < num_rows; ++r) {
    s.logits_rows.push_back(s.query_start_loc[r % num_seqs + 1] - 1);
    SamplingRow row;
    row.temperature = 1.0f;
    row.top_k = 50;
    row.top_p = 0.9f;
    row.repetition_penalty = 1.1f;
    row.seed = static_cast<uint64_t>(r);
    row.num_top_logprobs = kProfileTopLogprobs;
    b.rows.push_back(row);
    const auto token = static_cast<int32_t>(r % vocab);
    b.penalty_tokens.push_back(token);
    b.penalty_output_counts.push_back(1);
    b.penalty_in_prompt.push_back(0);
    b.penalty_offsets.push_back(static_cast<int32_t>(b.penalty_tokens.size()));
    b.bias_tokens.push_back(token);
    b.bias_values.push_back(0.0f);
    b.bias_offsets.push_back(static_cast<int32_t>(b.bias_tokens.size()));
    b.mask_index.push_back(static_cast<int32_t>(r));
    b.allowed_words.insert(b.allowed_words.end(), all_allowed.begin(), all_allowed.end());
  }
  b.max_top_logprobs = kProfileTopLogprobs;
  return p;
}

double device_kv_budget_bytes(double fraction, size_t total, size_t free_at_start, size_t free_now) {
  const double own = free_at_start > free_now ? static_cast<double>(free_at_start - free_now) : 0.0;
  const double by_fraction = fraction * static_cast<double>(total) - own;
  const double by_free = static_cast<double>(free_now) - kDeviceFreeReserve;
  return std::min(by_fraction, by_free);
}

}  // namespace pagoda
