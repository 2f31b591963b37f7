// WeightSource over a GGUF file: HF names, PyTorch shapes, f32 on read().
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "core/log.h"
#include "core/thread_pool.h"
#include "io/gguf_model.h"

namespace pagoda {

namespace {

// GGUF per-layer tensor stem → HF module path under model.layers.N.
constexpr std::pair<const char*, const char*> kLayerNames[] = {
    {"attn_norm", "input_layernorm"},
    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},
    {"attn_qkv", "self_attn.qkv_proj"},  // Phi-3's pre-fused q/k/v
    {"attn_output", "self_attn.o_proj"},
    {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"},
    {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},
    {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
    // Mixture of experts (Qwen names; mixtral_name() renames them for Mixtral).
    {"ffn_gate_inp", "mlp.gate"},
    {"ffn_gate_shexp", "mlp.shared_expert.gate_proj"},
    {"ffn_up_shexp", "mlp.shared_expert.up_proj"},
    {"ffn_down_shexp", "mlp.shared_expert.down_proj"},
    {"ffn_gate_inp_shexp", "mlp.shared_expert_gate"},
    // Experts stacked [E, rows, cols]: the source exposes one tensor per
    // expert, "mlp.experts.{e}.gate_proj" etc. (expert_names()).
    {"ffn_gate_exps", "mlp.experts.gate_proj"},
    {"ffn_up_exps", "mlp.experts.up_proj"},
    {"ffn_down_exps", "mlp.experts.down_proj"},
};

// Gemma 2 / 3 (sandwich norms): llama.cpp's names for the four layer norms.
constexpr std::pair<const char*, const char*> kGemmaLayerNames[] = {
    {"post_attention_norm", "post_attention_layernorm"},
    {"ffn_norm", "pre_feedforward_layernorm"},
    {"post_ffw_norm", "post_feedforward_layernorm"},
};
// "model.layers.N.mlp.experts.P.weight" (a stacked *_exps tensor's name) →
// the per-expert names "model.layers.N.mlp.experts.{e}.P.weight"; empty for
// other names.
std::vector<std::string> expert_names(const std::string& name, int64_t num_experts) {
  constexpr std::string_view kExperts = ".mlp.experts.";
  const size_t at = name.find(kExperts);
  if (at == std::string::npos) return {};
  std::vector<std::string> out;
  const std::string head = name.substr(0, at + kExperts.size()),
                    tail = name.substr(at + kExperts.size());
  for (int64_t e = 0; e < num_experts; ++e) out.push_back(head + std::to_string(e) + "." + tail);
  return out;
}

// Mixtral's Hugging Face names for the Qwen-style MoE names above:
// block_sparse_moe.gate and block_sparse_moe.experts.{e}.w1 / w3 / w2.
std::string mixtral_name(std::string name) {
  auto replace = [&](std::string_view from, std::string_view to) {
    const size_t at = name.find(from);
    if (at != std::string::npos) name.replace(at, from.size(), to);
  };
  replace(".mlp.gate.", ".block_sparse_moe.gate.");
  replace(".mlp.experts.", ".block_sparse_moe.experts.");
  replace(".gate_proj.", ".w1.");
  replace(".up_proj.", ".w3.");
  replace(".down_proj.", ".w2.");
  return name;
}

constexpr std::pair<const char*, const char*> kGlobalNames[] = {
    {"token_embd", "model.embed_tokens"},
    {"output_norm", "model.norm"},
    {"output", "lm_head"},
};

// Splits "stem.weight" / "stem.bias" into stem and suffix.
bool split_suffix(std::string_view name, std::string_view* stem, std::string_view* suffix) {
  for (std::string_view s : {std::string_view(".weight"), std::string_view(".bias")}) {
    if (name.size() > s.size() && name.substr(name.size() - s.size()) == s) {
      *stem = name.substr(0, name.size() - s.size());
      *suffix = s;
      return true;
    }
  }
  return false;
}

// Elements per dequantization chunk: keeps parallel_for work items large.
constexpr int64_t kChunkBlocks = 4096;

struct GgufEntry {
  const GgufTensorInfo* info;
  int64_t permute_heads;  // > 0: un-permute rows with this head count
  int64_t expert = -1;    // >= 0: this expert's slice of a stacked [E, ...] tensor
  int64_t num_experts = 0;
};

class GgufSource final : public IndexedWeightSource {
 public:
  GgufSource(std::shared_ptr<const GgufFile> file) : file_(std::move(file)) {}

  Status add(const GgufTensorInfo& t, const ModelConfig& config) {
    std::string name = gguf_to_hf_name(t.name, config.architecture).value_or(t.name);
    const bool mixtral = config.architecture == "mixtral";
    TensorInfo info{name, DType::kF32, std::vector<int64_t>(t.dims.rbegin(), t.dims.rend()),
                    t.nbytes, std::nullopt};
    if (name.find(".shared_expert_gate.") != std::string::npos && info.shape.size() == 1)
      info.shape.insert(info.shape.begin(), 1);  // llama.cpp stores the [1, H] gate as [H]
    if (info.shape.size() == 2) info.blocks = gguf_block_dtype(t.type);
    if (t.name.find("_exps.") != std::string::npos) return add_experts(t, std::move(info), mixtral);
    if (mixtral) name = info.name = mixtral_name(name);
    GgufEntry entry{&t, 0};
    if (config.architecture == "llama" || config.architecture == "mistral" ||
        config.architecture == "mixtral") {
      if (name.find(".self_attn.q_proj.") != std::string::npos)
        entry.permute_heads = config.num_heads;
      if (name.find(".self_attn.k_proj.") != std::string::npos)
        entry.permute_heads = config.num_kv_heads;
    }
    if (entry.permute_heads > 0 &&
        (info.shape.empty() || info.shape[0] % (2 * entry.permute_heads) != 0)) {
      return make_error(ErrorCode::kCorrupt,
                        fmt::format("GGUF {}: tensor '{}' has {} rows, not a multiple of 2 × "
                                    "{} heads",
                                    file_->path(), t.name, info.shape.empty() ? 0 : info.shape[0],
                                    entry.permute_heads));
    }
    if (!add_tensor(std::move(info))) {
      return make_error(
          ErrorCode::kCorrupt,
          fmt::format("GGUF {}: two tensors map to the name '{}'", file_->path(), name));
    }
    entries_.push_back(entry);
    return Status::Ok();
  }

  // A stacked [E, rows, cols] tensor as E tensors [rows, cols] (under
  // Mixtral's names with `mixtral`); each expert's slice is whole
  // quantization blocks (rows are).
  Status add_experts(const GgufTensorInfo& t, TensorInfo stacked, bool mixtral) {
    const int64_t num_experts = stacked.shape.empty() ? 0 : stacked.shape[0];
    if (stacked.shape.size() != 3 || num_experts <= 0 || t.nbytes % num_experts != 0) {
      return make_error(ErrorCode::kCorrupt,
                        fmt::format("GGUF {}: expert tensor '{}' is not [experts, rows, cols]",
                                    file_->path(), t.name));
    }
    const std::vector<std::string> names = expert_names(stacked.name, num_experts);
    if (names.empty()) {
      return make_error(ErrorCode::kUnsupported,
                        fmt::format("GGUF {}: expert tensor '{}' is not one of ffn_gate_exps, "
                                    "ffn_up_exps, ffn_down_exps",
                                    file_->path(), t.name));
    }
    for (int64_t e = 0; e < num_experts; ++e) {
      const std::string& name = names[static_cast<size_t>(e)];
      TensorInfo info{mixtral ? mixtral_name(name) : name,
                      DType::kF32,
                      {stacked.shape[1], stacked.shape[2]},
                      t.nbytes / num_experts,
                      gguf_block_dtype(t.type)};
      if (!add_tensor(info)) {
        return make_error(
            ErrorCode::kCorrupt,
            fmt::format("GGUF {}: two tensors map to the name '{}'", file_->path(), info.name));
      }
      entries_.push_back({&t, 0, e, num_experts});
    }
    return Status::Ok();
  }

  Result<HostTensor> read(std::string_view name) override {
    const std::optional<size_t> at = position(name);
    if (!at) {
      return make_error(ErrorCode::kNotFound,
                        fmt::format("tensor '{}' not found in GGUF {}", name, file_->path()));
    }
    const GgufEntry& e = entries_[*at];
    HostTensor t;
    t.dtype = DType::kF32;
    t.shape = tensors()[*at].shape;
    const uint8_t* raw = raw_data(e);
    const int64_t n = t.numel();
    if (e.info->type == GgufType::kF32 && e.permute_heads == 0 &&
        reinterpret_cast<uintptr_t>(raw) % 4 == 0) {
      t.data = raw;  // view into the map, no copy
      return t;
    }
    PAGODA_RETURN_IF_ERROR(check_dequantizable(*e.info));
    t.owned.resize(static_cast<size_t>(n) * sizeof(float));
    float* out = reinterpret_cast<float*>(t.owned.data());
    t.data = out;
    if (n == 0) return t;
    if (e.permute_heads == 0) {
      dequantize_parallel(e.info->type, raw, n, out);
      return t;
    }
    std::vector<float> permuted(static_cast<size_t>(n));
    dequantize_parallel(e.info->type, raw, n, permuted.data());
    const int64_t rows = t.shape[0];
    PAGODA_RETURN_IF_ERROR(
        unpermute_rope_rows(permuted.data(), out, rows, n / rows, e.permute_heads));
    return t;
  }

  Result<HostTensor> read_blocks(std::string_view name) override {
    const std::optional<size_t> at = position(name);
    if (!at || !tensors()[*at].blocks) return WeightSource::read_blocks(name);
    const GgufEntry& e = entries_[*at];
    HostTensor t;
    t.dtype = *tensors()[*at].blocks;
    t.shape = tensors()[*at].shape;
    const uint8_t* raw = raw_data(e);
    if (e.permute_heads == 0) {
      t.data = raw;  // view into the map, no copy
      return t;
    }
    const int64_t rows = t.shape[0];
    const size_t row_bytes = dtype_nbytes(t.dtype, t.shape[1]);
    t.owned.resize(static_cast<size_t>(rows) * row_bytes);
    PAGODA_RETURN_IF_ERROR(
        unpermute_rope_row_bytes(raw, t.owned.data(), rows, row_bytes, e.permute_heads));
    t.data = t.owned.data();
    return t;
  }

  std::string describe() const override {
    return fmt::format("GGUF {} (v{}, {} tensors)", file_->path(), file_->version(), tensors().size());
  }

 private:
  Status check_dequantizable(const GgufTensorInfo& info) const {
    if (gguf_can_dequantize(info.type)) return Status::Ok();
    return make_error(
        ErrorCode::kUnsupported,
        fmt::format(
            "GGUF {}: tensor '{}' has type {}, which cannot be dequantized (supported: F32, "
            "F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K)",
            file_->path(), info.name, gguf_type_name(info.type)));
  }

  // The raw bytes of an entry: the tensor's, or one expert's slice of them.
  const uint8_t* raw_data(const GgufEntry& e) const {
    const uint8_t* raw = file_->tensor_data(*e.info);
    if (e.expert >= 0) raw += static_cast<size_t>(e.expert) * (e.info->nbytes / e.num_experts);
    return raw;
  }

  // Dequantizes n elements (whole blocks) of a supported type
  // (check_dequantizable) at src into out.
  void dequantize_parallel(GgufType type, const uint8_t* src, int64_t n, float* out) const {
    const GgufTypeTraits traits = *gguf_type_traits(type);
    const int64_t num_blocks = n / traits.block_size;
    parallel_for(num_blocks, kChunkBlocks, [&](int64_t lo, int64_t hi) {
      // Cannot fail: the type is supported and the count is whole blocks.
      (void)dequantize(type, src + lo * traits.type_size, (hi - lo) * traits.block_size,
                       out + lo * traits.block_size);
    });
  }

  std::shared_ptr<const GgufFile> file_;
  std::vector<GgufEntry> entries_;  // parallel to tensors()
};

}  // namespace

std::optional<std::string> gguf_to_hf_name(std::string_view gguf_name,
                                           std::string_view architecture) {
  std::string_view stem, suffix;
  if (!split_suffix(gguf_name, &stem, &suffix)) return std::nullopt;
  for (const auto& [g, hf] : kGlobalNames) {
    if (stem == g) return std::string(hf) + std::string(suffix);
  }
  constexpr std::string_view kBlk = "blk.";
  if (stem.substr(0, kBlk.size()) != kBlk) return std::nullopt;
  stem.remove_prefix(kBlk.size());
  const size_t dot = stem.find('.');
  if (dot == 0 || dot == std::string_view::npos) return std::nullopt;
  const std::string_view layer = stem.substr(0, dot);
  if (!std::all_of(layer.begin(), layer.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
    return std::nullopt;
  const std::string_view part = stem.substr(dot + 1);
  if (architecture == "phi3" && part == "ffn_up")  // gate and up fused, gate first
    return fmt::format("model.layers.{}.mlp.gate_up_proj{}", layer, suffix);
  if (architecture == "gemma2" || architecture == "gemma3") {
    for (const auto& [g, hf] : kGemmaLayerNames) {
      if (part == g) return fmt::format("model.layers.{}.{}{}", layer, hf, suffix);
    }
  }
  for (const auto& [g, hf] : kLayerNames) {
    if (part == g) return fmt::format("model.layers.{}.{}{}", layer, hf, suffix);
  }
  return std::nullopt;
}

Status unpermute_rope_row_bytes(const uint8_t* in, uint8_t* out, int64_t rows, size_t row_bytes,
                                int64_t num_heads) {
  if (num_heads <= 0 || rows % (2 * num_heads) != 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("cannot un-permute {} rows for {} heads", rows, num_heads));
  }
  if (row_bytes == 0) return Status::Ok();
  const int64_t head_dim = rows / num_heads;
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < num_heads; ++h) {
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < half; ++j) {
        const uint8_t* src = in + static_cast<size_t>(h * head_dim + 2 * j + i) * row_bytes;
        std::memcpy(out + static_cast<size_t>(h * head_dim + i * half + j) * row_bytes, src,
                    row_bytes);
      }
    }
  }
  return Status::Ok();
}

Status unpermute_rope_rows(const float* in, float* out, int64_t rows, int64_t cols,
                           int64_t num_heads) {
  return unpermute_rope_row_bytes(
      reinterpret_cast<const uint8_t*>(in), reinterpret_cast<uint8_t*>(out), rows,
      static_cast<size_t>(std::max<int64_t>(cols, 0)) * sizeof(float), num_heads);
}

Result<std::unique_ptr<WeightSource>> open_gguf_weights(std::shared_ptr<const GgufFile> file,
                                                        const ModelConfig& config) {
  auto source = std::make_unique<GgufSource>(file);
  for (const GgufTensorInfo& t : file->tensors()) PAGODA_RETURN_IF_ERROR(source->add(t, config));
  return std::unique_ptr<WeightSource>(std::move(source));
}

}  // namespace pagoda
