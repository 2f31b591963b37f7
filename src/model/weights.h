// The model's weights on the backend, in the backend's compute dtype (cd).
// H = hidden, V = vocab, I = intermediate, D = head dim, Hq / Hkv = query /
// key-value heads, Q = (Hq + 2 Hkv) * D = the fused QKV width.
// Views into `buffers`, which own the device memory. These are the tensors
// the families use: each family's load (architecture.h) fills the ones its
// layers have, and its forward reads them; an optional tensor a family does
// not have stays empty. Norm weights are stored as the factor the norm
// multiplies by (Gemma's 1 + w is folded in at load).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "backend/backend.h"

namespace pagoda {

// Linear weights (qkv, o_proj, gate_up, down, lm_head) may instead be in a
// block dtype (core/dtype.h: GGUF quantization blocks, byte for byte), the
// same logical shape, or FP8 with their scales (backend/linear_weight.h);
// Backend::linear computes from them (weight_loader.h says when).
struct LayerWeights {
  Tensor input_norm;      // [H] cd: RMSNorm before attention
  LinearWeight qkv;       // [Q, H] cd: q rows, then k rows, then v rows
  Tensor qkv_bias;        // [Q] cd, same order; empty without attention bias
  Tensor q_norm;          // [D] cd: per-head RMSNorm of q (Qwen3); empty otherwise
  Tensor k_norm;          // [D] cd: per-head RMSNorm of k (Qwen3); empty otherwise
  LinearWeight o_proj;    // [H, Hq * D] cd
  Tensor post_attn_norm;  // [H] cd: RMSNorm before the MLP; with sandwich norms (Gemma)
                          // the norm of the attention output instead
  Tensor pre_ff_norm;     // [H] cd: sandwich norms only: RMSNorm before the MLP
  Tensor post_ff_norm;    // [H] cd: sandwich norms only: RMSNorm of the MLP output
  LinearWeight gate_up;   // [2I, H] cd: gate rows first, then up rows (SwiGLU or GeGLU)
  LinearWeight down;      // [H, I] cd
  // A mixture-of-experts layer (moe_decoder.h) has these instead of
  // gate_up / down: E experts of intermediate Im, a shared expert of Is.
  Tensor router;           // [E, H] cd: router logits = x @ router^T
  Tensor experts_gate_up;  // [E, 2Im, H] cd: expert e's gate rows, then its up rows
  Tensor experts_down;     // [E, H, Im] cd
  Tensor shared_gate_up;   // [2Is, H] cd (Qwen2-MoE); empty without a shared expert
  Tensor shared_down;      // [H, Is] cd
  Tensor shared_gate;      // [1, H] cd: the shared expert's sigmoid gate logit
};

// Under pipeline parallelism (pipeline_parallel.h) a stage holds only its
// layers, and the globals of its end of the pipeline: `embed` on the first
// stage, `final_norm` and `lm_head` on the last (`embed` there too when tied);
// the others stay empty.
struct ModelWeights {
  // [V, H] cd; under tensor parallelism (vocab-parallel, the default) the
  // rank's block [tp_vocab_block, H] of the vocab rows [embed_first_row, ...)
  // (zero rows pad the last rank's), whose lookup the ranks sum (blocks.h
  // embed_tokens).
  Tensor embed;
  int64_t embed_first_row = 0;
  bool embed_vocab_parallel = false;
  std::vector<LayerWeights> layers;  // layers[i] is the model's layer first_layer + i
  int64_t first_layer = 0;
  Tensor final_norm;  // [H] cd
  // [V, H] (under tp the rank's vocab block); when tied, `embed`'s memory
  // (the same block under tp), or the embedding in its blocks.
  LinearWeight lm_head;
  // An EAGLE head (model/eagle.h): fc's columns over the token embedding and
  // over the hidden state, [H, H] each, and its bias [H] (empty without one).
  LinearWeight eagle_fc_embed;
  LinearWeight eagle_fc_hidden;
  Tensor eagle_fc_bias;
  // An EAGLE-3 head (model/eagle3.h): fc [H, 3H]'s column thirds over the
  // target's three aux hidden states, [H, H] each (the proposer applies them);
  // q/k/v's columns over the normed hidden input [Hq D + 2 Hkv D, H] (their
  // columns over the normed embedding are layers[0].qkv); hidden_norm [H].
  LinearWeight eagle3_fc[3];
  LinearWeight eagle3_qkv_hidden;
  Tensor eagle3_hidden_norm;
  std::vector<DeviceBuffer> buffers;  // owns every tensor above
  size_t num_bytes = 0;               // device bytes held by `buffers`
  // Tensors and device bytes of each dtype in `buffers` (the startup summary).
  struct FormatBytes {
    int64_t num_tensors = 0;
    size_t num_bytes = 0;
  };
  std::map<DType, FormatBytes> bytes_by_dtype;
};

}  // namespace pagoda
