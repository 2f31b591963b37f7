// DraftBatcher: runs a speculative draft's forward work -- pieces, each some
// consecutive rows of one sequence -- through the draft's ModelRunner in as
// few steps as its --max-num-batched-tokens and --max-num-seqs allow, and
// samples one greedy token after each piece's last row.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>

#include "batch/step_batch.h"
#include "core/result.h"
#include "kv/kv_manager.h"
#include "model/model_runner.h"

namespace pagoda {

// Rows (KV positions) [begin, end) of sequence seq_id, begin < end; the
// logits of row end - 1 give a greedy token. draft_index is the owner's tag
// for that token (the proposer's input index).
struct DraftPiece {
  int64_t seq_id = 0;
  int32_t begin = 0;
  int32_t end = 0;
  size_t draft_index = 0;
};

class DraftBatcher {
 public:
  // The token row `pos` of seq_id reads.
  using TokenAt = std::function<int32_t(int64_t seq_id, int32_t pos)>;
  // A piece's greedy token, sampled from row `row` of the step just executed
  // (so the runner's hidden_states() row `row` is that row's output); called
  // in piece order, after the step that ran the piece's last row.
  using OnSampled = std::function<void(const DraftPiece& piece, int32_t row, int32_t token)>;

  // runner must outlive the batcher.
  explicit DraftBatcher(ModelRunner& runner) : runner_(runner) {}

  // Fills steps with pieces in order: a step takes pieces while it has fewer
  // than max_num_seqs sequences and max_num_batched_tokens tokens; a piece
  // that does not fit whole ends the step with its first rows and continues
  // the next one. kv must hold a table covering every piece's rows (slot
  // mapping and block tables come from it). Returns the first failed step's
  // error (on_sampled has then been called for the earlier steps only).
  Status run(std::span<const DraftPiece> pieces, const KvManager& kv, const TokenAt& token_at,
             const OnSampled& on_sampled);

 private:
  ModelRunner& runner_;
  StepBatch step_;  // reused across steps
  SampleOutput out_;
};

}  // namespace pagoda
