// DraftModelProposer: speculative decoding's draft_model method
// (--speculative-config '{"method": "draft_model", "model": M,
// "num_speculative_tokens": k}'). A smaller model M of any family pagoda
// loads, with the target's vocabulary, drafts each sequence's next tokens
// greedily; the target verifies them (spec/proposer.h).
//
// The draft runs on its own backend of the target's device kind (--device;
// cuda: the first GPU) through its own ModelRunner, with its own paged KV
// pool, whose block tables and eviction are a DraftKv (engine/draft_kv.h);
// a DraftBatcher (engine/draft_batcher.h) packs its forwards into steps.
//
// Pool size rule: the pool holds DraftModelTarget::kv_tokens tokens -- the
// engine passes the target's pool capacity, so every token the target holds
// can have its draft KV too. The draft is created after the target's runner:
// on cuda the target took --gpu-memory-utilization of the GPU already, and
// the draft's weights, scratch and pool come from the memory beyond that
// fraction. When that pool does not fit there, the pool is what the GPU has
// left after the draft's weights and scratch, less the runner's free-memory
// reserve (model/memory_profile.h), and a warning says so; when not even the
// weights fit, start-up fails asking to lower --gpu-memory-utilization.
// Lower it to leave the draft room. The pool size is logged at start.
//
// State per sequence: the tokens whose draft KV is computed. propose() keeps
// the longest common prefix of those and the sequence's current tokens
// (rejected drafts and anything else that changed only shorten it), computes
// the missing tokens of every sequence in one batched forward (prefill
// chunks, split into more forwards only when --max-num-batched-tokens or
// --max-num-seqs demand it), samples draft 1 greedily at each sequence's
// last position, then runs max_draft - 1 batched greedy decode steps for
// drafts 2..k (a sequence that asked for fewer leaves the batch). A
// sequence's block table covers the slots of its last call (its tokens and
// k - 1 drafts): blocks past them are released (KvManager::shrink).
//
// When the pool is full, the draft state of the least recently drafted
// sequence that is not in the current call is evicted (it is recomputed
// when that sequence is drafted again); a sequence that still does not fit
// gets no draft this step, and so does a sequence with a token outside the
// draft's vocabulary (a target with a wider one). A failed forward drops the state of that call's
// sequences and returns the error (the engine runs the step undrafted).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "core/result.h"
#include "engine/draft_batcher.h"
#include "engine/draft_kv.h"
#include "engine/engine_api.h"
#include "kv/kv_manager.h"
#include "model/model_runner.h"
#include "spec/proposer.h"

namespace pagoda {

class Tokenizer;

// What the draft needs of the target (the engine's loaded model).
struct DraftModelTarget {
  std::string name;                      // the target as named in errors (EngineOptions::model)
  const Tokenizer* tokenizer = nullptr;  // the target's; read only during create()
  int64_t vocab_size = 0;                // the target's logits width (ModelConfig::vocab_size)
  int64_t max_model_len = 0;             // the target's; the draft needs no longer sequences
  int64_t kv_tokens = 0;                 // tokens the draft's pool holds (>= 1)
  int64_t hidden_size = 0;               // the target's (an EAGLE head must match it)
  // The target's runner (an EAGLE head reads its lm_head, embedding and
  // hidden states and runs on its backend); null with tensor parallelism.
  const ModelRunner* runner = nullptr;
};

class DraftModelProposer final : public Proposer {
 public:
  // Resolves options.speculative.model (revision options.speculative.revision;
  // a folder, .gguf file or repo id, as --model; --load-format and
  // --download-dir apply), then refuses a draft whose vocabulary differs
  // from the target's before loading its weights (kInvalidArgument naming
  // both models): its logits width above target.vocab_size, or its
  // tokenizer unlike the target's (vocabulary size, bos / eos ids, or the
  // piece of any id). Then creates the backend (options.device) and the
  // runner: options' block size, --max-num-seqs, --max-num-batched-tokens
  // and --enforce-eager, target.kv_tokens of pool (cuda: less when the GPU
  // has less room; see the pool size rule above), max model len the least
  // of the target's, the draft's positions and the pool. Logs the draft and
  // its pool.
  static Result<std::unique_ptr<DraftModelProposer>> create(const EngineOptions& options,
                                                            const DraftModelTarget& target);
  ~DraftModelProposer() override;

  Status propose(std::span<const DraftInput> inputs,
                 std::vector<std::vector<int32_t>>& drafts) override;
  void on_sequence_end(int64_t seq_id, std::span<const int32_t> tokens,
                       int32_t num_prompt_tokens) override;

  // The draft's pool (tests, logs).
  const KvManager& kv() const { return kv_.manager(); }
  // Sequences with draft state, and how many states were evicted so far.
  int32_t num_seqs() const { return static_cast<int32_t>(seqs_.size()); }
  int64_t num_evictions() const { return kv_.num_evictions(); }
  // Tokens of seq_id whose draft KV is computed (0 when it has no state).
  int32_t num_computed(int64_t seq_id) const;

 private:
  // The tokens of a sequence whose draft KV is computed (positions
  // [0, tokens.size())); during propose(), the tokens its pieces read.
  struct SeqState {
    std::vector<int32_t> tokens;
  };

  DraftModelProposer(std::unique_ptr<Backend> backend, std::unique_ptr<ModelRunner> runner);
  // Frees seq_id's blocks and state.
  void drop(int64_t seq_id);

  std::unique_ptr<Backend> backend_;  // outlives runner_
  std::unique_ptr<ModelRunner> runner_;
  DraftKv kv_;  // evicting a sequence erases its seqs_ entry
  std::unordered_map<int64_t, SeqState> seqs_;
  DraftBatcher batcher_;
  DraftCallbacks callbacks_;  // over seqs_
};

}  // namespace pagoda
