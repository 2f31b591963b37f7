// Scheduler-side state of a request and of its sequences (plain data; the
// Scheduler owns and mutates it, callers read it through const views).
//
// A request starts as one sequence (its prompt). When the prompt's prefill
// completes, the engine may fork it into up to num_seqs sequences (n parallel
// samples, or a beam search of that width); they share the prompt's KV
// blocks and are scheduled, preempted and admitted together as one group.
#pragma once

#include <cstdint>
#include <vector>

#include "kv/kv_manager.h"

namespace pagoda {

using RequestId = uint64_t;

// A sequence's token that its running step has not sampled yet
// (Scheduler::schedule_ahead); never a vocabulary id.
constexpr int32_t kPendingToken = -1;

struct RequestSpec {
  RequestId id = 0;  // chosen by the caller, unique among live requests
  std::vector<int32_t> prompt_tokens = {};
  int32_t priority = 0;                   // lower value is scheduled first; FCFS within a level
  int32_t num_seqs = 1;                   // group width after forking (n or beam width)
  int32_t max_new_tokens = 0;             // output cap per sequence; 0: up to max_model_len
  std::vector<uint64_t> cache_keys = {};  // prefix-cache extra keys (LoRA id, salt); empty for none
  bool use_prefix_cache = true;           // false: never reuse cached blocks (e.g. prompt logprobs)
};

enum class SeqEndReason {
  kStop,     // stop token or stop string (decided by the engine)
  kLength,   // max_tokens or max_model_len
  kAbort,    // abort(): client gone, error
  kDropped,  // a beam or sample that branch() did not keep
};

struct Sequence {
  SeqId id = 0;
  RequestId request_id = 0;
  std::vector<int32_t> tokens;  // prompt, then outputs
  int32_t num_prompt_tokens = 0;
  int32_t num_computed_tokens = 0;  // tokens whose KV is in the cache (0 while waiting)
  // Speculative decoding: the last num_draft_tokens tokens are drafts
  // (Scheduler::set_draft), which the next step computes and verify_draft()
  // then keeps in part or drops. Not verified, so never in the prefix cache.
  int32_t num_draft_tokens = 0;

  int32_t num_tokens() const { return static_cast<int32_t>(tokens.size()); }
  int32_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  int32_t num_uncomputed() const { return num_tokens() - num_computed_tokens; }
};

struct Request {
  RequestSpec spec;         // prompt_tokens moved into the first sequence
  uint64_t arrival = 0;     // admission order of add_request, kept across preemption
  std::vector<SeqId> seqs;  // live sequences, in fork order
  bool running = false;     // holds KV (else waiting)

  // Running-sequence slots the request occupies against max_num_seqs: its
  // declared width, for its whole life, so that forks and branches never
  // need a slot that another request took.
  int32_t num_seats() const { return spec.num_seqs; }
};

}  // namespace pagoda
