// What one scheduling step tells the engine: plain data, ready to become the
// model runner's StepInput with no further lookups.
//
// Batch layout: S sequences, T = sum of their new tokens, R sampled rows.
// Sequence i's new tokens are batch rows [query_start_loc[i],
// query_start_loc[i+1]) at positions start_position .. start_position +
// num_new_tokens - 1; position t of a sequence lives in slot
//   block_tables[i * max_blocks_per_seq + t / block_size] * block_size + t % block_size.
// Sequences with exactly one new token come first (num_decode_seqs of them).
#pragma once

#include <cstdint>
#include <vector>

#include "sched/request.h"

namespace pagoda {

struct ScheduledSeq {
  RequestId request_id = 0;
  SeqId seq_id = 0;
  int32_t start_position = 0;  // tokens already computed (cached or earlier chunks)
  int32_t num_new_tokens = 0;
  int32_t num_prompt_tokens = 0;
  // Index into logits_rows of this sequence's sampled row, or -1 when the
  // step does not reach its last token (a prefill chunk that does not finish
  // the prompt or the recomputation) and nothing is sampled.
  int32_t logits_index = -1;
};

struct FinishedSeq {
  RequestId request_id = 0;
  SeqId seq_id = 0;
  SeqEndReason reason = SeqEndReason::kStop;
};

struct ScheduleOutput {
  std::vector<ScheduledSeq> seqs;        // [S]
  int32_t num_decode_seqs = 0;           // leading sequences with one new token
  std::vector<int32_t> token_ids;        // [T]
  std::vector<int32_t> positions;        // [T]
  std::vector<int32_t> slot_mapping;     // [T]
  std::vector<int32_t> query_start_loc;  // [S+1]
  std::vector<int32_t> seq_lens;         // [S] context length after this step
  std::vector<int32_t> block_tables;     // [S * max_blocks_per_seq], rows padded with block 0
  int32_t max_blocks_per_seq = 0;
  std::vector<int32_t> logits_rows;  // [R] batch row of each sampling sequence's last new token
  std::vector<int32_t> copy_src;     // copy-on-write block copies, applied before the step
  std::vector<int32_t> copy_dst;
  std::vector<RequestId> preempted_request_ids;  // freed and sent back to waiting (recompute)
  std::vector<SeqId> preempted_seq_ids;
  std::vector<FinishedSeq> finished;  // finished, aborted or dropped since the previous schedule()

  int32_t num_tokens() const { return static_cast<int32_t>(token_ids.size()); }
  bool empty() const { return seqs.empty(); }
};

}  // namespace pagoda
