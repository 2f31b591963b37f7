// WeightSource over a GGUF file: HF names, PyTorch shapes, f32 on read().
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <map>

#include "core/log.h"
#include "core/thread_pool.h"
#include "io/gguf_model.h"

namespace pagoda {

namespace {

// GGUF per-layer tensor stem → HF module path under model.layers.N.
constexpr std::pair<const char*, const char*> kLayerNames[] = {
    {"attn_norm", "input_layernorm"},    {"attn_q", "self_attn.q_proj"},
    {"attn_k", "self_attn.k_proj"},      {"attn_v", "self_attn.v_proj"},
    {"attn_output", "self_attn.o_proj"}, {"attn_q_norm", "self_attn.q_norm"},
    {"attn_k_norm", "self_attn.k_norm"}, {"ffn_norm", "post_attention_layernorm"},
    {"ffn_gate", "mlp.gate_proj"},       {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},
};

// Gemma 2 / 3 (sandwich norms): llama.cpp's names for the four layer norms.
constexpr std::pair<const char*, const char*> kGemmaLayerNames[] = {
    {"post_attention_norm", "post_attention_layernorm"},
    {"ffn_norm", "pre_feedforward_layernorm"},
    {"post_ffw_norm", "post_feedforward_layernorm"},
};

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
};

class GgufSource final : public IndexedWeightSource {
 public:
  GgufSource(std::shared_ptr<const GgufFile> file) : file_(std::move(file)) {}

  Status add(const GgufTensorInfo& t, const ModelConfig& config) {
    std::string name = gguf_to_hf_name(t.name, config.architecture).value_or(t.name);
    TensorInfo info{name, DType::kF32, std::vector<int64_t>(t.dims.rbegin(), t.dims.rend()),
                    t.nbytes};
    GgufEntry entry{&t, 0};
    if (config.architecture == "llama" || config.architecture == "mistral") {
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
    const uint8_t* raw = file_->tensor_data(*e.info);
    if (e.info->type == GgufType::kF32 && e.permute_heads == 0 &&
        reinterpret_cast<uintptr_t>(raw) % 4 == 0) {
      t.data = raw;  // view into the map, no copy
      return t;
    }
    PAGODA_RETURN_IF_ERROR(check_dequantizable(*e.info));
    const int64_t n = e.info->numel();
    t.owned.resize(static_cast<size_t>(n) * sizeof(float));
    float* out = reinterpret_cast<float*>(t.owned.data());
    t.data = out;
    if (n == 0) return t;
    if (e.permute_heads == 0) {
      dequantize_parallel(*e.info, out);
      return t;
    }
    std::vector<float> permuted(static_cast<size_t>(n));
    dequantize_parallel(*e.info, permuted.data());
    const int64_t rows = t.shape[0];
    PAGODA_RETURN_IF_ERROR(
        unpermute_rope_rows(permuted.data(), out, rows, n / rows, e.permute_heads));
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

  // Dequantizes a tensor of a supported type (check_dequantizable) into out.
  void dequantize_parallel(const GgufTensorInfo& info, float* out) const {
    const GgufTypeTraits traits = *gguf_type_traits(info.type);
    const uint8_t* src = file_->tensor_data(info);
    const int64_t num_blocks = info.numel() / traits.block_size;
    parallel_for(num_blocks, kChunkBlocks, [&](int64_t lo, int64_t hi) {
      // Cannot fail: the type is supported and the count is whole blocks.
      (void)dequantize(info.type, src + lo * traits.type_size, (hi - lo) * traits.block_size,
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

Status unpermute_rope_rows(const float* in, float* out, int64_t rows, int64_t cols,
                           int64_t num_heads) {
  if (num_heads <= 0 || rows % (2 * num_heads) != 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("cannot un-permute {} rows for {} heads", rows, num_heads));
  }
  if (cols <= 0) return Status::Ok();
  const int64_t head_dim = rows / num_heads;
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < num_heads; ++h) {
    for (int64_t i = 0; i < 2; ++i) {
      for (int64_t j = 0; j < half; ++j) {
        const float* src = in + (h * head_dim + 2 * j + i) * cols;
        std::memcpy(out + (h * head_dim + i * half + j) * cols, src,
                    static_cast<size_t>(cols) * sizeof(float));
      }
    }
  }
  return Status::Ok();
}

Result<std::unique_ptr<WeightSource>> open_gguf_weights(std::shared_ptr<const GgufFile> file,
                                                        const ModelConfig& config) {
  auto source = std::make_unique<GgufSource>(file);
  for (const GgufTensorInfo& t : file->tensors()) PAGODA_RETURN_IF_ERROR(source->add(t, config));
  return std::unique_ptr<WeightSource>(std::move(source));
}

}  // namespace pagoda
