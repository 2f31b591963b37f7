// GGUF v2/v3 reader (little-endian): metadata, tensor infos and raw tensor
// data through a memory map (or a caller-owned buffer), plus dequantization of
// ggml tensor types to f32.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"

namespace pagoda {

class MappedFile;

// ggml tensor types (values as stored in the file).
enum class GgufType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
};

// Metadata value types (GGUF spec).
enum class GgufValueType : uint32_t {
  kUint8 = 0,
  kInt8 = 1,
  kUint16 = 2,
  kInt16 = 3,
  kUint32 = 4,
  kInt32 = 5,
  kFloat32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kUint64 = 10,
  kInt64 = 11,
  kFloat64 = 12,
};

struct GgufTensorInfo {
  std::string name;
  GgufType type = GgufType::kF32;
  std::vector<int64_t> dims;  // ggml order: ne[0] (contiguous) first
  uint64_t offset = 0;        // absolute offset in the file/buffer
  uint64_t nbytes = 0;        // bytes of raw (possibly quantized) data
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    return n;
  }
};

// A metadata array. Elements live in the vector matching `type`: integers and
// bools in `ints` (uint64 stored bit-cast), f32/f64 in `floats`, strings in
// `strings`, nested arrays in `arrays`.
struct GgufArray {
  GgufValueType type = GgufValueType::kUint8;  // element type
  std::vector<int64_t> ints;
  std::vector<double> floats;
  std::vector<std::string> strings;
  std::vector<GgufArray> arrays;
  size_t size() const;
};

// One metadata value; the member matching `type` holds it (same split as
// GgufArray: int_value for integers/bool, float_value, string_value, array).
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  int64_t int_value = 0;
  double float_value = 0.0;
  std::string string_value;
  GgufArray array;
};

class GgufFile {
 public:
  // Memory-maps `path` and parses header, metadata and tensor infos; every
  // count, length and offset is bounds-checked (Error kCorrupt, never UB).
  static Result<std::unique_ptr<GgufFile>> open(const std::string& path);
  // Parses an in-memory buffer that must outlive the GgufFile (fuzzing,
  // tests). `name` is used in error messages and path().
  static Result<std::unique_ptr<GgufFile>> parse(const uint8_t* data, size_t size,
                                                 std::string name = "<memory>");
  ~GgufFile();

  uint32_t version() const { return version_; }
  const std::string& path() const { return path_; }
  uint64_t alignment() const { return alignment_; }

  bool has(std::string_view key) const;
  const GgufValue* get(std::string_view key) const;  // nullptr if absent
  std::optional<std::string> get_string(std::string_view key) const;
  // Any integer type (and bool); nullopt for a uint64 above INT64_MAX.
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;  // f32/f64 (and integers)
  std::optional<bool> get_bool(std::string_view key) const;
  // nullptr if absent or not an array of strings.
  const std::vector<std::string>* get_string_array(std::string_view key) const;
  std::optional<std::vector<int64_t>> get_int_array(std::string_view key) const;
  std::optional<std::vector<double>> get_float_array(std::string_view key) const;
  std::vector<std::string> keys() const;  // in file order

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;  // nullptr if absent
  // Pointer to the tensor's raw data (info.nbytes bytes) inside the map.
  const uint8_t* tensor_data(const GgufTensorInfo& info) const;

 private:
  GgufFile() = default;
  class Parser;

  std::unique_ptr<MappedFile> map_;  // null when parsing a caller's buffer
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  std::vector<std::pair<std::string, GgufValue>> metadata_;  // file order
  std::map<std::string, size_t, std::less<>> metadata_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

const char* gguf_type_name(GgufType type);  // "Q4_K", "F16", ...; "unknown" otherwise
const char* gguf_value_type_name(GgufValueType type);

// Block geometry of a tensor type; nullopt for unknown types.
struct GgufTypeTraits {
  int64_t block_size;  // elements per block
  int64_t type_size;   // bytes per block
};
std::optional<GgufTypeTraits> gguf_type_traits(GgufType type);
// True when dequantize() handles `type`.
bool gguf_can_dequantize(GgufType type);
// The block DType (core/dtype.h) that holds a tensor of `type` byte for byte
// (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K); nullopt for other types.
std::optional<DType> gguf_block_dtype(GgufType type);

// Dequantizes n elements (a multiple of the type's block size) of raw data of
// `type` into out[0..n). Bit-exact with gguf-py's gguf.quants.dequantize.
// Unsupported type or bad n → Error naming the type.
Status dequantize(GgufType type, const uint8_t* data, int64_t n, float* out);

}  // namespace pagoda
