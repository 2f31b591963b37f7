#include "model/verify_graphs.h"

#include <algorithm>
#include <cstring>

namespace pagoda {

std::vector<int64_t> verify_graph_batch_sizes(int64_t max_seqs, int64_t max_tokens,
                                              int32_t query_len, int64_t max_model_len) {
  if (query_len < 2 || query_len > max_model_len) return {};
  const int64_t limit = std::min({max_seqs, max_tokens / query_len, kMaxVerifyGraphBatch});
  return decode_graph_batch_sizes(limit);
}

bool fits_verify_graph(const StepBatch& step, int32_t query_len, bool left_padding) {
  const size_t num_seqs = step.seq_lens.size();
  if (num_seqs == 0) return false;
  for (size_t s = 0; s < num_seqs; ++s) {
    const int32_t q = step.query_start_loc[s + 1] - step.query_start_loc[s];
    if (q > query_len) return false;
    if (q < query_len && (!left_padding || step.seq_lens[s] < query_len)) return false;
  }
  return true;
}

std::vector<int32_t> verify_row_map(const StepBatch& step, int32_t query_len) {
  std::vector<int32_t> map(step.token_ids.size());
  for (size_t s = 0; s + 1 < step.query_start_loc.size(); ++s) {
    const int32_t begin = step.query_start_loc[s], end = step.query_start_loc[s + 1];
    const int32_t first = static_cast<int32_t>(s) * query_len + query_len - (end - begin);
    for (int32_t t = begin; t < end; ++t) map[static_cast<size_t>(t)] = first + t - begin;
  }
  return map;
}

void write_padded_verify_index(const StepBatch& step, int64_t batch, int32_t query_len,
                               int64_t table_width, int32_t block_size, int32_t scratch_block,
                               int32_t sliding_scratch_block, const DecodeIndexViews& dst) {
  const bool sliding = dst.sliding_slots != nullptr;
  const int64_t num_seqs = static_cast<int64_t>(step.seq_lens.size());
  const int64_t q = query_len;
  // Real sequences: left padding, then their rows.
  for (int64_t s = 0; s < num_seqs; ++s) {
    const int32_t begin = step.query_start_loc[static_cast<size_t>(s)];
    const int32_t n = step.query_start_loc[static_cast<size_t>(s) + 1] - begin;
    const int32_t seq_len = step.seq_lens[static_cast<size_t>(s)];
    const int64_t pad = q - n;
    for (int64_t i = 0; i < pad; ++i) {
      const int64_t r = s * q + i;
      dst.ids[r] = 0;
      dst.positions[r] = static_cast<int32_t>(seq_len - q + i);
      dst.slots[r] = -1;
      if (sliding) dst.sliding_slots[r] = -1;
    }
    const size_t bytes = static_cast<size_t>(n) * sizeof(int32_t);
    const int64_t first = s * q + pad;
    std::memcpy(dst.ids + first, step.token_ids.data() + begin, bytes);
    std::memcpy(dst.positions + first, step.positions.data() + begin, bytes);
    std::memcpy(dst.slots + first, step.slot_mapping.data() + begin, bytes);
    if (sliding)
      std::memcpy(dst.sliding_slots + first, step.sliding_slot_mapping.data() + begin, bytes);
    dst.seq_lens[s] = seq_len;
    copy_block_table_row(step, s, table_width, dst);
  }
  // Padding slots: Q rows at positions [0, Q) on the scratch blocks.
  const int64_t pad_blocks = (q + block_size - 1) / block_size;
  for (int64_t s = num_seqs; s < batch; ++s) {
    for (int64_t i = 0; i < q; ++i) {
      const int64_t r = s * q + i;
      dst.ids[r] = 0;
      dst.positions[r] = static_cast<int32_t>(i);
      dst.slots[r] = -1;
      if (sliding) dst.sliding_slots[r] = -1;
    }
    dst.seq_lens[s] = query_len;
    for (int64_t b = 0; b < pad_blocks; ++b) {
      dst.block_tables[s * table_width + b] = scratch_block;
      if (sliding) dst.sliding_block_tables[s * table_width + b] = sliding_scratch_block;
    }
  }
  for (int64_t s = 0; s <= batch; ++s) dst.query_start_loc[s] = static_cast<int32_t>(s * q);
}

}  // namespace pagoda
