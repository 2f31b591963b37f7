#include "spec/spec_config.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>

namespace pagoda {

namespace {

using json = nlohmann::json;

Error config_error(std::string_view key, std::string_view what) {
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("--speculative-config: {}: {}", key, what));
}

// The integer at `key` within [lo, hi]; nullopt when absent.
Result<std::optional<int32_t>> read_int(const json& obj, const char* key, int64_t lo, int64_t hi) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<int32_t>();
  if (!it->is_number_integer()) return config_error(key, "must be an integer");
  const int64_t v =
      it->is_number_unsigned() && it->get<uint64_t>() > INT64_MAX ? INT64_MAX : it->get<int64_t>();
  if (v < lo || v > hi) {
    return config_error(key, fmt::format("{} is out of range: must be in [{}, {}]", v, lo, hi));
  }
  return std::optional<int32_t>(static_cast<int32_t>(v));
}

Result<std::optional<double>> read_number(const json& obj, const char* key, double lo, double hi) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::optional<double>();
  if (!it->is_number()) return config_error(key, "must be a number");
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) {
    return config_error(key, fmt::format("{} is out of range: must be in [{}, {}]", v, lo, hi));
  }
  return std::optional<double>(v);
}

Result<std::string> read_string(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::string();
  if (!it->is_string()) return config_error(key, "must be a string");
  return it->get<std::string>();
}

constexpr const char* kKeys[] = {"method",
                                 "num_speculative_tokens",
                                 "model",
                                 "revision",
                                 "prompt_lookup_min",
                                 "prompt_lookup_max",
                                 "suffix_decoding_max_tree_depth",
                                 "suffix_decoding_max_cached_requests",
                                 "suffix_decoding_max_spec_factor",
                                 "suffix_decoding_min_token_prob",
                                 "disable_by_batch_size",
                                 "miss_cost_budget",
                                 "draft_tensor_parallel_size"};

// Most tokens one step may draft per sequence.
constexpr int64_t kMaxSpeculativeTokens = 64;

}  // namespace

const char* spec_method_name(SpecMethod method) {
  switch (method) {
    case SpecMethod::kNone:
      return "";
    case SpecMethod::kNgram:
      return "ngram";
    case SpecMethod::kSuffix:
      return "suffix";
    case SpecMethod::kDraftModel:
      return "draft_model";
    case SpecMethod::kEagle:
      return "eagle";
    case SpecMethod::kEagle3:
      return "eagle3";
  }
  return "";
}

Result<SpeculativeConfig> parse_speculative_config(std::string_view text) {
  SpeculativeConfig c;
  if (text.empty()) return c;
  const json obj = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (obj.is_discarded() || !obj.is_object()) {
    return make_error(ErrorCode::kInvalidArgument,
                      "--speculative-config: must be a JSON object, e.g. "
                      "'{\"method\": \"ngram\", \"num_speculative_tokens\": 4}'");
  }
  for (const auto& [key, value] : obj.items()) {
    bool known = false;
    for (const char* k : kKeys) known = known || key == k;
    if (!known) {
      std::string list;
      for (const char* k : kKeys) list += fmt::format("{}{}", list.empty() ? "" : ", ", k);
      return config_error(key, fmt::format("unknown key (known: {})", list));
    }
  }
  PAGODA_ASSIGN_OR_RETURN(std::string method, read_string(obj, "method"));
  PAGODA_ASSIGN_OR_RETURN(c.model, read_string(obj, "model"));
  PAGODA_ASSIGN_OR_RETURN(c.revision, read_string(obj, "revision"));
  // vLLM's older spelling: "model": "ngram" or "[ngram]" selects prompt lookup.
  if ((method.empty() || method == "ngram") && (c.model == "ngram" || c.model == "[ngram]")) {
    method = "ngram";
    c.model.clear();
  }
  if (method.empty()) method = c.model.empty() ? "" : "draft_model";
  if (method == "ngram") {
    c.method = SpecMethod::kNgram;
  } else if (method == "suffix") {
    c.method = SpecMethod::kSuffix;
  } else if (method == "draft_model") {
    c.method = SpecMethod::kDraftModel;
  } else if (method == "eagle") {
    c.method = SpecMethod::kEagle;
  } else if (method == "eagle3") {
    c.method = SpecMethod::kEagle3;
  } else if (method == "medusa" || method == "mlp_speculator" || method == "mtp") {
    return config_error("method", fmt::format("'{}' is not supported yet (supported: ngram, "
                                              "suffix, draft_model, eagle, eagle3)",
                                              method));
  } else if (method.empty()) {
    return config_error("method", "missing (ngram, suffix, draft_model, eagle or eagle3)");
  } else {
    return config_error("method", fmt::format("unknown method '{}' (ngram, suffix, draft_model, "
                                              "eagle or eagle3)",
                                              method));
  }
  if (c.method == SpecMethod::kDraftModel && c.model.empty()) {
    return config_error("model", "draft_model needs the draft model (a folder, .gguf or repo id)");
  }
  if ((c.method == SpecMethod::kEagle || c.method == SpecMethod::kEagle3) && c.model.empty()) {
    return config_error("model", fmt::format("{} needs the EAGLE head (a folder or repo id)", method));
  }
  if (!c.has_model() && !c.model.empty()) {
    return config_error("model", fmt::format("{} takes no model", method));
  }
  if (!c.has_model() && !c.revision.empty()) {
    return config_error("revision", fmt::format("{} takes no model revision", method));
  }

  PAGODA_ASSIGN_OR_RETURN(std::optional<int32_t> lookup_min,
                          read_int(obj, "prompt_lookup_min", 1, 1024));
  PAGODA_ASSIGN_OR_RETURN(std::optional<int32_t> lookup_max,
                          read_int(obj, "prompt_lookup_max", 1, 1024));
  if ((lookup_min || lookup_max) && c.method != SpecMethod::kNgram) {
    return config_error(lookup_min ? "prompt_lookup_min" : "prompt_lookup_max",
                        "applies to method ngram only");
  }
  // vLLM's defaults: both unset 5 and 5, one unset the other's value.
  c.prompt_lookup_min = lookup_min.value_or(lookup_max.value_or(5));
  c.prompt_lookup_max = lookup_max.value_or(lookup_min.value_or(5));
  if (c.prompt_lookup_min > c.prompt_lookup_max) {
    return config_error("prompt_lookup_min", fmt::format("{} exceeds prompt_lookup_max = {}",
                                                         c.prompt_lookup_min, c.prompt_lookup_max));
  }

  PAGODA_ASSIGN_OR_RETURN(std::optional<int32_t> depth,
                          read_int(obj, "suffix_decoding_max_tree_depth", 1, 1024));
  PAGODA_ASSIGN_OR_RETURN(std::optional<int32_t> cached,
                          read_int(obj, "suffix_decoding_max_cached_requests", 0, 1 << 30));
  PAGODA_ASSIGN_OR_RETURN(std::optional<double> factor,
                          read_number(obj, "suffix_decoding_max_spec_factor", 0.0, 1e6));
  PAGODA_ASSIGN_OR_RETURN(std::optional<double> min_prob,
                          read_number(obj, "suffix_decoding_min_token_prob", 0.0, 1.0));
  if ((depth || cached || factor || min_prob) && c.method != SpecMethod::kSuffix) {
    return config_error(depth    ? "suffix_decoding_max_tree_depth"
                        : cached ? "suffix_decoding_max_cached_requests"
                        : factor ? "suffix_decoding_max_spec_factor"
                                 : "suffix_decoding_min_token_prob",
                        "applies to method suffix only");
  }
  c.suffix_max_tree_depth = depth.value_or(c.suffix_max_tree_depth);
  c.suffix_max_cached_requests = cached.value_or(c.suffix_max_cached_requests);
  c.suffix_max_spec_factor = factor.value_or(c.suffix_max_spec_factor);
  c.suffix_min_token_prob = min_prob.value_or(c.suffix_min_token_prob);

  PAGODA_ASSIGN_OR_RETURN(std::optional<int32_t> k,
                          read_int(obj, "num_speculative_tokens", 1, kMaxSpeculativeTokens));
  if (!k && c.method != SpecMethod::kSuffix) {
    return config_error("num_speculative_tokens", fmt::format("required for {}", method));
  }
  // Suffix decoding drafts up to its tree depth unless capped (vLLM's rule).
  c.num_speculative_tokens = k.value_or(
      static_cast<int32_t>(std::min<int64_t>(c.suffix_max_tree_depth, kMaxSpeculativeTokens)));

  PAGODA_ASSIGN_OR_RETURN(std::optional<int32_t> by_batch,
                          read_int(obj, "disable_by_batch_size", 0, 1 << 30));
  c.disable_by_batch_size = by_batch.value_or(0);
  PAGODA_ASSIGN_OR_RETURN(std::optional<double> budget,
                          read_number(obj, "miss_cost_budget", 0.0, 1.0));
  c.miss_cost_budget = budget.value_or(c.miss_cost_budget);
  PAGODA_ASSIGN_OR_RETURN(std::optional<int32_t> draft_tp,
                          read_int(obj, "draft_tensor_parallel_size", 1, 1024));
  if (draft_tp && *draft_tp != 1) {
    return config_error("draft_tensor_parallel_size",
                        "only 1 is supported (the draft runs on the first GPU)");
  }
  if (draft_tp && !c.has_model()) {
    return config_error("draft_tensor_parallel_size",
                        "applies to methods draft_model, eagle and eagle3 only");
  }
  return c;
}

}  // namespace pagoda
