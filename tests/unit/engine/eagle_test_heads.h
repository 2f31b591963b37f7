// Test EAGLE heads of stories260K's shape (the engine tests' target),
// written as safetensors checkpoints into a folder, and the
// --speculative-config naming one.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "batch/step_batch.h"
#include "spec/spec_config.h"

namespace pagoda::test {

// How a test head is built: `copy` makes fc = [0 | I], zero o_proj and
// down_proj (the head's output is the target's hidden state: draft 1 is the
// target's greedy token at the previous position); otherwise every weight
// is random (scale 0.1). `noise` is added to fc either way.
struct HeadSpec {
  bool copy = false;
  float noise = 0.0f;
  uint32_t seed = 1;
};

// Writes an EAGLE-1 head of stories260K's shape into dir.
void make_head(const std::filesystem::path& dir, const HeadSpec& spec);

// stories260K's tensor `name` as f32 on the host.
std::vector<float> target_tensor(const std::string& name);

// How a test EAGLE-3 head is built. `copy`: aux layers [5, 1, 3] (5 = L,
// the stream leaving stories260K's last layer), fc = [I | 0 | 0], zero
// o_proj and down_proj, the target's final norm, and lm_head row d = the
// target's (tied) embedding row of target id (d + 7) % V with d2t[d] = that
// minus d: the head's logits are the target's, so draft 1 is the target's
// greedy token one position back (the right token only through d2t).
// Otherwise aux layers [1, 2, 4], every weight random (scale 0.1), a draft
// vocabulary of V / 2 with d2t[d] = d (target id 2d). `noise` is added to fc.
struct Eagle3Spec {
  bool copy = false;
  float noise = 0.0f;
  uint32_t seed = 1;
};

// Writes an EAGLE-3 head of stories260K's shape into dir.
void make_eagle3_head(const std::filesystem::path& dir, const Eagle3Spec& spec);

// {"method": method, "num_speculative_tokens": k, "model": head}.
SpeculativeConfig eagle_config(const std::filesystem::path& head, int k,
                               const char* method = "eagle");

// A step of stories260K's runner over `prompts`, sequence s in KV blocks
// [4s, 4s + 4) of 16 tokens (at most 63 prompt tokens), each sequence's last
// row sampled greedily: without `next` one prefill of every prompt; with it,
// the decode step after that prefill, token `next` at each prompt's length.
StepBatch greedy_step(const std::vector<std::vector<int32_t>>& prompts,
                      std::optional<int32_t> next = std::nullopt);

}  // namespace pagoda::test
