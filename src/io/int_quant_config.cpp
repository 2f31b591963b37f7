#include "io/int_quant_config.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace pagoda {
namespace {

using Json = nlohmann::json;

Error bad(const std::string& path, const std::string& field, const Json& value,
          const std::string& expected) {
  return make_error(ErrorCode::kInvalidArgument, fmt::format("{}: quantization_config.{} = {}: {}",
                                                             path, field, value.dump(), expected));
}

// The first of `keys` present in q (AutoAWQ's older quant_config names w_bit
// / q_group_size); nullptr when none is.
const Json* find_field(const Json& q, std::initializer_list<const char*> keys, std::string* key) {
  for (const char* k : keys) {
    auto it = q.find(k);
    if (it != q.end() && !it->is_null()) {
      *key = k;
      return &*it;
    }
  }
  *key = *keys.begin();
  return nullptr;
}

Status read_int(const Json& q, std::initializer_list<const char*> keys, const std::string& path,
                int64_t* out) {
  std::string key;
  const Json* v = find_field(q, keys, &key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_number_integer()) return bad(path, key, *v, "an integer");
  *out = v->get<int64_t>();
  return Status::Ok();
}

Status read_bool(const Json& q, const char* key, const std::string& path, bool* out) {
  std::string k;
  const Json* v = find_field(q, {key}, &k);
  if (v == nullptr) return Status::Ok();
  if (!v->is_boolean()) return bad(path, key, *v, "true or false");
  *out = v->get<bool>();
  return Status::Ok();
}

Status read_string(const Json& q, std::initializer_list<const char*> keys, const std::string& path,
                   std::string* out, std::string* key) {
  const Json* v = find_field(q, keys, key);
  if (v == nullptr) return Status::Ok();
  if (!v->is_string()) return bad(path, *key, *v, "a string");
  *out = v->get<std::string>();
  return Status::Ok();
}

Status read_modules(const Json& q, const std::string& path, IntQuantConfig* c) {
  auto it = q.find("modules_to_not_convert");
  if (it == q.end() || it->is_null()) return Status::Ok();
  if (!it->is_array()) return bad(path, "modules_to_not_convert", *it, "a list of module names");
  for (const Json& m : *it) {
    if (!m.is_string() || m.get<std::string>().empty())
      return bad(path, "modules_to_not_convert", *it, "a list of module names");
    c->modules_to_not_convert.push_back(m.get<std::string>());
  }
  return Status::Ok();
}

Status parse_awq(const Json& q, const std::string& path, IntQuantConfig* c) {
  std::string version = "gemm", key;
  PAGODA_RETURN_IF_ERROR(read_string(q, {"version"}, path, &version, &key));
  std::string lower = version;
  for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (lower != "gemm")
    return bad(path, "version", q["version"],
               "only AWQ's GEMM layout (version gemm) loads; " + version +
                   " checkpoints (GEMV, Marlin, ExLlama serializations) do not");
  bool zero_point = true;
  PAGODA_RETURN_IF_ERROR(read_bool(q, "zero_point", path, &zero_point));
  if (!zero_point)
    return bad(path, "zero_point", q["zero_point"], "AWQ without zero points is not supported");
  if (c->bits != 4) return bad(path, "bits", c->bits, "AWQ checkpoints load with 4 bits only");
  return Status::Ok();
}

Status parse_gptq(const Json& q, const std::string& path, IntQuantConfig* c) {
  if (c->bits != 4 && c->bits != 8)
    return bad(path, "bits", c->bits, "GPTQ loads with 4 or 8 bits (2- and 3-bit are refused)");
  PAGODA_RETURN_IF_ERROR(read_bool(q, "desc_act", path, &c->desc_act));
  PAGODA_RETURN_IF_ERROR(read_bool(q, "sym", path, &c->sym));
  bool marlin = false;
  PAGODA_RETURN_IF_ERROR(read_bool(q, "is_marlin_format", path, &marlin));
  if (marlin)
    return bad(path, "is_marlin_format", true,
               "Marlin-serialized GPTQ weights are not supported (the gptq layout is)");
  std::string format = "gptq", key;
  PAGODA_RETURN_IF_ERROR(read_string(q, {"checkpoint_format", "format"}, path, &format, &key));
  if (format == "gptq") {
    c->zero_plus_one = true;
  } else if (format != "gptq_v2") {
    return bad(path, key, format, "gptq or gptq_v2 (marlin, bitblas, ... are not supported)");
  }
  return Status::Ok();
}

}  // namespace

std::string describe(const IntQuantConfig& q) {
  const bool awq = q.method == IntQuantMethod::kAwq;
  return fmt::format(
      "{} {}-bit {}{}{}", awq ? "awq" : "gptq", q.bits,
      q.group_size < 0 ? std::string("per-channel") : fmt::format("group {}", q.group_size),
      q.desc_act ? " desc_act" : "", awq ? "" : (q.zero_plus_one ? " (v1 zeros)" : " (v2 zeros)"));
}

Result<std::optional<IntQuantConfig>> parse_int_quant_config(std::string_view config_json,
                                                             const std::string& path) {
  const Json root = Json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (!root.is_object())
    return make_error(ErrorCode::kInvalidArgument, path + ": not a JSON object");
  auto qit = root.find("quantization_config");
  if (qit == root.end() || qit->is_null()) return std::optional<IntQuantConfig>();
  const Json& q = *qit;
  if (!q.is_object()) return bad(path, "", q, "an object");
  std::string method, key;
  PAGODA_RETURN_IF_ERROR(read_string(q, {"quant_method"}, path, &method, &key));
  IntQuantConfig c;
  if (method == "awq") {
    c.method = IntQuantMethod::kAwq;
  } else if (method == "gptq") {
    c.method = IntQuantMethod::kGptq;
  } else {
    return std::optional<IntQuantConfig>();
  }
  int64_t bits = 4;
  PAGODA_RETURN_IF_ERROR(read_int(q, {"bits", "w_bit"}, path, &bits));
  c.bits = static_cast<int>(bits);
  PAGODA_RETURN_IF_ERROR(read_int(q, {"group_size", "q_group_size"}, path, &c.group_size));
  if (c.group_size != -1 && (c.group_size <= 0 || c.group_size % 32 != 0))
    return bad(path, "group_size", c.group_size, "-1 (per channel) or a positive multiple of 32");
  PAGODA_RETURN_IF_ERROR(c.method == IntQuantMethod::kAwq ? parse_awq(q, path, &c)
                                                          : parse_gptq(q, path, &c));
  PAGODA_RETURN_IF_ERROR(read_modules(q, path, &c));
  return std::optional<IntQuantConfig>(std::move(c));
}

}  // namespace pagoda
