// GGUF metadata → ModelConfig. Keys follow llama.cpp's llama-arch.cpp
// ("{arch}.embedding_length", "tokenizer.ggml.eos_token_id", ...).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "io/gguf_model.h"

namespace pagoda {

namespace {

struct GgufFamily {
  const char* gguf_arch;
  const char* hf_architecture;
  const char* canonical;
};

// "llama" with expert_count > 0 is Mixtral (llama.cpp runs it as llama).
constexpr GgufFamily kGgufFamilies[] = {
    {"llama", "LlamaForCausalLM", "llama"},
    {"qwen2", "Qwen2ForCausalLM", "qwen2"},
    {"qwen3", "Qwen3ForCausalLM", "qwen3"},
    {"phi3", "Phi3ForCausalLM", "phi3"},
    {"qwen2moe", "Qwen2MoeForCausalLM", "qwen2_moe"},
    {"qwen3moe", "Qwen3MoeForCausalLM", "qwen3_moe"},
    {"gemma2", "Gemma2ForCausalLM", "gemma2"},
    {"gemma3", "Gemma3ForCausalLM", "gemma3"},
};

// llama_ftype values of unquantized files.
constexpr int64_t kFileTypeAllF32 = 0;
constexpr int64_t kFileTypeMostlyF16 = 1;
constexpr int64_t kFileTypeMostlyBF16 = 32;

// Reads "{arch}.<suffix>" keys of one file; errors name key and file.
class ArchKeys {
 public:
  ArchKeys(const GgufFile& f, std::string arch) : f_(f), arch_(std::move(arch)) {}

  std::string key(std::string_view suffix) const { return arch_ + "." + std::string(suffix); }

  Error missing(const std::string& k) const {
    return make_error(
        ErrorCode::kInvalidArgument,
        fmt::format("GGUF {}: missing or non-integer metadata key '{}'", f_.path(), k));
  }

  Status req_positive(std::string_view suffix, int64_t* out) const {
    const std::string k = key(suffix);
    auto v = f_.get_int(k);
    if (!v) return missing(k);
    if (*v <= 0) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("GGUF {}: '{}' is {}", f_.path(), k, *v));
    }
    *out = *v;
    return Status::Ok();
  }
  void opt_int(std::string_view suffix, int64_t* out) const {
    if (auto v = f_.get_int(key(suffix))) *out = *v;
  }
  void opt_float(std::string_view suffix, double* out) const {
    if (auto v = f_.get_float(key(suffix))) *out = *v;
  }

 private:
  const GgufFile& f_;
  std::string arch_;
};

// rope.dimension_count: the rotary dims of each head (llama.cpp's n_rot;
// its converter writes int(partial_rotary_factor * hidden) / heads for phi3,
// Phi-4-mini's 96 of 128). Below head_dim only phi3 runs it; absent:
// head_dim.
Status read_rotary_dim(const GgufFile& f, const ArchKeys& k, ModelConfig* c) {
  int64_t rope_dims = c->head_dim;
  k.opt_int("rope.dimension_count", &rope_dims);
  if (rope_dims == c->head_dim) return Status::Ok();
  if (c->architecture != "phi3") {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("GGUF {}: partial rotary embedding ({} {} != head dim {}) is "
                                  "not supported for {} (phi3 only)",
                                  f.path(), k.key("rope.dimension_count"), rope_dims, c->head_dim,
                                  c->architecture));
  }
  if (rope_dims <= 0 || rope_dims > c->head_dim || rope_dims % 2 != 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("GGUF {}: {} is {}; it must be even and in (0, head dim {}]",
                                  f.path(), k.key("rope.dimension_count"), rope_dims, c->head_dim));
  }
  c->rotary_dim = rope_dims;
  return Status::Ok();
}

Status read_shapes(const GgufFile& f, const ArchKeys& k, ModelConfig* c) {
  PAGODA_RETURN_IF_ERROR(k.req_positive("context_length", &c->max_position_embeddings));
  PAGODA_RETURN_IF_ERROR(k.req_positive("embedding_length", &c->hidden_size));
  PAGODA_RETURN_IF_ERROR(k.req_positive("block_count", &c->num_layers));
  PAGODA_RETURN_IF_ERROR(k.req_positive("feed_forward_length", &c->intermediate_size));
  PAGODA_RETURN_IF_ERROR(k.req_positive("attention.head_count", &c->num_heads));
  c->num_kv_heads = c->num_heads;
  if (f.has(k.key("attention.head_count_kv"))) {
    PAGODA_RETURN_IF_ERROR(k.req_positive("attention.head_count_kv", &c->num_kv_heads));
  }
  if (c->num_heads % c->num_kv_heads != 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("GGUF {}: head_count {} is not a multiple of head_count_kv {}",
                                  f.path(), c->num_heads, c->num_kv_heads));
  }
  if (f.has(k.key("attention.key_length"))) {
    PAGODA_RETURN_IF_ERROR(k.req_positive("attention.key_length", &c->head_dim));
  } else if (c->hidden_size % c->num_heads == 0) {
    c->head_dim = c->hidden_size / c->num_heads;
  } else {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("GGUF {}: embedding_length {} is not a multiple of head_count {}",
                                  f.path(), c->hidden_size, c->num_heads));
  }
  const std::string eps_key = k.key("attention.layer_norm_rms_epsilon");
  auto eps = f.get_float(eps_key);
  if (!eps)
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("GGUF {}: missing '{}'", f.path(), eps_key));
  c->rms_norm_eps = *eps;
  return read_rotary_dim(f, k, c);
}

// Mixture of experts: expert_count, expert_used_count, the experts' and the
// shared expert's feed_forward_length, and expert_weights_norm (default as
// llama.cpp runs each: renormalised for Mixtral and Qwen3-MoE, not for
// Qwen2-MoE). A layer without blk.N.ffn_gate_inp is dense (mlp_only_layers).
// A "llama" file with experts becomes mixtral.
Status read_moe(const GgufFile& f, const ArchKeys& k, ModelConfig* c) {
  k.opt_int("expert_count", &c->num_experts);
  if (c->num_experts <= 0) {
    c->num_experts = 0;
    if (c->architecture == "qwen2_moe" || c->architecture == "qwen3_moe")
      return k.missing(k.key("expert_count"));
    return Status::Ok();
  }
  if (c->architecture == "llama") {
    c->architecture = "mixtral";
    c->hf_architecture = "MixtralForCausalLM";
  } else if (c->architecture != "qwen2_moe" && c->architecture != "qwen3_moe") {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("GGUF {}: experts (expert_count {}) in a {} model are not "
                                  "supported",
                                  f.path(), c->num_experts, c->architecture));
  }
  PAGODA_RETURN_IF_ERROR(k.req_positive("expert_used_count", &c->num_experts_per_tok));
  c->moe_intermediate_size = c->intermediate_size;
  k.opt_int("expert_feed_forward_length", &c->moe_intermediate_size);
  if (c->architecture == "qwen2_moe")
    PAGODA_RETURN_IF_ERROR(
        k.req_positive("expert_shared_feed_forward_length", &c->shared_expert_intermediate_size));
  c->norm_topk_prob = c->architecture != "qwen2_moe";
  if (auto norm = f.get_bool(k.key("expert_weights_norm"))) c->norm_topk_prob = *norm;
  for (int64_t i = 0; i < c->num_layers; ++i) {
    if (f.find_tensor(fmt::format("blk.{}.ffn_gate_inp.weight", i)) == nullptr)
      c->mlp_only_layers.push_back(i);
  }
  return Status::Ok();
}

Status read_rope(const GgufFile& f, const ArchKeys& k, ModelConfig* c) {
  k.opt_float("rope.freq_base", &c->rope_theta);
  RopeScaling& s = c->rope_scaling;
  std::string type = f.get_string(k.key("rope.scaling.type")).value_or("");
  double linear_scale = 0.0;
  k.opt_float("rope.scale_linear", &linear_scale);  // older files
  if (type.empty() && linear_scale > 0.0 && linear_scale != 1.0) {
    s.type = RopeScalingType::kLinear;
    s.factor = linear_scale;
    return Status::Ok();
  }
  if (type.empty() || type == "none") return Status::Ok();
  if (type == "linear") {
    s.type = RopeScalingType::kLinear;
  } else if (type == "yarn") {
    s.type = RopeScalingType::kYarn;
  } else {
    return make_error(
        ErrorCode::kUnsupported,
        fmt::format("GGUF {}: rope.scaling.type '{}' is not supported (none, linear, yarn)",
                    f.path(), type));
  }
  k.opt_float("rope.scaling.factor", &s.factor);
  k.opt_int("rope.scaling.original_context_length", &s.original_max_position_embeddings);
  k.opt_float("rope.scaling.yarn_beta_fast", &s.beta_fast);
  k.opt_float("rope.scaling.yarn_beta_slow", &s.beta_slow);
  if (s.type == RopeScalingType::kYarn && s.original_max_position_embeddings == 0) {
    s.original_max_position_embeddings = c->max_position_embeddings;
  }
  return Status::Ok();
}

// One [rope_dim() / 2] f32 tensor's values into *out; nothing when absent.
Status read_f32_pairs(const GgufFile& f, const ModelConfig& c, const char* name,
                      std::vector<float>* out) {
  const GgufTensorInfo* t = f.find_tensor(name);
  if (t == nullptr) return Status::Ok();
  const uint8_t* data = f.tensor_data(*t);
  if (t->type != GgufType::kF32 || t->numel() != c.rope_dim() / 2 ||
      t->nbytes != static_cast<uint64_t>(t->numel()) * sizeof(float) || data == nullptr) {
    return make_error(
        ErrorCode::kInvalidArgument,
        fmt::format("GGUF {}: tensor {} must be f32 with rope.dimension_count / 2 = {} values "
                    "(found {} values of type {})",
                    f.path(), name, c.rope_dim() / 2, t->numel(), static_cast<uint32_t>(t->type)));
  }
  out->resize(static_cast<size_t>(t->numel()));
  std::memcpy(out->data(), data, t->nbytes);  // little-endian file
  return Status::Ok();
}

// Phi-3's longrope as llama.cpp's converter stores it: the factor sets in
// rope_factors_short.weight / rope_factors_long.weight (both or neither),
// the original context in rope.scaling.original_context_length (required
// with them), the attention factor in rope.scaling.attn_factor (else derived
// from context_length / original, rope.h). A sliding_window shorter than the
// context masks every layer (llama.cpp and transformers alike); 0 or a longer
// one, none.
Status read_phi3(const GgufFile& f, const ArchKeys& k, ModelConfig* c) {
  RopeScaling& s = c->rope_scaling;
  PAGODA_RETURN_IF_ERROR(read_f32_pairs(f, *c, "rope_factors_short.weight", &s.short_factor));
  PAGODA_RETURN_IF_ERROR(read_f32_pairs(f, *c, "rope_factors_long.weight", &s.long_factor));
  if (s.short_factor.empty() != s.long_factor.empty()) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("GGUF {}: rope_factors_short.weight and rope_factors_long.weight "
                                  "must both be present or both absent",
                                  f.path()));
  }
  if (!s.short_factor.empty()) {
    if (s.type != RopeScalingType::kDefault) {
      return make_error(
          ErrorCode::kUnsupported,
          fmt::format("GGUF {}: rope factor tensors with rope.scaling.type set", f.path()));
    }
    s.type = RopeScalingType::kLongrope;
    const std::string orig = k.key("rope.scaling.original_context_length");
    auto v = f.get_int(orig);
    if (!v || *v <= 0) return k.missing(orig);
    s.original_max_position_embeddings = *v;
    s.factor = static_cast<double>(c->max_position_embeddings) / static_cast<double>(*v);
    if (auto a = f.get_float(k.key("rope.scaling.attn_factor"))) s.attention_factor = *a;
  }
  if (c->sliding_window > 0 && c->sliding_window < c->max_position_embeddings) {
    c->sliding_layers.assign(static_cast<size_t>(c->num_layers), true);
  } else {
    c->sliding_window = 0;
  }
  return Status::Ok();
}

// rope_freqs.weight ([rope_dim() / 2] f32): the per-pair frequency divisors in
// which llama.cpp's converter stores Llama 3.x's llama3 rope scaling.
Status read_rope_freqs(const GgufFile& f, ModelConfig* c) {
  const GgufTensorInfo* t = f.find_tensor("rope_freqs.weight");
  if (t == nullptr) return Status::Ok();
  if (t->type != GgufType::kF32 || t->numel() != c->rope_dim() / 2 ||
      t->nbytes != static_cast<uint64_t>(t->numel()) * sizeof(float)) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("GGUF {}: tensor rope_freqs.weight must be f32 with "
                                  "rope.dimension_count / 2 = {} values (found {} values of type {})",
                                  f.path(), c->rope_dim() / 2, t->numel(),
                                  static_cast<uint32_t>(t->type)));
  }
  const uint8_t* data = f.tensor_data(*t);
  if (data == nullptr) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("GGUF {}: tensor rope_freqs.weight has no data", f.path()));
  }
  c->rope_freq_factors.resize(static_cast<size_t>(t->numel()));
  std::memcpy(c->rope_freq_factors.data(), data, t->nbytes);  // little-endian file
  return Status::Ok();
}

void read_tokens(const GgufFile& f, ModelConfig* c) {
  if (const auto* tokens = f.get_string_array("tokenizer.ggml.tokens")) {
    c->vocab_size = static_cast<int64_t>(tokens->size());
  } else if (const GgufTensorInfo* emb = f.find_tensor("token_embd.weight");
             emb != nullptr && emb->dims.size() == 2) {
    c->vocab_size = emb->dims[1];
  }
  auto valid_id = [](std::optional<int64_t> v) { return v && *v >= 0 && *v <= INT32_MAX; };
  if (auto bos = f.get_int("tokenizer.ggml.bos_token_id"); valid_id(bos))
    c->bos_token_id = static_cast<int32_t>(*bos);
  c->eos_token_ids = gguf_eos_token_ids(f);
}

// Gemma 2 / 3 as llama.cpp's llama-model.cpp runs them: the converter
// stored the norms as 1 + w (so no offset here); sliding layers every other
// layer from 0 (gemma2) or five of six (gemma3); the softmax scale
// head_dim^-0.5, except the 27B models (46 / 62 layers): (hidden / heads)^-0.5;
// gemma2's soft-capping keys (default 50 / 30); gemma3's local rope base
// rope.freq_base_swa (default 10000).
void read_gemma(const ArchKeys& k, ModelConfig* c) {
  const bool gemma2 = c->architecture == "gemma2";
  c->gelu_tanh_mlp = c->sandwich_norms = c->scale_embeddings = true;
  c->qk_norm = !gemma2;
  const bool is_27b = c->num_layers == (gemma2 ? 46 : 62);
  c->query_pre_attn_scalar =
      static_cast<double>(is_27b ? c->hidden_size / c->num_heads : c->head_dim);
  c->attn_logit_softcapping = gemma2 ? 50.0 : 0.0;
  c->final_logit_softcapping = gemma2 ? 30.0 : 0.0;
  k.opt_float("attn_logit_softcapping", &c->attn_logit_softcapping);
  k.opt_float("final_logit_softcapping", &c->final_logit_softcapping);
  if (!gemma2) {
    c->rope_local_base_freq = 10000.0;
    k.opt_float("rope.freq_base_swa", &c->rope_local_base_freq);
  }
  const int64_t pattern = gemma2 ? 2 : 6;
  c->sliding_layers.assign(static_cast<size_t>(c->num_layers), false);
  for (int64_t i = 0; i < c->num_layers; ++i)
    c->sliding_layers[static_cast<size_t>(i)] = c->sliding_window > 0 && (i + 1) % pattern != 0;
}

DType dtype_from_file_type(std::optional<int64_t> file_type) {
  if (file_type == kFileTypeAllF32) return DType::kF32;
  if (file_type == kFileTypeMostlyF16) return DType::kF16;
  if (file_type == kFileTypeMostlyBF16) return DType::kBF16;
  return DType::kBF16;
}

}  // namespace

std::vector<int32_t> gguf_eos_token_ids(const GgufFile& file) {
  std::vector<int32_t> ids;
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    auto id = file.get_int(key);
    if (!id || *id < 0 || *id > INT32_MAX) continue;
    const auto id32 = static_cast<int32_t>(*id);
    if (std::find(ids.begin(), ids.end(), id32) == ids.end()) ids.push_back(id32);
  }
  return ids;
}

Result<ModelConfig> gguf_model_config(const GgufFile& f) {
  auto arch = f.get_string("general.architecture");
  if (!arch) {
    return make_error(
        ErrorCode::kInvalidArgument,
        fmt::format("GGUF {}: missing metadata key 'general.architecture'", f.path()));
  }
  ModelConfig c;
  for (const GgufFamily& fam : kGgufFamilies) {
    if (*arch == fam.gguf_arch) {
      c.architecture = fam.canonical;
      c.hf_architecture = fam.hf_architecture;
    }
  }
  if (c.architecture.empty()) {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("GGUF {}: unsupported general.architecture '{}' (supported: "
                                  "llama, qwen2, qwen3, phi3, qwen2moe, qwen3moe, gemma2, "
                                  "gemma3)",
                                  f.path(), *arch));
  }
  const ArchKeys keys(f, *arch);
  PAGODA_RETURN_IF_ERROR(read_shapes(f, keys, &c));
  PAGODA_RETURN_IF_ERROR(read_moe(f, keys, &c));
  PAGODA_RETURN_IF_ERROR(read_rope(f, keys, &c));
  PAGODA_RETURN_IF_ERROR(read_rope_freqs(f, &c));
  keys.opt_int("attention.sliding_window", &c.sliding_window);
  read_tokens(f, &c);
  if (c.vocab_size <= 0) {
    return make_error(
        ErrorCode::kInvalidArgument,
        fmt::format(
            "GGUF {}: no vocabulary size (no tokenizer.ggml.tokens and no token_embd.weight)",
            f.path()));
  }
  c.tie_word_embeddings = f.find_tensor("output.weight") == nullptr;
  c.attention_bias = c.architecture == "qwen2" || c.architecture == "qwen2_moe" ||
                     f.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.qk_norm = c.architecture == "qwen3" || c.architecture == "qwen3_moe";
  if (c.architecture == "gemma2" || c.architecture == "gemma3") read_gemma(keys, &c);
  if (c.architecture == "phi3") PAGODA_RETURN_IF_ERROR(read_phi3(f, keys, &c));
  c.dtype = dtype_from_file_type(f.get_int("general.file_type"));
  return c;
}

}  // namespace pagoda
