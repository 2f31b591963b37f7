// DraftBatcher: drafts greedily through a speculative draft's ModelRunner
// (a draft model's, an EAGLE head's). Its forward work comes in pieces, each
// some consecutive rows of one sequence, run in as few steps as the runner's
// --max-num-batched-tokens and --max-num-seqs allow, with one greedy token
// sampled after each piece's last row; then each sequence's further drafts
// come from one chained row per step, reading the draft before.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "batch/step_batch.h"
#include "core/result.h"
#include "kv/kv_manager.h"
#include "model/model_runner.h"

namespace pagoda {

// Rows (positions) [begin, end) of sequence seq_id, kv_start <= begin < end;
// the logits of row end - 1 give a greedy token. draft_index is the owner's
// tag for that token (the proposer's input index). seq_id's KV holds
// positions kv_start.. only: position p is row p - kv_start of its block
// table (slot and attention length), while RoPE sees p itself (scores depend
// on position differences only, so the rows attend as they would at
// kv_start 0 over the part of the sequence that is there).
struct DraftPiece {
  int64_t seq_id = 0;
  int32_t begin = 0;
  int32_t end = 0;
  size_t draft_index = 0;
  int32_t kv_start = 0;
};

// What the batcher needs of the proposer's per-sequence state.
struct DraftCallbacks {
  // The token row `pos` of seq_id reads.
  std::function<int32_t(int64_t seq_id, int32_t pos)> token_at;
  // Makes `token` (seq_id's latest draft) the token that seq_id's next
  // chained row reads; called before the step that runs that row.
  std::function<void(int64_t seq_id, int32_t token)> feed;
  // Optional: a piece's greedy token was sampled from row `row` of the step
  // just executed (the runner's hidden_states() row `row` is that row's
  // output); called in piece order after the token is appended to drafts.
  std::function<void(const DraftPiece& piece, int32_t row, int32_t token)> on_sampled;
  // Optional: maps the runner's sampled id to the draft token (an EAGLE-3
  // head's draft vocabulary to the target's), which drafts, feed and
  // on_sampled get. Absent: the sampled id itself.
  std::function<int32_t(int32_t sampled)> to_target;
};

class DraftBatcher {
 public:
  // runner must outlive the batcher.
  explicit DraftBatcher(ModelRunner& runner) : runner_(runner) {}

  // Runs `first` (at most one piece per sequence; drafts[draft_index] empty),
  // appending each piece's token to drafts[draft_index]; then, while some
  // sequence has fewer than num_drafts[draft_index] drafts, one step more of
  // one piece per such sequence (in `first`'s order): the row after its last
  // piece's, reading its last draft (cb.feed). kv must hold a table covering
  // every row run (slot mapping and block tables come from it). On a failed
  // step, returns its error with every drafts[i] cleared.
  Status draft(std::span<const DraftPiece> first, std::span<const int32_t> num_drafts,
               const KvManager& kv, const DraftCallbacks& cb,
               std::vector<std::vector<int32_t>>& drafts);

 private:
  using OnSampled = std::function<void(const DraftPiece& piece, int32_t row, int32_t token)>;
  // Fills steps with pieces in order: a step takes pieces while it has fewer
  // than max_num_seqs sequences and max_num_batched_tokens tokens; a piece
  // that does not fit whole ends the step with its first rows and continues
  // the next one. on_sampled runs after the step holding a piece's last row.
  Status run(std::span<const DraftPiece> pieces, const KvManager& kv, const DraftCallbacks& cb,
             const OnSampled& on_sampled);

  ModelRunner& runner_;
  StepBatch step_;  // reused across steps
  SampleOutput out_;
  std::vector<DraftPiece> pieces_, next_;  // chained steps' pieces (reused)
};

}  // namespace pagoda
