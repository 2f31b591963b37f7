// config.json / generation_config.json parsing. Field semantics follow
// transformers' LlamaConfig, MistralConfig, Qwen2Config, Qwen3Config,
// Phi3Config, Gemma2Config, Gemma3TextConfig, MixtralConfig, Qwen2MoeConfig and
// Qwen3MoeConfig (including their defaults for absent fields).
#include "io/hf_config.h"

#include <fmt/format.h>

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/mapped_file.h"

namespace pagoda {

namespace {

using Json = nlohmann::json;

struct Family {
  const char* hf_architecture;
  const char* model_type;
  const char* canonical;
};

constexpr Family kFamilies[] = {
    {"LlamaForCausalLM", "llama", "llama"},
    // An EAGLE-3 draft head's config.json (a one-layer Llama; its tensors are
    // the head's own layout, engine/eagle_head.h): read as a Llama config.
    {"LlamaForCausalLMEagle3", "llama", "llama"},
    {"MistralForCausalLM", "mistral", "mistral"},
    {"Qwen2ForCausalLM", "qwen2", "qwen2"},
    {"Qwen3ForCausalLM", "qwen3", "qwen3"},
    {"Phi3ForCausalLM", "phi3", "phi3"},
    {"Gemma2ForCausalLM", "gemma2", "gemma2"},
    {"Gemma3ForCausalLM", "gemma3_text", "gemma3"},
    // The language model of Gemma 3's image-text checkpoints (text_config);
    // the vision tower is not loaded.
    {"Gemma3ForConditionalGeneration", "gemma3", "gemma3"},
    {"MixtralForCausalLM", "mixtral", "mixtral"},
    {"Qwen2MoeForCausalLM", "qwen2_moe", "qwen2_moe"},
    {"Qwen3MoeForCausalLM", "qwen3_moe", "qwen3_moe"},
};

bool is_gemma(const ModelConfig& c) {
  return c.architecture == "gemma2" || c.architecture == "gemma3";
}

std::string supported_list() {
  std::string s;
  for (const Family& f : kFamilies) s += (s.empty() ? "" : ", ") + std::string(f.hf_architecture);
  return s;
}

// Typed access to the fields of one JSON object; errors name field and file.
class Fields {
 public:
  Fields(const Json& j, const std::string& path) : j_(j), path_(path) {}

  bool present(std::string_view key) const { return j_.contains(std::string(key)); }

  const Json* find(std::string_view key) const {
    auto it = j_.find(std::string(key));
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }

  Error bad(std::string_view key, std::string_view expected) const {
    auto it = j_.find(std::string(key));
    const std::string got = it == j_.end() ? "nothing" : it->dump();
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: field '{}' must be {} (got {})", path_, key, expected, got));
  }

  Error missing(std::string_view key) const {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: missing required field '{}'", path_, key));
  }

  // Leaves *out unchanged when the field is absent or null.
  Status opt_int(std::string_view key, int64_t* out) const {
    const Json* v = find(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_number_integer()) return bad(key, "an integer");
    *out = v->get<int64_t>();
    return Status::Ok();
  }
  Status opt_int(std::string_view key, std::optional<int64_t>* out) const {
    int64_t x = 0;
    if (find(key) == nullptr) return Status::Ok();
    PAGODA_RETURN_IF_ERROR(opt_int(key, &x));
    *out = x;
    return Status::Ok();
  }
  Status req_positive_int(std::string_view key, int64_t* out) const {
    if (find(key) == nullptr) return missing(key);
    PAGODA_RETURN_IF_ERROR(opt_int(key, out));
    if (*out <= 0) return bad(key, "a positive integer");
    return Status::Ok();
  }
  Status opt_double(std::string_view key, double* out) const {
    const Json* v = find(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_number()) return bad(key, "a number");
    *out = v->get<double>();
    return Status::Ok();
  }
  Status opt_double(std::string_view key, std::optional<double>* out) const {
    double x = 0;
    if (find(key) == nullptr) return Status::Ok();
    PAGODA_RETURN_IF_ERROR(opt_double(key, &x));
    *out = x;
    return Status::Ok();
  }
  Status req_double(std::string_view key, double* out) const {
    if (find(key) == nullptr) return missing(key);
    return opt_double(key, out);
  }
  Status opt_bool(std::string_view key, bool* out) const {
    const Json* v = find(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_boolean()) return bad(key, "a boolean");
    *out = v->get<bool>();
    return Status::Ok();
  }
  Status opt_string(std::string_view key, std::string* out) const {
    const Json* v = find(key);
    if (v == nullptr) return Status::Ok();
    if (!v->is_string()) return bad(key, "a string");
    *out = v->get<std::string>();
    return Status::Ok();
  }
  // A required non-empty list of numbers.
  Status req_float_list(std::string_view key, std::vector<float>* out) const {
    const Json* v = find(key);
    if (v == nullptr) return missing(key);
    if (!v->is_array() || v->empty()) return bad(key, "a non-empty list of numbers");
    out->clear();
    for (const Json& x : *v) {
      if (!x.is_number()) return bad(key, "a non-empty list of numbers");
      out->push_back(static_cast<float>(x.get<double>()));
    }
    return Status::Ok();
  }
  // An int, a list of ints, or null/absent (leaves *out empty).
  Status token_ids(std::string_view key, std::vector<int32_t>* out) const {
    const Json* v = find(key);
    if (v == nullptr) return Status::Ok();
    auto valid = [](const Json& x) {
      return x.is_number_integer() && x.get<int64_t>() >= 0 && x.get<int64_t>() <= INT32_MAX;
    };
    if (valid(*v)) {
      out->push_back(v->get<int32_t>());
      return Status::Ok();
    }
    if (!v->is_array()) return bad(key, "a token id or a list of token ids");
    for (const Json& x : *v) {
      if (!valid(x)) return bad(key, "a token id or a list of token ids");
      out->push_back(x.get<int32_t>());
    }
    return Status::Ok();
  }

  const std::string& path() const { return path_; }

 private:
  const Json& j_;
  const std::string& path_;
};

Status parse_architecture(const Fields& f, ModelConfig* c) {
  std::string model_type;
  PAGODA_RETURN_IF_ERROR(f.opt_string("model_type", &model_type));
  const Json* archs = f.find("architectures");
  if (archs != nullptr) {
    if (!archs->is_array() || archs->empty() || !(*archs)[0].is_string()) {
      return f.bad("architectures", "a non-empty list of strings");
    }
    c->hf_architecture = (*archs)[0].get<std::string>();
  }
  for (const Family& fam : kFamilies) {
    if (archs != nullptr ? c->hf_architecture == fam.hf_architecture
                         : model_type == fam.model_type) {
      c->architecture = fam.canonical;
      if (c->hf_architecture.empty()) c->hf_architecture = fam.hf_architecture;
      return Status::Ok();
    }
  }
  const std::string got = archs != nullptr ? c->hf_architecture : "model_type '" + model_type + "'";
  return make_error(ErrorCode::kUnsupported,
                    fmt::format("{}: unsupported architecture {} (supported: {})", f.path(),
                                got.empty() ? "(none)" : got, supported_list()));
}

Result<RopeScalingType> rope_type_from(const Fields& f, std::string_view field,
                                       const std::string& name) {
  if (name == "default" || name.empty()) return RopeScalingType::kDefault;
  if (name == "linear") return RopeScalingType::kLinear;
  if (name == "llama3") return RopeScalingType::kLlama3;
  if (name == "yarn") return RopeScalingType::kYarn;
  if (name == "longrope" || name == "su") return RopeScalingType::kLongrope;  // su: its old name
  return make_error(ErrorCode::kUnsupported,
                    fmt::format("{}: {} type '{}' is not supported (supported: default, linear, "
                                "llama3, yarn, longrope / su)",
                                f.path(), field, name));
}

// partial_rotary_factor (transformers 4: top level; 5: in rope_parameters;
// both present must agree): the rotary embedding turns the first
// rotary_dim = int(head_dim * factor) dims of each head (transformers'
// truncation), the rest pass through. Only phi3 runs it (Phi-4-mini's 0.75);
// another family's factor other than 1 is refused, naming the field.
Status parse_partial_rotary(const Fields& f, ModelConfig* c) {
  if (f.find("partial_rotary_factor") == nullptr) return Status::Ok();
  double factor = 1.0;
  PAGODA_RETURN_IF_ERROR(f.opt_double("partial_rotary_factor", &factor));
  if (!(factor > 0.0 && factor <= 1.0)) return f.bad("partial_rotary_factor", "in (0, 1]");
  const auto dim = static_cast<int64_t>(static_cast<double>(c->head_dim) * factor);
  if (dim != c->head_dim && c->architecture != "phi3") {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{}: partial_rotary_factor {} is not supported for {} (rotary "
                                  "embedding over part of head_dim: phi3 only)",
                                  f.path(), factor, c->architecture));
  }
  if (dim <= 0 || dim % 2 != 0) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: partial_rotary_factor {} turns {} of head_dim {} dims; the "
                                  "rotary dims must be a positive even number",
                                  f.path(), factor, dim, c->head_dim));
  }
  if (c->rotary_dim != 0 && c->rotary_dim != dim) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: partial_rotary_factor {} turns {} dims, but the top-level "
                                  "partial_rotary_factor turns {}",
                                  f.path(), factor, dim, c->rotary_dim));
  }
  c->rotary_dim = dim;
  return Status::Ok();
}

// A rope_scaling / rope_parameters object. `field` names it in errors.
Status parse_rope_dict(const Json& r, const std::string& field, const std::string& path,
                       ModelConfig* c) {
  if (!r.is_object()) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{}: field '{}' must be an object", path, field));
  }
  const std::string ctx = path + " (" + field + ")";
  Fields f(r, ctx);
  std::string type;
  PAGODA_RETURN_IF_ERROR(
      f.opt_string(f.find("rope_type") != nullptr ? "rope_type" : "type", &type));
  PAGODA_ASSIGN_OR_RETURN(c->rope_scaling.type, rope_type_from(f, field, type));
  PAGODA_RETURN_IF_ERROR(f.opt_double("rope_theta", &c->rope_theta));
  PAGODA_RETURN_IF_ERROR(parse_partial_rotary(f, c));
  RopeScaling& s = c->rope_scaling;
  switch (s.type) {
    case RopeScalingType::kDefault:
      return Status::Ok();
    case RopeScalingType::kLinear:
      return f.req_double("factor", &s.factor);
    case RopeScalingType::kLlama3:
      PAGODA_RETURN_IF_ERROR(f.req_double("factor", &s.factor));
      PAGODA_RETURN_IF_ERROR(f.req_double("low_freq_factor", &s.low_freq_factor));
      PAGODA_RETURN_IF_ERROR(f.req_double("high_freq_factor", &s.high_freq_factor));
      if (f.find("original_max_position_embeddings") == nullptr)
        return f.missing("original_max_position_embeddings");
      return f.opt_int("original_max_position_embeddings", &s.original_max_position_embeddings);
    case RopeScalingType::kYarn:
      PAGODA_RETURN_IF_ERROR(f.req_double("factor", &s.factor));
      PAGODA_RETURN_IF_ERROR(
          f.opt_int("original_max_position_embeddings", &s.original_max_position_embeddings));
      PAGODA_RETURN_IF_ERROR(f.opt_double("beta_fast", &s.beta_fast));
      PAGODA_RETURN_IF_ERROR(f.opt_double("beta_slow", &s.beta_slow));
      PAGODA_RETURN_IF_ERROR(f.opt_double("attention_factor", &s.attention_factor));
      PAGODA_RETURN_IF_ERROR(f.opt_double("mscale", &s.mscale));
      return f.opt_double("mscale_all_dim", &s.mscale_all_dim);
    case RopeScalingType::kLongrope:
      // longrope_lengths checks the lengths against rope_dim() / 2.
      PAGODA_RETURN_IF_ERROR(f.req_float_list("short_factor", &s.short_factor));
      PAGODA_RETURN_IF_ERROR(f.req_float_list("long_factor", &s.long_factor));
      PAGODA_RETURN_IF_ERROR(f.opt_double("factor", &s.factor));
      PAGODA_RETURN_IF_ERROR(f.opt_double("attention_factor", &s.attention_factor));
      return f.opt_int("original_max_position_embeddings", &s.original_max_position_embeddings);
  }
  return Status::Ok();
}

// longrope's original context and scale, as transformers'
// _compute_longrope_parameters reads them: with an
// original_max_position_embeddings (Phi3Config's top-level field, or inside
// rope_scaling), the scale is max_position_embeddings / that; without one,
// the original context is max_position_embeddings and the scale
// rope_scaling.factor (default 1). Each factor list must have rope_dim() / 2
// values (head_dim / 2, or rotary_dim / 2 with a partial_rotary_factor).
Status longrope_lengths(const Fields& f, ModelConfig* c) {
  RopeScaling& s = c->rope_scaling;
  for (const auto& [key, list] : {std::pair{"short_factor", &s.short_factor},
                                  std::pair{"long_factor", &s.long_factor}}) {
    if (static_cast<int64_t>(list->size()) != c->rope_dim() / 2) {
      const std::string dims = c->rope_dim() == c->head_dim
                                   ? "head_dim"
                                   : fmt::format("rotary_dim (head_dim {} * partial_rotary_factor)",
                                                 c->head_dim);
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{}: rope_scaling.{} has {} values, expected {} / 2 = {}",
                                    f.path(), key, list->size(), dims, c->rope_dim() / 2));
    }
  }
  PAGODA_RETURN_IF_ERROR(
      f.opt_int("original_max_position_embeddings", &s.original_max_position_embeddings));
  if (s.original_max_position_embeddings < 0)
    return f.bad("original_max_position_embeddings", "a positive integer");
  if (s.original_max_position_embeddings == 0) {
    s.original_max_position_embeddings = c->max_position_embeddings;
  } else {
    s.factor = static_cast<double>(c->max_position_embeddings) /
               static_cast<double>(s.original_max_position_embeddings);
  }
  return Status::Ok();
}

// Gemma 3's rope: rope_theta / rope_scaling for the full-attention layers
// and rope_local_base_freq (default 10000) for the sliding ones
// (transformers 4), or rope_parameters {"full_attention": {...},
// "sliding_attention": {...}} (transformers 5), whose sliding entry must be
// unscaled.
Status parse_gemma3_rope(const Fields& f, ModelConfig* c) {
  c->rope_theta = 1000000.0;  // Gemma3TextConfig's defaults
  c->rope_local_base_freq = 10000.0;
  PAGODA_RETURN_IF_ERROR(f.opt_double("rope_local_base_freq", &c->rope_local_base_freq));
  const Json* p = f.find("rope_parameters");
  if (p == nullptr || !p->is_object() || !p->contains("full_attention")) return Status::Ok();
  PAGODA_RETURN_IF_ERROR(
      parse_rope_dict((*p)["full_attention"], "rope_parameters.full_attention", f.path(), c));
  if (p->contains("sliding_attention")) {
    ModelConfig local;
    local.architecture = c->architecture;
    local.head_dim = c->head_dim;
    PAGODA_RETURN_IF_ERROR(parse_rope_dict((*p)["sliding_attention"],
                                           "rope_parameters.sliding_attention", f.path(), &local));
    if (local.rope_scaling.type != RopeScalingType::kDefault)
      return f.bad("rope_parameters", "an unscaled (default) sliding_attention rope");
    c->rope_local_base_freq = local.rope_theta;
  }
  return Status::Ok();
}

// rope_theta + rope_scaling (transformers 4) or rope_parameters (transformers 5).
Status parse_rope(const Fields& f, ModelConfig* c) {
  if (c->architecture == "gemma3") PAGODA_RETURN_IF_ERROR(parse_gemma3_rope(f, c));
  PAGODA_RETURN_IF_ERROR(f.opt_double("rope_theta", &c->rope_theta));
  PAGODA_RETURN_IF_ERROR(parse_partial_rotary(f, c));
  if (const Json* p = f.find("rope_parameters")) {
    if (!(c->architecture == "gemma3" && p->is_object() && p->contains("full_attention")))
      PAGODA_RETURN_IF_ERROR(parse_rope_dict(*p, "rope_parameters", f.path(), c));
  } else if (const Json* s = f.find("rope_scaling")) {
    PAGODA_RETURN_IF_ERROR(parse_rope_dict(*s, "rope_scaling", f.path(), c));
  }
  if (c->rope_scaling.type == RopeScalingType::kYarn &&
      c->rope_scaling.original_max_position_embeddings == 0) {
    c->rope_scaling.original_max_position_embeddings = c->max_position_embeddings;
  }
  if (c->rope_scaling.type == RopeScalingType::kLongrope)
    PAGODA_RETURN_IF_ERROR(longrope_lengths(f, c));
  if (c->rope_theta <= 0) return f.bad("rope_theta", "positive");
  if (c->architecture == "gemma3" && c->rope_local_base_freq <= 0)
    return f.bad("rope_local_base_freq", "positive");
  return Status::Ok();
}

Status parse_dtype(const Fields& f, ModelConfig* c) {
  const char* key = f.find("dtype") != nullptr ? "dtype" : "torch_dtype";
  std::string name;
  PAGODA_RETURN_IF_ERROR(f.opt_string(key, &name));
  if (name.empty()) return Status::Ok();
  if (name == "float32" || name == "float") {
    c->dtype = DType::kF32;
  } else if (name == "float16" || name == "half") {
    c->dtype = DType::kF16;
  } else if (name == "bfloat16") {
    c->dtype = DType::kBF16;
  } else {
    return f.bad(key, "float32, float16 or bfloat16");
  }
  return Status::Ok();
}

Status parse_shapes(const Fields& f, ModelConfig* c) {
  PAGODA_RETURN_IF_ERROR(f.req_positive_int("vocab_size", &c->vocab_size));
  PAGODA_RETURN_IF_ERROR(f.req_positive_int("hidden_size", &c->hidden_size));
  PAGODA_RETURN_IF_ERROR(f.req_positive_int("intermediate_size", &c->intermediate_size));
  PAGODA_RETURN_IF_ERROR(f.req_positive_int("num_hidden_layers", &c->num_layers));
  PAGODA_RETURN_IF_ERROR(f.req_positive_int("num_attention_heads", &c->num_heads));
  PAGODA_RETURN_IF_ERROR(
      f.req_positive_int("max_position_embeddings", &c->max_position_embeddings));
  c->num_kv_heads = c->num_heads;
  PAGODA_RETURN_IF_ERROR(f.opt_int("num_key_value_heads", &c->num_kv_heads));
  if (c->num_kv_heads <= 0 || c->num_heads % c->num_kv_heads != 0) {
    return f.bad("num_key_value_heads",
                 fmt::format("a positive divisor of num_attention_heads ({})", c->num_heads));
  }
  if (f.find("head_dim") != nullptr) {
    PAGODA_RETURN_IF_ERROR(f.req_positive_int("head_dim", &c->head_dim));
  } else if (is_gemma(*c)) {
    c->head_dim = 256;  // Gemma2Config / Gemma3TextConfig default, independent of hidden
  } else if (c->hidden_size % c->num_heads != 0) {
    return f.bad("hidden_size",
                 fmt::format("a multiple of num_attention_heads ({}) when head_dim is absent",
                             c->num_heads));
  } else {
    c->head_dim = c->hidden_size / c->num_heads;
  }
  PAGODA_RETURN_IF_ERROR(f.opt_double("rms_norm_eps", &c->rms_norm_eps));
  return Status::Ok();
}

// Which layers slide: layer_types when present, else Gemma 2's alternation
// (even layers slide) or Gemma 3's sliding_window_pattern (default 6: layer
// i slides unless (i + 1) % pattern == 0).
Status parse_gemma_layer_types(const Fields& f, ModelConfig* c) {
  c->sliding_layers.assign(static_cast<size_t>(c->num_layers), false);
  if (c->sliding_window <= 0) return Status::Ok();  // null window: every layer attends fully
  if (const Json* types = f.find("layer_types")) {
    if (!types->is_array() || static_cast<int64_t>(types->size()) != c->num_layers)
      return f.bad("layer_types", fmt::format("a list of {} layer types", c->num_layers));
    for (size_t i = 0; i < types->size(); ++i) {
      const Json& t = (*types)[i];
      if (!t.is_string() || (t != "sliding_attention" && t != "full_attention"))
        return f.bad("layer_types", "a list of \"sliding_attention\" / \"full_attention\"");
      c->sliding_layers[i] = t == "sliding_attention";
    }
    return Status::Ok();
  }
  int64_t pattern = c->architecture == "gemma2" ? 2 : 6;
  if (c->architecture == "gemma3") {
    PAGODA_RETURN_IF_ERROR(f.opt_int("sliding_window_pattern", &pattern));
    if (pattern <= 0) return f.bad("sliding_window_pattern", "a positive integer");
  }
  for (int64_t i = 0; i < c->num_layers; ++i)
    c->sliding_layers[static_cast<size_t>(i)] = (i + 1) % pattern != 0;
  return Status::Ok();
}

// Gemma 2 / 3: GeGLU, (1 + w) norms, sandwich norms, scaled embeddings,
// query_pre_attn_scalar, soft-capping and sliding layers, with the config
// classes' defaults for absent fields (hidden_act is ignored, as in HF).
Status parse_gemma(const Fields& f, ModelConfig* c) {
  std::string act = "gelu_pytorch_tanh";
  PAGODA_RETURN_IF_ERROR(f.opt_string("hidden_activation", &act));
  if (act != "gelu_pytorch_tanh") {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{}: hidden_activation '{}' is not supported (expected "
                                  "gelu_pytorch_tanh)",
                                  f.path(), act));
  }
  bool mlp_bias = false;
  PAGODA_RETURN_IF_ERROR(f.opt_bool("mlp_bias", &mlp_bias));
  if (mlp_bias)
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{}: mlp_bias=true is not supported", f.path()));
  bool bidirectional = false;  // EmbeddingGemma: not a causal LM
  PAGODA_RETURN_IF_ERROR(f.opt_bool("use_bidirectional_attention", &bidirectional));
  if (bidirectional)
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{}: use_bidirectional_attention=true is not supported (pagoda "
                                  "runs causal language models)",
                                  f.path()));
  c->gelu_tanh_mlp = c->norm_weight_offset = c->sandwich_norms = c->scale_embeddings = true;
  c->tie_word_embeddings = true;
  PAGODA_RETURN_IF_ERROR(f.opt_bool("tie_word_embeddings", &c->tie_word_embeddings));
  PAGODA_RETURN_IF_ERROR(f.opt_bool("attention_bias", &c->attention_bias));
  c->qk_norm = c->architecture == "gemma3";
  const bool gemma2 = c->architecture == "gemma2";
  c->query_pre_attn_scalar = 256;
  c->attn_logit_softcapping = gemma2 ? 50.0 : 0.0;
  c->final_logit_softcapping = gemma2 ? 30.0 : 0.0;
  c->sliding_window = 4096;
  PAGODA_RETURN_IF_ERROR(f.opt_double("query_pre_attn_scalar", &c->query_pre_attn_scalar));
  if (c->query_pre_attn_scalar <= 0) return f.bad("query_pre_attn_scalar", "positive");
  // An explicit null turns a capping (or the window) off.
  for (auto [key, out] : {std::pair{"attn_logit_softcapping", &c->attn_logit_softcapping},
                          std::pair{"final_logit_softcapping", &c->final_logit_softcapping}}) {
    if (f.present(key) && f.find(key) == nullptr) *out = 0;
    PAGODA_RETURN_IF_ERROR(f.opt_double(key, out));
    if (*out < 0) return f.bad(key, "positive or null");
  }
  if (f.present("sliding_window") && f.find("sliding_window") == nullptr) c->sliding_window = 0;
  PAGODA_RETURN_IF_ERROR(f.opt_int("sliding_window", &c->sliding_window));
  if (c->sliding_window < 0) return f.bad("sliding_window", "a positive integer or null");
  return parse_gemma_layer_types(f, c);
}

// Phi3Config: no q/k/v biases (Phi3Attention has none, whatever
// attention_bias says; partial_rotary_factor is parse_rope's), and
// sliding_window (Phi-3-mini-4k's 2047) masking every layer as
// transformers' Phi3Model does when it is shorter than the context (a
// longer one masks nothing within max_model_len).
Status parse_phi3(const Fields& f, ModelConfig* c) {
  c->attention_bias = false;
  int64_t window = 0;
  PAGODA_RETURN_IF_ERROR(f.opt_int("sliding_window", &window));
  if (window < 0) return f.bad("sliding_window", "a positive integer or null");
  if (window > 0 && window < c->max_position_embeddings) {
    c->sliding_window = window;
    c->sliding_layers.assign(static_cast<size_t>(c->num_layers), true);
  }
  return Status::Ok();
}

// Bias, norm and attention-window flags that depend on the family.
Status parse_family_flags(const Fields& f, ModelConfig* c) {
  if (is_gemma(*c)) return parse_gemma(f, c);
  bool mlp_bias = false;
  std::string act = "silu";
  PAGODA_RETURN_IF_ERROR(f.opt_bool("mlp_bias", &mlp_bias));
  PAGODA_RETURN_IF_ERROR(f.opt_string("hidden_act", &act));
  if (mlp_bias)
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("{}: mlp_bias=true is not supported", f.path()));
  if (act != "silu") {
    return make_error(
        ErrorCode::kUnsupported,
        fmt::format("{}: hidden_act '{}' is not supported (expected silu)", f.path(), act));
  }
  PAGODA_RETURN_IF_ERROR(f.opt_bool("tie_word_embeddings", &c->tie_word_embeddings));
  if (c->architecture == "qwen2" || c->architecture == "qwen2_moe") {
    c->attention_bias = true;
  } else if (c->architecture != "mistral" && c->architecture != "mixtral") {
    PAGODA_RETURN_IF_ERROR(f.opt_bool("attention_bias", &c->attention_bias));
  }
  c->qk_norm = c->architecture == "qwen3" || c->architecture == "qwen3_moe";
  if (c->architecture == "phi3") return parse_phi3(f, c);
  if (c->architecture == "mistral" || c->architecture == "mixtral")
    return f.opt_int("sliding_window", &c->sliding_window);
  if (c->architecture == "qwen2" || c->architecture == "qwen3" || c->architecture == "qwen2_moe" ||
      c->architecture == "qwen3_moe") {
    bool use_sliding_window = false;
    PAGODA_RETURN_IF_ERROR(f.opt_bool("use_sliding_window", &use_sliding_window));
    if (use_sliding_window) return f.opt_int("sliding_window", &c->sliding_window);
  }
  return Status::Ok();
}

// Gemma3TextConfig's defaults under the given fields (image-text
// checkpoints' text_config lists only the fields that differ from them).
Json with_gemma3_text_defaults(const Json& given) {
  Json j = Json::parse(R"({
    "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
    "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
    "head_dim": 256, "max_position_embeddings": 131072, "rms_norm_eps": 1e-06})");
  for (const auto& [key, value] : given.items()) j[key] = value;
  return j;
}

// The mixture-of-experts fields: Mixtral's num_local_experts (each expert of
// intermediate_size, top-k weights always renormalised); Qwen2-MoE's and
// Qwen3-MoE's num_experts, moe_intermediate_size, norm_topk_prob,
// decoder_sparse_step, mlp_only_layers (and Qwen2-MoE's shared expert).
Status parse_moe(const Fields& f, ModelConfig* c) {
  const bool mixtral = c->architecture == "mixtral";
  if (!mixtral && c->architecture != "qwen2_moe" && c->architecture != "qwen3_moe")
    return Status::Ok();
  // transformers 5 writes Qwen3-MoE's num_experts as num_local_experts (its
  // attribute map reads either); published checkpoints have num_experts.
  const char* experts_key =
      mixtral || (c->architecture == "qwen3_moe" && f.find("num_experts") == nullptr &&
                  f.find("num_local_experts") != nullptr)
          ? "num_local_experts"
          : "num_experts";
  PAGODA_RETURN_IF_ERROR(f.req_positive_int(experts_key, &c->num_experts));
  PAGODA_RETURN_IF_ERROR(f.req_positive_int("num_experts_per_tok", &c->num_experts_per_tok));
  if (c->num_experts_per_tok > c->num_experts) {
    return f.bad("num_experts_per_tok",
                 fmt::format("at most the number of experts ({})", c->num_experts));
  }
  if (mixtral) {
    c->moe_intermediate_size = c->intermediate_size;
    c->norm_topk_prob = true;
    return Status::Ok();
  }
  PAGODA_RETURN_IF_ERROR(f.req_positive_int("moe_intermediate_size", &c->moe_intermediate_size));
  PAGODA_RETURN_IF_ERROR(f.opt_bool("norm_topk_prob", &c->norm_topk_prob));
  if (f.find("decoder_sparse_step") != nullptr)
    PAGODA_RETURN_IF_ERROR(f.req_positive_int("decoder_sparse_step", &c->decoder_sparse_step));
  if (const Json* v = f.find("mlp_only_layers")) {
    if (!v->is_array()) return f.bad("mlp_only_layers", "a list of layer indices");
    for (const Json& x : *v) {
      if (!x.is_number_integer() || x.get<int64_t>() < 0 || x.get<int64_t>() >= c->num_layers)
        return f.bad("mlp_only_layers", "a list of layer indices");
      c->mlp_only_layers.push_back(x.get<int64_t>());
    }
  }
  if (c->architecture == "qwen2_moe") {
    return f.req_positive_int("shared_expert_intermediate_size",
                              &c->shared_expert_intermediate_size);
  }
  return Status::Ok();
}

Result<Json> parse_json_object(std::string_view text, const std::string& path) {
  Json j = Json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded())
    return make_error(ErrorCode::kCorrupt, fmt::format("{}: not valid JSON", path));
  if (!j.is_object())
    return make_error(ErrorCode::kCorrupt, fmt::format("{}: not a JSON object", path));
  return j;
}

}  // namespace

Result<ModelConfig> parse_hf_config(std::string_view json_text, const std::string& path) {
  PAGODA_ASSIGN_OR_RETURN(Json j, parse_json_object(json_text, path));
  const Fields f(j, path);
  ModelConfig c;
  PAGODA_RETURN_IF_ERROR(parse_architecture(f, &c));
  // The language model's fields: text_config of an image-text checkpoint.
  Json text = j;
  std::string text_path = path;
  if (c.hf_architecture == "Gemma3ForConditionalGeneration") {
    const Json* tc = f.find("text_config");
    if (tc == nullptr || !tc->is_object())
      return f.bad("text_config", "an object (the language model's config)");
    text = *tc;
    text_path = path + " (text_config)";
  }
  if (c.architecture == "gemma3") text = with_gemma3_text_defaults(text);
  const Fields tf(text, text_path);
  PAGODA_RETURN_IF_ERROR(parse_shapes(tf, &c));
  PAGODA_RETURN_IF_ERROR(parse_rope(tf, &c));
  PAGODA_RETURN_IF_ERROR(parse_dtype(f, &c));
  if (const Json* q = f.find("quantization_config")) {
    PAGODA_ASSIGN_OR_RETURN(c.quantization,
                            parse_quantization_config(q->dump(), path + ": quantization_config"));
  }
  PAGODA_RETURN_IF_ERROR(parse_family_flags(tf, &c));
  PAGODA_RETURN_IF_ERROR(parse_moe(tf, &c));
  std::vector<int32_t> bos;  // an id, or (rarely) a list whose first entry is used
  PAGODA_RETURN_IF_ERROR(f.token_ids("bos_token_id", &bos));
  if (bos.empty()) PAGODA_RETURN_IF_ERROR(tf.token_ids("bos_token_id", &bos));
  if (!bos.empty()) c.bos_token_id = bos.front();
  PAGODA_RETURN_IF_ERROR(f.token_ids("eos_token_id", &c.eos_token_ids));
  if (c.eos_token_ids.empty())
    PAGODA_RETURN_IF_ERROR(tf.token_ids("eos_token_id", &c.eos_token_ids));
  return c;
}

Result<ModelConfig> load_hf_config(const std::string& path) {
  PAGODA_ASSIGN_OR_RETURN(std::string text, read_file_text(path));
  return parse_hf_config(text, path);
}

Result<GenerationDefaults> parse_generation_config(std::string_view json_text,
                                                   const std::string& path) {
  PAGODA_ASSIGN_OR_RETURN(Json j, parse_json_object(json_text, path));
  const Fields f(j, path);
  GenerationDefaults g;
  PAGODA_RETURN_IF_ERROR(f.opt_double("temperature", &g.temperature));
  PAGODA_RETURN_IF_ERROR(f.opt_double("top_p", &g.top_p));
  PAGODA_RETURN_IF_ERROR(f.opt_int("top_k", &g.top_k));
  PAGODA_RETURN_IF_ERROR(f.opt_double("min_p", &g.min_p));
  PAGODA_RETURN_IF_ERROR(f.opt_double("repetition_penalty", &g.repetition_penalty));
  PAGODA_RETURN_IF_ERROR(f.opt_int("max_new_tokens", &g.max_new_tokens));
  PAGODA_RETURN_IF_ERROR(f.token_ids("eos_token_id", &g.eos_token_ids));
  return g;
}

Result<GenerationDefaults> load_generation_config(const std::string& path) {
  PAGODA_ASSIGN_OR_RETURN(std::string text, read_file_text(path));
  return parse_generation_config(text, path);
}

Result<GenerationDefaults> load_folder_generation_config(const std::string& folder) {
  const std::filesystem::path path = std::filesystem::path(folder) / "generation_config.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return GenerationDefaults{};
  return load_generation_config(path.string());
}

}  // namespace pagoda
