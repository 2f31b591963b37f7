#include "model/jump_graphs.h"

#include <cstring>

namespace pagoda {

namespace {

int32_t num_new_tokens(const StepBatch& step, size_t s) {
  return step.query_start_loc[s + 1] - step.query_start_loc[s];
}

// Leading sequences of one new token.
size_t num_leading_decodes(const StepBatch& step) {
  size_t s = 0;
  while (s < step.seq_lens.size() && num_new_tokens(step, s) == 1) ++s;
  return s;
}

}  // namespace

std::vector<JumpGraphShape> jump_graph_shapes(int64_t max_seqs, int64_t max_tokens) {
  std::vector<JumpGraphShape> shapes;
  if (max_seqs < 1 || max_tokens < 1) return shapes;
  std::vector<int64_t> decodes = {0};  // a step of jumps alone (batch 1)
  for (const int64_t d : decode_graph_batch_sizes(max_seqs)) decodes.push_back(d);
  for (const int64_t d : decodes)
    for (const int64_t r : kJumpGraphTails)
      if (d + r <= max_tokens) shapes.push_back({d, r});
  return shapes;
}

int pick_jump_graph(const std::vector<JumpGraphShape>& shapes, const StepBatch& step) {
  const size_t num_seqs = step.seq_lens.size();
  const size_t num_decodes = num_leading_decodes(step);
  if (num_decodes == num_seqs) return -1;
  for (size_t s = num_decodes; s < num_seqs; ++s)
    if (num_new_tokens(step, s) < 2) return -1;
  const auto num_tail_seqs = static_cast<int64_t>(num_seqs - num_decodes);
  const auto num_tail_rows = static_cast<int64_t>(step.token_ids.size() - num_decodes);
  for (size_t i = 0; i < shapes.size(); ++i) {
    const JumpGraphShape& g = shapes[i];
    if (g.decode >= static_cast<int64_t>(num_decodes) && num_tail_seqs < g.num_tail_seqs() &&
        num_tail_rows + (g.num_tail_seqs() - num_tail_seqs) <= g.tail)
      return static_cast<int>(i);
  }
  return -1;
}

std::vector<int32_t> jump_row_map(const StepBatch& step, const JumpGraphShape& shape) {
  const size_t num_decodes = num_leading_decodes(step);
  std::vector<int32_t> map(step.token_ids.size());
  for (size_t t = 0; t < map.size(); ++t) {
    map[t] = t < num_decodes ? static_cast<int32_t>(t)
                             : static_cast<int32_t>(shape.decode + static_cast<int64_t>(t - num_decodes));
  }
  return map;
}

void write_padded_jump_index(const StepBatch& step, const JumpGraphShape& shape,
                             int64_t table_width, int32_t block_size, int32_t scratch_block,
                             int32_t sliding_scratch_block, const DecodeIndexViews& dst) {
  const bool sliding = dst.sliding_slots != nullptr;
  const int64_t num_decodes = static_cast<int64_t>(num_leading_decodes(step));
  const int64_t num_seqs = static_cast<int64_t>(step.seq_lens.size());
  // Row `r` on a scratch block: token 0, `position`, written nowhere.
  auto pad_row = [&](int64_t r, int32_t position) {
    dst.ids[r] = 0;
    dst.positions[r] = position;
    dst.slots[r] = -1;
    if (sliding) dst.sliding_slots[r] = -1;
  };
  // Sequence `s` of the padded batch reads `blocks` scratch blocks.
  auto pad_table = [&](int64_t s, int64_t blocks) {
    for (int64_t b = 0; b < blocks; ++b) {
      dst.block_tables[s * table_width + b] = scratch_block;
      if (sliding) dst.sliding_block_tables[s * table_width + b] = sliding_scratch_block;
    }
  };
  // Step sequence `s` (its rows from `row`) as padded sequence `to`.
  auto copy_seq = [&](int64_t s, int64_t to, int64_t row) {
    const int32_t begin = step.query_start_loc[static_cast<size_t>(s)];
    const size_t bytes = static_cast<size_t>(num_new_tokens(step, static_cast<size_t>(s))) * sizeof(int32_t);
    std::memcpy(dst.ids + row, step.token_ids.data() + begin, bytes);
    std::memcpy(dst.positions + row, step.positions.data() + begin, bytes);
    std::memcpy(dst.slots + row, step.slot_mapping.data() + begin, bytes);
    if (sliding) std::memcpy(dst.sliding_slots + row, step.sliding_slot_mapping.data() + begin, bytes);
    dst.seq_lens[to] = step.seq_lens[static_cast<size_t>(s)];
    DecodeIndexViews moved = dst;  // copy_block_table_row writes row s: shift it to row `to`
    moved.block_tables += (to - s) * table_width;
    if (sliding) moved.sliding_block_tables += (to - s) * table_width;
    copy_block_table_row(step, s, table_width, moved);
  };
  // Decode slots: real, then padding.
  for (int64_t s = 0; s < num_decodes; ++s) copy_seq(s, s, s);
  for (int64_t s = num_decodes; s < shape.decode; ++s) {
    pad_row(s, 0);
    dst.seq_lens[s] = 1;
    pad_table(s, 1);
  }
  for (int64_t s = 0; s <= shape.decode; ++s) dst.query_start_loc[s] = static_cast<int32_t>(s);
  // Tail slots: the step's multi-token sequences packed, then padding slots
  // of one row each, the last taking the rows left.
  int64_t row = shape.decode;
  int64_t slot = shape.decode;
  for (int64_t s = num_decodes; s < num_seqs; ++s, ++slot) {
    copy_seq(s, slot, row);
    row += num_new_tokens(step, static_cast<size_t>(s));
    dst.query_start_loc[slot + 1] = static_cast<int32_t>(row);
  }
  const int64_t end_row = shape.num_rows(), end_slot = shape.num_seqs();
  for (; slot < end_slot; ++slot) {
    const int64_t rows = slot + 1 < end_slot ? 1 : end_row - row;
    for (int64_t i = 0; i < rows; ++i) pad_row(row + i, static_cast<int32_t>(i));
    dst.seq_lens[slot] = static_cast<int32_t>(rows);
    pad_table(slot, (rows + block_size - 1) / block_size);
    row += rows;
    dst.query_start_loc[slot + 1] = static_cast<int32_t>(row);
  }
}

}  // namespace pagoda
