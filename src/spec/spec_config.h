// --speculative-config: vLLM's JSON object of the same name
// (docs/speculative-decoding.md lists the keys). Unknown keys, wrong types
// and values out of range are refused with a message naming the key.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/result.h"

namespace pagoda {

enum class SpecMethod {
  kNone,        // speculation off (no --speculative-config)
  kNgram,       // prompt lookup: the continuation of the last n tokens' earliest earlier match
  kSuffix,      // suffix decoding: suffix trees over this request and recent outputs
  kDraftModel,  // a smaller model with the target's vocabulary
  kEagle,       // an EAGLE-1 head: one Llama layer over the target's hidden states
  kEagle3,      // an EAGLE-3 head: fc over three target layers' residuals, own lm_head and d2t
};

struct SpeculativeConfig {
  SpecMethod method = SpecMethod::kNone;
  // k: tokens drafted per sequence and step (each step verifies k + 1).
  int32_t num_speculative_tokens = 0;
  // draft_model: the draft (a folder, .gguf file or repo id) and its revision;
  // eagle, eagle3: the head's folder or repo id (config.json + safetensors).
  std::string model;
  std::string revision;
  // ngram: match the last n tokens for n from prompt_lookup_max down to
  // prompt_lookup_min (1 <= min <= max).
  int32_t prompt_lookup_min = 0;
  int32_t prompt_lookup_max = 0;
  // suffix: tree depth (longest pattern and draft), requests whose outputs
  // the global tree keeps, draft length cap per matched token
  // (max_spec_factor * match length) and the least estimated probability a
  // drafted token may have.
  int32_t suffix_max_tree_depth = 24;
  int32_t suffix_max_cached_requests = 10000;
  double suffix_max_spec_factor = 1.0;
  double suffix_min_token_prob = 0.1;
  // Speculate only while at most this many sequences run (0: always).
  int32_t disable_by_batch_size = 0;
  // The share of decode time that rejected drafts may cost: the back-off's
  // cap grows (8 to 64 steps) until the measured cost of a verifying step
  // over a plain one, spread over the cap, stays under it
  // (engine/spec_cost_policy.h); a sample none of whose drafts was accepted
  // yet waits up to 64 whatever the cost. 0: the cap stays 8 for every sample.
  double miss_cost_budget = 0.04;

  bool enabled() const { return method != SpecMethod::kNone; }
  // Whether the method loads a model (draft_model, eagle, eagle3).
  bool has_model() const {
    return method == SpecMethod::kDraftModel || method == SpecMethod::kEagle ||
           method == SpecMethod::kEagle3;
  }
};

// The method's name as --speculative-config spells it ("" for kNone).
const char* spec_method_name(SpecMethod method);

// Parses the flag's JSON object (an empty string: speculation off). Errors
// are kInvalidArgument "--speculative-config: <key>: <what>".
Result<SpeculativeConfig> parse_speculative_config(std::string_view json);

}  // namespace pagoda
