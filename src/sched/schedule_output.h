// What one scheduling step tells the engine: the step's plain-data batch
// (batch/step_batch.h), which the model runner consumes once the engine has
// added the sampling rows, plus the scheduled sequences behind its rows.
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

#include "batch/step_batch.h"
#include "sched/request.h"

namespace pagoda {

struct ScheduledSeq {
  RequestId request_id = 0;
  SeqId seq_id = 0;
  int32_t start_position = 0;  // tokens already computed (cached or earlier chunks)
  int32_t num_new_tokens = 0;
  int32_t num_prompt_tokens = 0;
  // Index into the scheduler's logits_rows (one per sampling sequence, before
  // the engine adds its rows) of this sequence's sampled row, its last new
  // token; -1 when the step does not reach its last token (a prefill chunk
  // that does not finish the prompt or the recomputation) and nothing is
  // sampled.
  int32_t logits_index = -1;
  // Speculative decoding: the last num_draft_tokens new tokens are drafts,
  // and the sequence samples after each of its last num_draft_tokens + 1 new
  // tokens: logits rows logits_index .. logits_index + num_draft_tokens.
  int32_t num_draft_tokens = 0;
};

struct FinishedSeq {
  RequestId request_id = 0;
  SeqId seq_id = 0;
  SeqEndReason reason = SeqEndReason::kStop;
  // The sequence's last tokens (prompt, then outputs; drafts dropped), moved
  // out as it ended: what speculative decoding's proposers learn from.
  std::vector<int32_t> tokens = {};
  int32_t num_prompt_tokens = 0;
};

// The step's StepBatch (logits_rows: one row per sampling sequence and draft, no
// sampling rows or pending tokens yet: the engine adds those in place) and
// what the engine needs to map its rows back to requests.
struct ScheduleOutput : StepBatch {
  std::vector<ScheduledSeq> seqs;                // [S]
  int32_t num_decode_seqs = 0;                   // leading sequences with one new token
  std::vector<RequestId> preempted_request_ids;  // freed and sent back to waiting (recompute)
  std::vector<SeqId> preempted_seq_ids;
  std::vector<FinishedSeq> finished;  // finished, aborted or dropped since the previous schedule()

  bool empty() const { return seqs.empty(); }
  // Nothing scheduled; the vectors keep their capacity (Scheduler::recycle).
  void clear() {
    StepBatch::clear();
    seqs.clear();
    num_decode_seqs = 0;
    preempted_request_ids.clear();
    preempted_seq_ids.clear();
    finished.clear();
  }
};

}  // namespace pagoda
