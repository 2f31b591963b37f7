// Names and block geometry of ggml tensor types and GGUF metadata value types.
#include "io/gguf.h"

namespace pagoda {

namespace {

struct TypeRow {
  GgufType type;
  const char* name;
  int64_t block_size;
  int64_t type_size;
};

// Values from ggml.h / gguf-py GGML_QUANT_SIZES.
constexpr TypeRow kTypeRows[] = {
    {GgufType::kF32, "F32", 1, 4},
    {GgufType::kF16, "F16", 1, 2},
    {GgufType::kQ4_0, "Q4_0", 32, 18},
    {GgufType::kQ4_1, "Q4_1", 32, 20},
    {GgufType::kQ5_0, "Q5_0", 32, 22},
    {GgufType::kQ5_1, "Q5_1", 32, 24},
    {GgufType::kQ8_0, "Q8_0", 32, 34},
    {GgufType::kQ8_1, "Q8_1", 32, 40},
    {GgufType::kQ2_K, "Q2_K", 256, 84},
    {GgufType::kQ3_K, "Q3_K", 256, 110},
    {GgufType::kQ4_K, "Q4_K", 256, 144},
    {GgufType::kQ5_K, "Q5_K", 256, 176},
    {GgufType::kQ6_K, "Q6_K", 256, 210},
    {GgufType::kQ8_K, "Q8_K", 256, 292},
    {GgufType::kIQ2_XXS, "IQ2_XXS", 256, 66},
    {GgufType::kIQ2_XS, "IQ2_XS", 256, 74},
    {GgufType::kIQ3_XXS, "IQ3_XXS", 256, 98},
    {GgufType::kIQ1_S, "IQ1_S", 256, 50},
    {GgufType::kIQ4_NL, "IQ4_NL", 32, 18},
    {GgufType::kIQ3_S, "IQ3_S", 256, 110},
    {GgufType::kIQ2_S, "IQ2_S", 256, 82},
    {GgufType::kIQ4_XS, "IQ4_XS", 256, 136},
    {GgufType::kI8, "I8", 1, 1},
    {GgufType::kI16, "I16", 1, 2},
    {GgufType::kI32, "I32", 1, 4},
    {GgufType::kI64, "I64", 1, 8},
    {GgufType::kF64, "F64", 1, 8},
    {GgufType::kIQ1_M, "IQ1_M", 256, 56},
    {GgufType::kBF16, "BF16", 1, 2},
    {GgufType::kTQ1_0, "TQ1_0", 256, 54},
    {GgufType::kTQ2_0, "TQ2_0", 256, 66},
    {GgufType::kMXFP4, "MXFP4", 32, 17},
};

const TypeRow* find_row(GgufType type) {
  for (const TypeRow& row : kTypeRows) {
    if (row.type == type) return &row;
  }
  return nullptr;
}

}  // namespace

const char* gguf_type_name(GgufType type) {
  const TypeRow* row = find_row(type);
  return row != nullptr ? row->name : "unknown";
}

std::optional<GgufTypeTraits> gguf_type_traits(GgufType type) {
  const TypeRow* row = find_row(type);
  if (row == nullptr) return std::nullopt;
  return GgufTypeTraits{row->block_size, row->type_size};
}

const char* gguf_value_type_name(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
      return "uint8";
    case GgufValueType::kInt8:
      return "int8";
    case GgufValueType::kUint16:
      return "uint16";
    case GgufValueType::kInt16:
      return "int16";
    case GgufValueType::kUint32:
      return "uint32";
    case GgufValueType::kInt32:
      return "int32";
    case GgufValueType::kFloat32:
      return "float32";
    case GgufValueType::kBool:
      return "bool";
    case GgufValueType::kString:
      return "string";
    case GgufValueType::kArray:
      return "array";
    case GgufValueType::kUint64:
      return "uint64";
    case GgufValueType::kInt64:
      return "int64";
    case GgufValueType::kFloat64:
      return "float64";
  }
  return "unknown";
}

size_t GgufArray::size() const {
  switch (type) {
    case GgufValueType::kString:
      return strings.size();
    case GgufValueType::kArray:
      return arrays.size();
    case GgufValueType::kFloat32:
    case GgufValueType::kFloat64:
      return floats.size();
    default:
      return ints.size();
  }
}

}  // namespace pagoda
