// EagleProposer: speculative decoding's eagle method (--speculative-config
// '{"method": "eagle", "model": HEAD, "num_speculative_tokens": k}'). An
// EAGLE-1 head (engine/eagle_head.h checks its checkpoint; model/eagle.h is
// its forward) drafts greedily from the target's own hidden states. An
// EAGLE-3 head ("method": "eagle3"; load_eagle3_head checks it, model/eagle3.h
// is its forward) drafts from the target's aux hidden states (the engine
// makes the target keep them: eagle3_aux_layers): fc is applied to them on
// the device once per target forward (on_aux_hidden_states) and each
// sequence's [H] rows go to the pool (on_hidden_states); a chained draft's
// row there is the head's pre-norm output (ModelRunner::residual_states,
// vLLM's hidden_prenorm); its drafts, sampled over the draft vocabulary, are
// mapped to target ids through d2t. Otherwise it is the EAGLE-1 proposer
// below.
//
// The head runs through its own ModelRunner on the target's backend (the
// same stream: the engine proposes only while no target step is in flight),
// with the target's lm_head and, when the head has none, its embedding
// (RunnerOptions::shared_globals), and its own one-layer paged KV pool whose
// block tables and eviction are a DraftKv (engine/draft_kv.h); a
// DraftBatcher (engine/draft_batcher.h) packs its forwards into steps. The
// runner's hidden-state pool has one row per KV slot of that pool.
//
// Head row i of a sequence (KV position i) reads token i + 1 and the
// target's hidden state at position i (vLLM's shifted inputs): its output
// gives the token at i + 2. The engine hands the target's hidden rows of
// every forward (on_hidden_states), which are copied on the device into the
// pool at their positions' slots -- no host copy. To draft after a sequence
// of n tokens (the last sampled, not computed), the rows up to n - 2 are
// computed (those missing, all sequences in one batched forward): draft 1.
// Draft j + 1 comes from row n - 2 + j, whose token is draft j and whose
// hidden state is the head's own output of row n - 3 + j (copied into the
// pool at that row's slot; the target's later rows overwrite it).
//
// State per sequence: the tokens its computed rows read and which of the
// target's hidden rows the pool holds (rows are recomputed from where the
// tokens or the target's hidden rows changed: rejected drafts, preemption).
//
// Reuse across requests: head row i (its KV and pool row, the target's
// hidden row i) depends only on tokens 0..i + 1 (and the request's
// prefix-cache keys: a LoRA adapter changes the target's rows). So a
// sequence's full head blocks are keyed as the target's prefix cache keys
// its blocks (kv/block_hash.h, chained XXH3 over a block's tokens with the
// cache keys) but over what the rows read: block b's key covers tokens
// 0..(b + 1) * block_size, hashed as tokens 1.. with token 0 among the
// extra keys (the target's hash of block b lacks token (b + 1) * block_size,
// which its last row reads). At a sequence's end (on_sequence_end) its
// computed rows that the final tokens confirm are cached in the head's pool
// (DraftKv::cache_and_drop); a sequence whose state starts with the longest
// cached run of its head blocks reuses them (rows [0, reused_end): shared,
// never written, the target's hidden rows for them skipped) when they reach
// the first position the target hands (a prefix-cache hit of the same
// prefix); rows after them are computed as usual.
//
// Otherwise (nothing cached, or too little) the state starts at the first
// position whose hidden row the head was handed
// (kv_start): position 0 for a prompt computed in full; the first position
// computed after a prefix-cache hit (the target computed no hidden states
// before it); the next forward's first position after the state was
// evicted, or after a gap in the rows (or for a fork whose parent had none). The head's KV and pool
// hold positions kv_start.. only (rows of its own block table from 0), RoPE at the absolute
// positions, so its rows attend over that part of the sequence; drafting
// starts once row len - 2 is at or after kv_start. A fork (on_fork) starts
// from its parent's hidden rows instead: the samples of n > 1 draft from
// their first decode step over the whole prompt. Pool: the target's
// capacity plus k + 1 tokens per --max-num-seqs; when full, the state of
// the least recently drafted sequence that is not in the current call is
// evicted (a sequence never evicts itself, also when its hidden rows grow it);
// cached idle head blocks are evicted (least recently released first) before
// any state is.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "core/result.h"
#include "engine/draft_batcher.h"
#include "engine/draft_kv.h"
#include "engine/draft_model_proposer.h"
#include "engine/eagle_head.h"
#include "engine/engine_api.h"
#include "model/model_runner.h"
#include "spec/proposer.h"

namespace pagoda {

// EAGLE-3's aux layer ids of the target (the head's config.json, checked
// against the target): what the engine sets as the target's
// RunnerOptions::aux_hidden_layers before creating it. Errors as create()'s.
Result<std::vector<int64_t>> eagle3_aux_layers(const EngineOptions& options,
                                               const EagleHeadTarget& target);

class EagleProposer final : public Proposer {
 public:
  // Resolves options.speculative.model (a folder or repo id of
  // safetensors), checks it with load_eagle_head (eagle3: parse_eagle3_fields
  // and load_eagle3_head) (kInvalidArgument naming what differs), refuses a
  // target without a single runner (tensor or pipeline parallelism) or, for
  // eagle3, one keeping no aux hidden states, then creates the head's runner
  // on the target's backend (--block-size, --max-num-seqs,
  // --max-num-batched-tokens, --enforce-eager).
  static Result<std::unique_ptr<EagleProposer>> create(const EngineOptions& options,
                                                       const DraftModelTarget& target);
  ~EagleProposer() override;

  bool wants_hidden_states() const override { return true; }
  // A new state starts with the cached head blocks of prefix.tokens when
  // they reach first_pos (see above).
  void on_hidden_states(int64_t seq_id, int32_t first_pos, const Tensor& rows, int32_t aux_row,
                        const HiddenRowsPrefix& prefix) override;
  // EAGLE-3: fc over every row of the forward at once (apply_fc).
  void on_aux_hidden_states(std::span<const Tensor> aux) override;
  Status propose(std::span<const DraftInput> inputs,
                 std::vector<std::vector<int32_t>>& drafts) override;
  // Caches seq_id's head blocks whose rows `tokens` confirm (a state
  // starting at position 0 only), then drops its state.
  void on_sequence_end(int64_t seq_id, std::span<const int32_t> tokens,
                       int32_t num_prompt_tokens) override;
  // child's state starts as parent's target hidden rows (copied in the pool
  // on the device) with no head row computed: its first propose() computes
  // them (the head's KV is not copied).
  void on_fork(int64_t parent, int64_t child) override;

  // Sequences with state, states evicted so far, cached head blocks reused
  // so far and cached idle ones now (tests, logs).
  int32_t num_seqs() const { return static_cast<int32_t>(seqs_.size()); }
  int64_t num_evictions() const { return kv_.num_evictions(); }
  int64_t num_reused_blocks() const { return kv_.num_reused_blocks(); }
  int32_t num_cached_blocks() const { return kv_.manager().stats().num_cached_blocks; }

 private:
  struct SeqState {
    // The first position the head has (the first target hidden row it was
    // handed): its KV, pool rows and block table hold positions
    // [kv_start, ...) at rows [0, ...) (DraftPiece::kv_start).
    int32_t kv_start = 0;
    // The sequence's tokens from position 0; rows [kv_start, tokens.size() - 1)
    // are computed, row i read tokens[i + 1] (none when tokens.size() <= kv_start + 1).
    std::vector<int32_t> tokens;
    // The pool holds the target's hidden rows of positions [kv_start, hidden_end).
    int32_t hidden_end = 0;
    // Rows [0, reused_end) are cached blocks it started with (kv_start 0):
    // shared, never written or recomputed.
    int32_t reused_end = 0;
    // Its head blocks' extra keys (the request's cache keys, then token 0);
    // empty: none of its blocks is cached at its end (kv_start > 0).
    std::vector<uint64_t> keys;
  };

  // draft_to_target: an EAGLE-3 head's d2t map (empty: EAGLE-1);
  // max_target_rows: the most rows of one target forward (its
  // --max-num-batched-tokens).
  EagleProposer(std::unique_ptr<ModelRunner> runner, std::vector<int32_t> draft_to_target,
                int64_t max_target_rows);
  bool eagle3() const { return !draft_to_target_.empty(); }
  // EAGLE-3: fc_scratch_[0] rows [0, n) = fc(concat(aux[0], aux[1], aux[2]))
  // for aux [n, H] each, as three [H, H] linears summed (on the device);
  // fc_rows_ = n.
  void apply_fc(std::span<const Tensor> aux);
  // Frees seq_id's blocks and state.
  void drop(int64_t seq_id);
  // A new state for seq_id, whose first hidden row handed is first_pos:
  // from the cached head blocks of prefix.tokens when they reach first_pos
  // (*hit holds them), else at first_pos (*hit empty).
  SeqState start_state(int32_t first_pos, const HiddenRowsPrefix& prefix, PrefixHit* hit) const;
  // Copies n rows of src starting at src_row to seq_id's pool slots of
  // positions [pos, pos + n) (the table must cover them).
  void copy_to_pool(const Tensor& src, int64_t src_row, int64_t seq_id, int32_t pos, int32_t n);
  // Copies the pool rows [0, n) of from_seq's table to to_seq's (both must cover them).
  void copy_pool_rows(int64_t from_seq, int64_t to_seq, int32_t n);

  std::unique_ptr<ModelRunner> runner_;
  DraftKv kv_;  // evicting a sequence erases its seqs_ entry
  std::unordered_map<int64_t, SeqState> seqs_;
  DraftBatcher batcher_;
  std::vector<int32_t> draft_to_target_;  // EAGLE-3 [Vd]: target id of each draft id
  DeviceBuffer fc_scratch_[3];            // EAGLE-3 [max_target_rows, H] cd each (apply_fc)
  int64_t fc_rows_ = 0;                   // rows of fc_scratch_[0] the last forward filled
  DraftCallbacks callbacks_;              // over seqs_
};

}  // namespace pagoda
