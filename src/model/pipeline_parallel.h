// Pipeline parallelism: how a model's layers are split over the stages of a
// pipeline, in one place. docs/parallelism.md ("Pipeline parallelism")
// explains the scheme; in short, for M stages:
//  - stage s holds a consecutive range of the decoder layers (pp_layers) and
//    the KV caches of those layers only;
//  - stage 0 holds the embedding, the last stage the final norm and the
//    lm_head (and the embedding too when it is tied to the lm_head);
//  - in a step, stage 0 embeds the tokens and runs its layers, then each
//    stage hands the residual stream and the pending block output [T, H] to
//    the next (blocks.h: begin_stage / end_stage); the last stage ends with
//    the final norm and computes the logits. Every stage gets the same step.
// Combinable with tensor parallelism: each stage is a tensor-parallel group,
// and rank t of one stage hands its tensors to rank t of the next.
#pragma once

#include "core/result.h"
#include "io/model_config.h"
#include "model/tensor_parallel.h"

namespace pagoda {

// One stage's place in a pipeline; {0, 1} is the whole model.
struct PpStage {
  int rank = 0;
  int size = 1;
  bool first() const { return rank == 0; }
  bool last() const { return rank == size - 1; }
};

// Whether `config` can be split into `pp_size` stages: at least one layer
// each. The error names the flag and the field, e.g.
// "--pipeline-parallel-size 4 exceeds num_hidden_layers 2". The engine
// calls this before loading anything; ModelRunner::create again.
Status validate_pipeline_parallel(const ModelConfig& config, int pp_size);

// The decoder layers of `stage` (global indices): L / M each, and the
// L mod M layers left over one more each on the stages just before the last
// one (the last stage also runs the lm_head and sampling), as vLLM's
// get_pp_indices: 5 layers over 3 stages are [0, 2), [2, 4), [4, 5).
// Requires validate_pipeline_parallel(config, stage.size).
IndexRange pp_layers(const ModelConfig& config, PpStage stage);

}  // namespace pagoda
