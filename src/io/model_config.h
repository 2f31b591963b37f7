// Model hyper-parameters, independent of the file format they came from
// (Hugging Face config.json or GGUF metadata).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/quantization_config.h"

namespace pagoda {

enum class RopeScalingType { kDefault, kLinear, kLlama3, kYarn, kLongrope };

// rope_scaling from config.json (or GGUF rope.scaling.*). Fields unused by a
// type keep their defaults.
struct RopeScaling {
  RopeScalingType type = RopeScalingType::kDefault;
  double factor = 1.0;
  // llama3
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 0;
  // yarn
  double beta_fast = 32.0;
  double beta_slow = 1.0;
  std::optional<double> attention_factor;  // yarn / longrope: overrides the derived factor
  double mscale = 0.0;                     // deepseek-style yarn (0: unused)
  double mscale_all_dim = 0.0;
  // longrope (Phi-3 / Phi-3.5, formerly "su"): per-pair divisors of the
  // rotary frequencies, [rope_dim() / 2] each. The short set serves a
  // max_model_len <= original_max_position_embeddings, the long set a longer
  // one (rope.h); attention_factor (default sqrt(1 + ln(factor) /
  // ln(original)), factor = max_position_embeddings / original) multiplies
  // cos and sin.
  std::vector<float> short_factor, long_factor;
};

struct ModelConfig {
  std::string architecture;   // canonical family (registry.cpp): "llama", ..., "qwen3_moe"
  std::string hf_architecture;// e.g. "LlamaForCausalLM" (informational)
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;       // from config when present, else hidden_size / num_heads
  // How many leading dims of each q / k head the rotary embedding turns
  // (rotate-half pairs (i, i + rotary_dim / 2)); dims [rotary_dim, head_dim)
  // pass through unrotated. 0: all of head_dim. Phi-4-mini: 96 of 128
  // (partial_rotary_factor 0.75; GGUF rope.dimension_count).
  int64_t rotary_dim = 0;
  int64_t rope_dim() const { return rotary_dim > 0 ? rotary_dim : head_dim; }
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  // Per-pair divisors of the rotary frequencies, [rope_dim() / 2], applied after
  // rope_scaling: GGUF's rope_freqs.weight, in which llama.cpp's converter
  // stores Llama 3.x's llama3 scaling. Empty: none.
  std::vector<float> rope_freq_factors;
  int64_t max_position_embeddings = 0;
  bool tie_word_embeddings = false;
  bool attention_bias = false;  // q/k/v projections have biases (Qwen2)
  bool qk_norm = false;         // per-head RMSNorm on q and k (Qwen3)
  int64_t sliding_window = 0;   // 0: full attention everywhere
  // Which layers attend only within sliding_window (a key more than
  // sliding_window - 1 positions behind the query is masked), [num_layers];
  // the others attend to the whole context (Gemma 2 / 3; Phi-3: all of them
  // when the window is shorter than the context). Empty: the
  // family does not mask by the window (mistral / qwen: the runner caps
  // max_model_len to sliding_window instead).
  std::vector<bool> sliding_layers;
  // Gemma 2 / 3 (all 0 / false / silu elsewhere):
  bool gelu_tanh_mlp = false;          // hidden_activation gelu_pytorch_tanh: GeGLU, not SwiGLU
  bool norm_weight_offset = false;     // RMSNorm multiplies by (1 + w) and the file stores w
                                       // (HF folders); GGUF stores 1 + w already
  bool sandwich_norms = false;         // post-attention / pre- and post-feedforward norms
  bool scale_embeddings = false;       // embeddings times sqrt(hidden), in the compute dtype
  double query_pre_attn_scalar = 0;    // > 0: softmax scale query_pre_attn_scalar^-0.5, not D^-0.5
  double attn_logit_softcapping = 0;   // > 0: scores = cap * tanh(scores / cap) before softmax
  double final_logit_softcapping = 0;  // > 0: logits = cap * tanh(logits / cap)
  // > 0: the rope base of the sliding layers, which use no rope_scaling
  // (Gemma 3's rope_local_base_freq); rope_theta / rope_scaling then apply
  // to the full-attention layers only. 0: every layer uses rope_theta.
  double rope_local_base_freq = 0;
  DType dtype = DType::kBF16;   // torch_dtype of the stored weights
  // How the linear weights are quantised (config.json quantization_config or
  // hf_quant_config.json; --quantization fp8 sets the online scheme).
  QuantizationConfig quantization;
  // Mixture of experts (mixtral, qwen2_moe, qwen3_moe); num_experts 0: a
  // dense MLP in every layer.
  int64_t num_experts = 0;
  int64_t num_experts_per_tok = 0;              // top-k routed experts per token
  int64_t moe_intermediate_size = 0;            // each routed expert's intermediate size
  bool norm_topk_prob = false;                  // renormalise the top-k routing weights to sum 1
  int64_t shared_expert_intermediate_size = 0;  // Qwen2-MoE's gated shared expert; 0: none
  int64_t decoder_sparse_step = 1;              // layer i is MoE when (i + 1) % step == 0 ...
  std::vector<int64_t> mlp_only_layers;         // ... and i is not listed here (dense MLP)
  // Whether `layer` has the experts (else the dense MLP of intermediate_size).
  bool is_moe_layer(int64_t layer) const {
    if (num_experts == 0 || decoder_sparse_step <= 0 || (layer + 1) % decoder_sparse_step != 0)
      return false;
    for (int64_t l : mlp_only_layers)
      if (l == layer) return false;
    return true;
  }
  std::optional<int32_t> bos_token_id;
  std::vector<int32_t> eos_token_ids;
};

// generation_config.json: defaults for requests that leave a field unset.
struct GenerationDefaults {
  std::optional<double> temperature;
  std::optional<double> top_p;
  std::optional<int64_t> top_k;
  std::optional<double> min_p;
  std::optional<double> repetition_penalty;
  std::optional<int64_t> max_new_tokens;
  std::vector<int32_t> eos_token_ids;
};

}  // namespace pagoda
