// A GGUF file seen as a model: metadata → ModelConfig, and a WeightSource that
// speaks Hugging Face tensor names and layouts.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"
#include "io/gguf.h"
#include "io/model_config.h"
#include "io/weight_source.h"

namespace pagoda {

// ModelConfig from GGUF metadata for general.architecture llama (Mistral GGUFs
// say llama too), qwen2 and qwen3. Missing keys → Error naming key and file.
// tie_word_embeddings is true when output.weight is absent. dtype: F32/F16/BF16
// for unquantized files (general.file_type 0/1/32), else BF16.
// eos_token_ids are gguf_eos_token_ids(file).
Result<ModelConfig> gguf_model_config(const GgufFile& file);

// The end-of-generation ids the metadata names: tokenizer.ggml.eos_token_id,
// eot_token_id and eom_token_id, those present and in [0, INT32_MAX], in that
// order, unique.
std::vector<int32_t> gguf_eos_token_ids(const GgufFile& file);

// The Hugging Face name of a GGUF tensor ("blk.3.attn_q.weight" →
// "model.layers.3.self_attn.q_proj.weight"); nullopt for names with no HF
// counterpart (e.g. rope_freqs.weight). For `architecture` gemma2 / gemma3
// the layer norms follow llama.cpp's Gemma names: post_attention_norm →
// post_attention_layernorm, ffn_norm → pre_feedforward_layernorm,
// post_ffw_norm → post_feedforward_layernorm.
std::optional<std::string> gguf_to_hf_name(std::string_view gguf_name,
                                           std::string_view architecture = "");

// WeightSource over `file`. Tensors with an HF counterpart are listed by their
// HF name, others (rope_freqs.weight) by their GGUF name. Shapes are in
// PyTorch order (ggml dims reversed); read() returns F32 (dequantized), and for
// config.architecture "llama"/"mistral" un-permutes the rows of q_proj
// (num_heads) and k_proj (num_kv_heads) weights and biases back to HF order.
// 2-D tensors of a block type (gguf_block_dtype) also offer read_blocks():
// the file's blocks, q/k rows un-permuted the same way.
Result<std::unique_ptr<WeightSource>> open_gguf_weights(std::shared_ptr<const GgufFile> file,
                                                        const ModelConfig& config);

// Inverse of llama.cpp's convert_hf_to_gguf permute for q/k projections:
// out row h*D + i*D/2 + j = in row h*D + 2*j + i (D = rows / num_heads,
// i in {0,1}, j < D/2). in/out: [rows, cols] f32, distinct buffers.
Status unpermute_rope_rows(const float* in, float* out, int64_t rows, int64_t cols,
                           int64_t num_heads);
// The same on rows of `row_bytes` bytes each (rows of quantization blocks).
Status unpermute_rope_row_bytes(const uint8_t* in, uint8_t* out, int64_t rows, size_t row_bytes,
                                int64_t num_heads);

}  // namespace pagoda
