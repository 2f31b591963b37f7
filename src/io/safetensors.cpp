// safetensors header validation.
#include "io/safetensors.h"

#include <fmt/format.h>

#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

namespace pagoda {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // the safetensors format's own limit

struct DtypeRow {
  const char* name;
  uint64_t bytes;
  std::optional<DType> dtype;
};

constexpr DtypeRow kDtypes[] = {
    {"F32", 4, DType::kF32},   {"F16", 2, DType::kF16},        {"BF16", 2, DType::kBF16},
    {"F64", 8, std::nullopt},  {"I64", 8, DType::kI64},       {"U64", 8, std::nullopt},
    {"I32", 4, DType::kI32},   {"U32", 4, std::nullopt},       {"I16", 2, std::nullopt},
    {"U16", 2, std::nullopt},  {"I8", 1, std::nullopt},        {"U8", 1, std::nullopt},
    {"BOOL", 1, DType::kU8}, {"F8_E4M3", 1, DType::kF8E4M3}, {"F8_E5M2", 1, std::nullopt},
};

const DtypeRow* find_dtype(const std::string& name) {
  for (const DtypeRow& row : kDtypes) {
    if (name == row.name) return &row;
  }
  return nullptr;
}

Error corrupt(const std::string& file, const std::string& what) {
  return make_error(ErrorCode::kCorrupt, fmt::format("safetensors {}: {}", file, what));
}

Status parse_shape(const nlohmann::json& j, const std::string& file, SafetensorsEntry* e) {
  if (!j.is_array())
    return corrupt(file, fmt::format("tensor '{}': shape is not an array", e->name));
  for (const auto& d : j) {
    if (!d.is_number_unsigned()) {
      return corrupt(file,
                     fmt::format("tensor '{}': shape has a non-integer or negative dimension {}",
                                 e->name, d.dump()));
    }
    const uint64_t v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return corrupt(file, fmt::format("tensor '{}': dimension {} is too large", e->name, v));
    }
    e->shape.push_back(static_cast<int64_t>(v));
  }
  return Status::Ok();
}

Status parse_offsets(const nlohmann::json& j, const std::string& file, SafetensorsEntry* e) {
  if (!j.is_array() || j.size() != 2 || !j[0].is_number_unsigned() || !j[1].is_number_unsigned()) {
    return corrupt(
        file, fmt::format("tensor '{}': data_offsets must be two non-negative integers", e->name));
  }
  e->begin = j[0].get<uint64_t>();
  e->end = j[1].get<uint64_t>();
  if (e->begin > e->end) {
    return corrupt(file, fmt::format("tensor '{}': data_offsets [{}, {}) are reversed", e->name,
                                     e->begin, e->end));
  }
  return Status::Ok();
}

// Parses one tensor entry; offsets stay relative to the data section.
Status parse_entry(const std::string& name, const nlohmann::json& j, const std::string& file,
                   SafetensorsEntry* e) {
  e->name = name;
  if (!j.is_object())
    return corrupt(file, fmt::format("tensor '{}': entry is not an object", name));
  auto dt = j.find("dtype");
  auto shape = j.find("shape");
  auto offsets = j.find("data_offsets");
  if (dt == j.end() || !dt->is_string())
    return corrupt(file, fmt::format("tensor '{}': missing dtype", name));
  if (shape == j.end()) return corrupt(file, fmt::format("tensor '{}': missing shape", name));
  if (offsets == j.end())
    return corrupt(file, fmt::format("tensor '{}': missing data_offsets", name));
  e->dtype_name = dt->get<std::string>();
  const DtypeRow* row = find_dtype(e->dtype_name);
  if (row == nullptr) {
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("safetensors {}: tensor '{}' has unknown dtype '{}'", file, name,
                                  e->dtype_name));
  }
  e->dtype = row->dtype;
  PAGODA_RETURN_IF_ERROR(parse_shape(*shape, file, e));
  PAGODA_RETURN_IF_ERROR(parse_offsets(*offsets, file, e));
  uint64_t bytes = row->bytes;
  for (int64_t d : e->shape) {
    if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) {
      return corrupt(file, fmt::format("tensor '{}': byte size overflows", name));
    }
  }
  if (bytes != e->end - e->begin) {
    return corrupt(
        file, fmt::format("tensor '{}': shape {} of {} needs {} bytes but data_offsets span {}",
                          name, shape->dump(), e->dtype_name, bytes, e->end - e->begin));
  }
  return Status::Ok();
}

Status parse_metadata(const nlohmann::json& j, const std::string& file, SafetensorsHeader* h) {
  if (!j.is_object()) return corrupt(file, "__metadata__ is not an object");
  for (const auto& [k, v] : j.items()) {
    if (!v.is_string())
      return corrupt(file, fmt::format("__metadata__ value of '{}' is not a string", k));
    h->metadata[k] = v.get<std::string>();
  }
  return Status::Ok();
}

}  // namespace

Result<SafetensorsHeader> parse_safetensors_header(const uint8_t* data, size_t size,
                                                   const std::string& name) {
  if (size < 8)
    return corrupt(name,
                   fmt::format("file is {} bytes, shorter than the 8-byte header length", size));
  uint64_t header_len = 0;
  std::memcpy(&header_len, data, 8);
  if (header_len > kMaxHeaderBytes) {
    return corrupt(name, fmt::format("header length {} exceeds the {}-byte limit", header_len,
                                     kMaxHeaderBytes));
  }
  if (header_len > size - 8) {
    return corrupt(name,
                   fmt::format("header length {} exceeds the file size {}", header_len, size));
  }
  const char* text = reinterpret_cast<const char*>(data + 8);
  nlohmann::json j =
      nlohmann::json::parse(text, text + header_len, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return corrupt(name, "header is not valid JSON");
  if (!j.is_object()) return corrupt(name, "header is not a JSON object");

  SafetensorsHeader h;
  h.data_start = 8 + header_len;
  const uint64_t data_size = size - h.data_start;
  for (const auto& [key, value] : j.items()) {
    if (key == "__metadata__") {
      PAGODA_RETURN_IF_ERROR(parse_metadata(value, name, &h));
      continue;
    }
    SafetensorsEntry e;
    PAGODA_RETURN_IF_ERROR(parse_entry(key, value, name, &e));
    if (e.end > data_size) {
      return corrupt(name, fmt::format("tensor '{}': data_offsets end {} is past the {} data bytes",
                                       key, e.end, data_size));
    }
    e.begin += h.data_start;
    e.end += h.data_start;
    h.tensors.push_back(std::move(e));
  }
  return h;
}

}  // namespace pagoda
