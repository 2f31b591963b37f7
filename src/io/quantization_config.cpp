// Field semantics follow vLLM's CompressedTensorsConfig (W8A8 FP8 schemes),
// ModelOptFp8Config and Fp8Config.
#include "io/quantization_config.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace pagoda {

namespace {

using Json = nlohmann::json;

Error bad(const std::string& where, std::string_view field, const Json* got,
          std::string_view expected) {
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("{}: field '{}' {} (got {})", where, field, expected,
                                got == nullptr ? "nothing" : got->dump()));
}

const Json* find(const Json& j, std::string_view key) {
  auto it = j.find(std::string(key));
  return it == j.end() || it->is_null() ? nullptr : &*it;
}

Result<std::string> req_string(const Json& j, const std::string& where, std::string_view key) {
  const Json* v = find(j, key);
  if (v == nullptr || !v->is_string()) return bad(where, key, v, "must be a string");
  return v->get<std::string>();
}

// A list of strings, or absent / null (leaves *out unchanged).
Status opt_string_list(const Json& j, const std::string& where, std::string_view key,
                       std::vector<std::string>* out) {
  const Json* v = find(j, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_array()) return bad(where, key, v, "must be a list of module names");
  for (const Json& x : *v) {
    if (!x.is_string()) return bad(where, key, v, "must be a list of module names");
    out->push_back(x.get<std::string>());
  }
  return Status::Ok();
}

// The part of a compressed-tensors quantisation args object that every FP8
// scheme shares: num_bits 8, type float, symmetric.
Status check_fp8_args(const Json& args, const std::string& where) {
  const Json* bits = find(args, "num_bits");
  if (bits == nullptr || !bits->is_number_integer() || bits->get<int64_t>() != 8)
    return bad(where, "num_bits", bits, "must be 8 (FP8 e4m3 is the supported scheme)");
  const Json* type = find(args, "type");
  if (type == nullptr || *type != "float")
    return bad(where, "type", type, "must be \"float\" (FP8 e4m3 is the supported scheme)");
  const Json* sym = find(args, "symmetric");
  if (sym != nullptr && *sym != true) return bad(where, "symmetric", sym, "must be true");
  return Status::Ok();
}

Status parse_ct_weights(const Json& w, const std::string& where, QuantizationConfig* q) {
  PAGODA_RETURN_IF_ERROR(check_fp8_args(w, where));
  const Json* dyn = find(w, "dynamic");
  if (dyn != nullptr && *dyn != false) return bad(where, "dynamic", dyn, "must be false");
  for (const char* key : {"group_size", "actorder"}) {
    if (const Json* v = find(w, key)) return bad(where, key, v, "must be null for FP8 weights");
  }
  PAGODA_ASSIGN_OR_RETURN(const std::string strategy, req_string(w, where, "strategy"));
  if (strategy == "tensor") {
    q->weight_scales = Fp8WeightScales::kTensor;
  } else if (strategy == "channel") {
    q->weight_scales = Fp8WeightScales::kChannel;
  } else if (strategy == "block") {
    const Json* b = find(w, "block_structure");
    if (b == nullptr || !b->is_array() || b->size() != 2 || !(*b)[0].is_number_integer() ||
        (*b)[0] != (*b)[1] || (*b)[0].get<int64_t>() <= 0 || (*b)[0].get<int64_t>() > 4096)
      return bad(where, "block_structure", b, "must be [b, b] with 0 < b <= 4096");
    q->weight_scales = Fp8WeightScales::kBlock;
    q->block = (*b)[0].get<int32_t>();
    q->block_scale_name = "weight_scale";
  } else {
    return bad(where, "strategy", find(w, "strategy"),
               "must be \"tensor\", \"channel\" or \"block\"");
  }
  return Status::Ok();
}

Status parse_ct_activations(const Json* a, const std::string& where, QuantizationConfig* q) {
  if (a == nullptr || !a->is_object())
    return bad(where, "input_activations", a,
               "must describe FP8 activations (weight-only FP8, W8A16, is not supported)");
  const std::string in = where + ".input_activations";
  PAGODA_RETURN_IF_ERROR(check_fp8_args(*a, in));
  const Json* dyn = find(*a, "dynamic");
  if (dyn == nullptr || !dyn->is_boolean()) return bad(in, "dynamic", dyn, "must be true or false");
  PAGODA_ASSIGN_OR_RETURN(const std::string strategy, req_string(*a, in, "strategy"));
  q->static_activations = !dyn->get<bool>();
  if (q->weight_scales == Fp8WeightScales::kBlock) {
    const Json* g = find(*a, "group_size");
    if (q->static_activations || strategy != "group" || g == nullptr || *g != q->block)
      return bad(
          in, "strategy", find(*a, "strategy"),
          fmt::format("must be dynamic \"group\" with group_size {} for block weights", q->block));
  } else if (q->static_activations ? strategy != "tensor" : strategy != "token") {
    return bad(in, "strategy", find(*a, "strategy"),
               q->static_activations ? "must be \"tensor\" for static activations"
                                     : "must be \"token\" for dynamic activations");
  }
  return Status::Ok();
}

// compressed-tensors' formats that store FP8 weights as their e4m3 values
// (the weights' num_bits / type say FP8; the tensors' dtype is checked at load).
bool stores_fp8_values(const Json* format) {
  return format == nullptr || *format == "float-quantized" || *format == "naive-quantized";
}

Result<QuantizationConfig> parse_compressed_tensors(const Json& j, const std::string& where) {
  QuantizationConfig q;
  q.method = QuantMethod::kCompressedTensors;
  const Json* format = find(j, "format");
  if (!stores_fp8_values(format))
    return bad(where, "format", format, "must be \"float-quantized\" or \"naive-quantized\" (FP8)");
  const Json* groups = find(j, "config_groups");
  if (groups == nullptr || !groups->is_object() || groups->empty())
    return bad(where, "config_groups", groups, "must be an object of quantisation groups");
  bool first = true;
  for (const auto& [name, g] : groups->items()) {
    const std::string gw = where + ".config_groups." + name;
    if (!g.is_object()) return bad(where + ".config_groups", name, &g, "must be an object");
    const Json* gf = find(g, "format");
    if (!stores_fp8_values(gf))
      return bad(gw, "format", gf, "must be \"float-quantized\" or \"naive-quantized\" (FP8)");
    if (const Json* out = find(g, "output_activations"))
      return bad(gw, "output_activations", out, "must be null");
    const Json* w = find(g, "weights");
    if (w == nullptr || !w->is_object()) return bad(gw, "weights", w, "must be an object");
    QuantizationConfig one = q;
    PAGODA_RETURN_IF_ERROR(parse_ct_weights(*w, gw + ".weights", &one));
    PAGODA_RETURN_IF_ERROR(parse_ct_activations(find(g, "input_activations"), gw, &one));
    if (!first && (one.weight_scales != q.weight_scales || one.block != q.block ||
                   one.static_activations != q.static_activations))
      return bad(where, "config_groups", groups,
                 "must give every group the same FP8 scheme (mixed schemes are not supported)");
    q = one;
    first = false;
  }
  PAGODA_RETURN_IF_ERROR(opt_string_list(j, where, "ignore", &q.ignore));
  return q;
}

Result<QuantizationConfig> parse_modelopt(const Json& j, const std::string& where) {
  QuantizationConfig q;
  q.method = QuantMethod::kModelOpt;
  PAGODA_ASSIGN_OR_RETURN(const std::string algo, req_string(j, where, "quant_algo"));
  if (algo != "FP8")
    return bad(where, "quant_algo", find(j, "quant_algo"),
               "must be \"FP8\" (per-tensor FP8 is the supported ModelOpt scheme)");
  q.weight_scales = Fp8WeightScales::kTensor;
  q.static_activations = true;
  PAGODA_RETURN_IF_ERROR(opt_string_list(j, where, "exclude_modules", &q.ignore));
  return q;
}

Result<QuantizationConfig> parse_fp8(const Json& j, const std::string& where) {
  QuantizationConfig q;
  q.method = QuantMethod::kFp8;
  const Json* fmt_field = find(j, "fmt");
  if (fmt_field != nullptr && *fmt_field != "e4m3")
    return bad(where, "fmt", fmt_field, "must be \"e4m3\"");
  const Json* scheme = find(j, "activation_scheme");
  if (scheme != nullptr && *scheme != "dynamic" && *scheme != "static")
    return bad(where, "activation_scheme", scheme, "must be \"dynamic\" or \"static\"");
  q.static_activations = scheme != nullptr && *scheme == "static";
  if (const Json* b = find(j, "weight_block_size")) {
    if (!b->is_array() || b->size() != 2 || !(*b)[0].is_number_integer() || (*b)[0] != (*b)[1] ||
        (*b)[0].get<int64_t>() <= 0 || (*b)[0].get<int64_t>() > 4096)
      return bad(where, "weight_block_size", b, "must be [b, b] with 0 < b <= 4096");
    if (q.static_activations)
      return bad(where, "activation_scheme", scheme, "must be \"dynamic\" with weight_block_size");
    q.weight_scales = Fp8WeightScales::kBlock;
    q.block = (*b)[0].get<int32_t>();
  }
  PAGODA_RETURN_IF_ERROR(opt_string_list(j, where, "ignored_layers", &q.ignore));
  PAGODA_RETURN_IF_ERROR(opt_string_list(j, where, "modules_to_not_convert", &q.ignore));
  return q;
}

Result<Json> parse_object(std::string_view text, const std::string& where) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object())
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: not a JSON object", where));
  return j;
}

}  // namespace

Result<QuantizationConfig> parse_quantization_config(std::string_view json_text,
                                                     const std::string& where) {
  PAGODA_ASSIGN_OR_RETURN(const Json j, parse_object(json_text, where));
  PAGODA_ASSIGN_OR_RETURN(const std::string method, req_string(j, where, "quant_method"));
  if (method == "compressed-tensors") return parse_compressed_tensors(j, where);
  if (method == "modelopt") {
    const Json* inner = find(j, "quantization");  // the hf_quant_config.json layout, nested
    return parse_modelopt(inner != nullptr && inner->is_object() ? *inner : j, where);
  }
  if (method == "fp8") return parse_fp8(j, where);
  // Integer weight formats: io/int_quant_config.h reads them (no FP8 scheme).
  if (method == "awq" || method == "gptq") return QuantizationConfig{};
  return bad(where, "quant_method", find(j, "quant_method"),
             "is not supported: pagoda runs FP8 checkpoints (\"compressed-tensors\" "
             "float-quantized, \"modelopt\" FP8, \"fp8\") and \"awq\" / \"gptq\"");
}

Result<QuantizationConfig> parse_hf_quant_config(std::string_view json_text,
                                                 const std::string& path) {
  PAGODA_ASSIGN_OR_RETURN(const Json j, parse_object(json_text, path));
  const Json* inner = find(j, "quantization");
  if (inner == nullptr || !inner->is_object())
    return bad(path, "quantization", inner, "must be an object");
  return parse_modelopt(*inner, path + ": quantization");
}

QuantizationConfig online_fp8_config() {
  QuantizationConfig q;
  q.method = QuantMethod::kOnline;
  q.weight_scales = Fp8WeightScales::kChannel;
  q.static_activations = false;
  return q;
}

Status check_quantization_flag(std::string_view value) {
  if (value.empty() || value == "fp8") return Status::Ok();
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("--quantization '{}' is not supported; the supported value is "
                                "'fp8' (FP8 checkpoints load as they are, without the flag)",
                                value));
}

std::string describe_quantization(const QuantizationConfig& q, std::string_view unquantised) {
  if (!q.fp8()) return std::string(unquantised);
  std::string acts, weights, source;
  if (q.weight_scales == Fp8WeightScales::kBlock) {
    acts = fmt::format("dynamic per-token per-{}-column group", q.block);
    weights = fmt::format("{}x{} block weight scales", q.block, q.block);
  } else {
    acts = q.static_activations ? "static per-tensor" : "dynamic per-token";
    weights = q.weight_scales == Fp8WeightScales::kChannel ? "per-channel weight scales"
                                                           : "per-tensor weight scales";
  }
  switch (q.method) {
    case QuantMethod::kCompressedTensors:
      source = "compressed-tensors";
      break;
    case QuantMethod::kModelOpt:
      source = "modelopt";
      break;
    case QuantMethod::kFp8:
      source = "fp8 checkpoint";
      break;
    case QuantMethod::kOnline:
      source = "quantised at load, --quantization fp8";
      break;
    case QuantMethod::kNone:
      break;
  }
  return fmt::format("fp8 (w8a8, {}; {}; {})", acts, weights, source);
}

}  // namespace pagoda
