#include "model/decode_graphs.h"

#include <algorithm>
#include <cstring>

namespace pagoda {

std::vector<int64_t> decode_graph_batch_sizes(int64_t limit) {
  const int64_t top = std::min(limit, kMaxDecodeGraphBatch);
  std::vector<int64_t> sizes;
  for (int64_t b : {1, 2, 4})
    if (b <= top) sizes.push_back(b);
  for (int64_t b = 8; b <= top; b += 8) sizes.push_back(b);
  if (top >= 1 && sizes.back() != top) sizes.push_back(top);
  return sizes;
}

bool is_decode_only(const StepBatch& step) {
  return !step.seq_lens.empty() && step.token_ids.size() == step.seq_lens.size();
}

int pick_decode_graph(const std::vector<int64_t>& sizes, int64_t num_seqs) {
  const auto it = std::lower_bound(sizes.begin(), sizes.end(), num_seqs);
  return it == sizes.end() ? -1 : static_cast<int>(it - sizes.begin());
}

void copy_block_table_row(const StepBatch& step, int64_t s, int64_t table_width,
                          const DecodeIndexViews& dst) {
  const int64_t width = step.max_blocks_per_seq;
  const size_t bytes = static_cast<size_t>(width) * sizeof(int32_t);
  std::memcpy(dst.block_tables + s * table_width, step.block_tables.data() + s * width, bytes);
  if (dst.sliding_slots != nullptr)
    std::memcpy(dst.sliding_block_tables + s * table_width,
                step.sliding_block_tables.data() + s * width, bytes);
}

void write_padded_decode_index(const StepBatch& step, int64_t batch, int64_t table_width,
                               int32_t scratch_block, int32_t sliding_scratch_block,
                               const DecodeIndexViews& dst) {
  const bool sliding = dst.sliding_slots != nullptr;
  const int64_t num_seqs = static_cast<int64_t>(step.seq_lens.size());
  const size_t real = static_cast<size_t>(num_seqs) * sizeof(int32_t);
  if (num_seqs > 0) {
    std::memcpy(dst.ids, step.token_ids.data(), real);
    std::memcpy(dst.positions, step.positions.data(), real);
    std::memcpy(dst.slots, step.slot_mapping.data(), real);
    std::memcpy(dst.seq_lens, step.seq_lens.data(), real);
    if (sliding) std::memcpy(dst.sliding_slots, step.sliding_slot_mapping.data(), real);
  }
  for (int64_t s = 0; s < num_seqs; ++s) copy_block_table_row(step, s, table_width, dst);
  for (int64_t r = num_seqs; r < batch; ++r) {
    dst.ids[r] = 0;
    dst.positions[r] = 0;
    dst.slots[r] = -1;
    dst.seq_lens[r] = 1;
    dst.block_tables[r * table_width] = scratch_block;
    if (sliding) {
      dst.sliding_slots[r] = -1;
      dst.sliding_block_tables[r * table_width] = sliding_scratch_block;
    }
  }
  for (int64_t i = 0; i <= batch; ++i) dst.query_start_loc[i] = static_cast<int32_t>(i);
}

}  // namespace pagoda
