// StepBatch: the host plain data of one forward step, produced by the
// scheduler (inside its ScheduleOutput), completed in place by the engine
// (sampling rows, extra logits rows, pending tokens) and read by the model
// runner by const reference. No member refers to scheduler or engine state.
//
// T tokens, S sequences, R logits rows. Contract (checked by
// ModelRunner::launch): sequence s owns batch rows [query_start_loc[s],
// query_start_loc[s+1]) (at least one), row j of it sits at position
// pos = seq_lens[s] - q_len + j of its KV (plus position_offsets[s] for
// RoPE, where given), and its slot is
//   block_tables[s * max_blocks_per_seq + pos / block_size] * block_size + pos % block_size.
#pragma once

#include <cstdint>
#include <vector>

#include "batch/sampling_batch.h"

namespace pagoda {

struct StepBatch {
  std::vector<int32_t> token_ids;        // [T]
  std::vector<int32_t> positions;        // [T]
  std::vector<int32_t> slot_mapping;     // [T]
  std::vector<int32_t> query_start_loc;  // [S+1]
  std::vector<int32_t> seq_lens;         // [S] context length after this step (cached + new)
  std::vector<int32_t> block_tables;     // [S * max_blocks_per_seq], rows padded with block 0
  int32_t max_blocks_per_seq = 0;
  // [R] batch row whose logits feed sampling row r (repeats allowed).
  std::vector<int32_t> logits_rows;
  SamplingBatch sampling;  // R rows (ModelRunner::launch / execute only)
  // launch() runs the forward and the lm_head but not the sampler, which waits
  // for Runner::launch_sampling (its batch replaces `sampling`, ignored
  // then): the host builds the rows' masks while the device runs the
  // forward. Needs R <= max_num_seqs (one lm_head chunk).
  bool defer_sampling = false;
  // Copy-on-write block copies, applied before the forward.
  std::vector<int32_t> copy_src;
  std::vector<int32_t> copy_dst;
  // The sliding-window KV group (kv/kv_manager.h), empty without one: the
  // sliding layers' block tables (same width; kNullBlock = -1 entries before
  // each sequence's window, never read), slots and copies in the sliding
  // pool's block ids.
  std::vector<int32_t> sliding_block_tables;  // [S * max_blocks_per_seq]
  std::vector<int32_t> sliding_slot_mapping;  // [T]
  std::vector<int32_t> sliding_copy_src;
  std::vector<int32_t> sliding_copy_dst;
  // Tokens not known on the host yet (async scheduling): token_ids[pending_rows[i]]
  // (any value) is replaced on the device by the token that the step launched
  // just before this one sampled for its logits row pending_sources[i] (from
  // any of its lm_head chunks).
  std::vector<int32_t> pending_rows;
  std::vector<int32_t> pending_sources;
  // [S] or empty (all 0): sequence s's KV holds its positions from
  // position_offsets[s] on, so positions[t] = its KV position + that (a
  // speculative draft's KV starting mid-sequence: engine/draft_batcher.h).
  std::vector<int32_t> position_offsets;

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  // An empty batch; the vectors keep their capacity (reused step to step).
  void clear() {
    token_ids.clear();
    positions.clear();
    slot_mapping.clear();
    query_start_loc.clear();
    seq_lens.clear();
    block_tables.clear();
    max_blocks_per_seq = 0;
    logits_rows.clear();
    sampling.clear();
    defer_sampling = false;
    copy_src.clear();
    copy_dst.clear();
    sliding_block_tables.clear();
    sliding_slot_mapping.clear();
    sliding_copy_src.clear();
    sliding_copy_dst.clear();
    pending_rows.clear();
    pending_sources.clear();
    position_offsets.clear();
  }
};

}  // namespace pagoda
