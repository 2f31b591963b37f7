// GGUF v2/v3 parser. Layout (little-endian):
//   magic "GGUF" u32 | version u32 | n_tensors u64 | n_kv u64
//   n_kv × (key string, value type u32, value)
//   n_tensors × (name string, n_dims u32, dims u64[n_dims], type u32, offset u64)
//   padding to general.alignment | tensor data (offsets relative to its start)
// A string is a u64 length then bytes; an array is an element type u32, a
// count u64 then the elements. Every count is checked against the bytes left
// before anything is allocated, so a corrupt file cannot request huge memory.
#include "io/gguf.h"

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <limits>

#include "core/log.h"
#include "io/mapped_file.h"

namespace pagoda {

static_assert(std::endian::native == std::endian::little,
              "the GGUF reader assumes a little-endian host");

namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian u32
constexpr int kMaxArrayDepth = 8;            // nested arrays deeper than this are rejected
constexpr uint32_t kMaxDims = 4;             // GGML_MAX_DIMS
constexpr uint64_t kDefaultAlignment = 32;   // GGUF_DEFAULT_ALIGNMENT

// Bounds-checked little-endian cursor over a byte buffer.
class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size, const std::string& name)
      : data_(data), size_(size), name_(name) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  Error corrupt(const std::string& what) const {
    return make_error(ErrorCode::kCorrupt,
                      fmt::format("GGUF {}: {} (at byte {})", name_, what, pos_));
  }

  template <typename T>
  Status read(T* out, std::string_view what) {
    if (remaining() < sizeof(T)) return corrupt(fmt::format("truncated while reading {}", what));
    std::memcpy(out, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return Status::Ok();
  }

  Status read_string(std::string* out, std::string_view what) {
    uint64_t len = 0;
    PAGODA_RETURN_IF_ERROR(read(&len, what));
    if (len > remaining()) {
      return corrupt(fmt::format("{} length {} exceeds the {} bytes left", what, len, remaining()));
    }
    out->assign(reinterpret_cast<const char*>(data_ + pos_), static_cast<size_t>(len));
    pos_ += static_cast<size_t>(len);
    return Status::Ok();
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& name_;
};

bool is_valid_value_type(uint32_t t) {
  return t <= static_cast<uint32_t>(GgufValueType::kFloat64);
}

// Smallest encoded size of one element of `type`: bounds array counts.
size_t min_encoded_size(GgufValueType type) {
  switch (type) {
    case GgufValueType::kUint8:
    case GgufValueType::kInt8:
    case GgufValueType::kBool:
      return 1;
    case GgufValueType::kUint16:
    case GgufValueType::kInt16:
      return 2;
    case GgufValueType::kUint32:
    case GgufValueType::kInt32:
    case GgufValueType::kFloat32:
      return 4;
    case GgufValueType::kUint64:
    case GgufValueType::kInt64:
    case GgufValueType::kFloat64:
    case GgufValueType::kString:
      return 8;
    case GgufValueType::kArray:
      return 12;
  }
  return 1;
}

bool is_float_type(GgufValueType t) {
  return t == GgufValueType::kFloat32 || t == GgufValueType::kFloat64;
}

template <typename T, typename Out>
Status read_as(ByteReader& r, std::string_view what, Out* out) {
  T v{};
  PAGODA_RETURN_IF_ERROR(r.read(&v, what));
  *out = static_cast<Out>(v);
  return Status::Ok();
}

// Reads one integer/bool (as int64; uint64 bit-cast) or float scalar.
Status read_number(ByteReader& r, GgufValueType type, int64_t* int_out, double* float_out) {
  switch (type) {
    case GgufValueType::kUint8:
      return read_as<uint8_t>(r, "uint8", int_out);
    case GgufValueType::kInt8:
      return read_as<int8_t>(r, "int8", int_out);
    case GgufValueType::kBool: {
      PAGODA_RETURN_IF_ERROR(read_as<uint8_t>(r, "bool", int_out));
      *int_out = *int_out != 0;
      return Status::Ok();
    }
    case GgufValueType::kUint16:
      return read_as<uint16_t>(r, "uint16", int_out);
    case GgufValueType::kInt16:
      return read_as<int16_t>(r, "int16", int_out);
    case GgufValueType::kUint32:
      return read_as<uint32_t>(r, "uint32", int_out);
    case GgufValueType::kInt32:
      return read_as<int32_t>(r, "int32", int_out);
    case GgufValueType::kUint64:
      return read_as<uint64_t>(r, "uint64", int_out);
    case GgufValueType::kInt64:
      return read_as<int64_t>(r, "int64", int_out);
    case GgufValueType::kFloat32:
      return read_as<float>(r, "float32", float_out);
    case GgufValueType::kFloat64:
      return read_as<double>(r, "float64", float_out);
    default:
      return r.corrupt("internal: read_number on a non-number type");
  }
}

Status read_array(ByteReader& r, GgufArray* out, int depth);

Status read_value(ByteReader& r, GgufValueType type, GgufValue* out, int depth) {
  out->type = type;
  if (type == GgufValueType::kString) return r.read_string(&out->string_value, "string value");
  if (type == GgufValueType::kArray) return read_array(r, &out->array, depth + 1);
  return read_number(r, type, &out->int_value, &out->float_value);
}

Status read_array(ByteReader& r, GgufArray* out, int depth) {
  if (depth > kMaxArrayDepth)
    return r.corrupt(fmt::format("arrays nested deeper than {}", kMaxArrayDepth));
  uint32_t raw_type = 0;
  uint64_t count = 0;
  PAGODA_RETURN_IF_ERROR(r.read(&raw_type, "array element type"));
  if (!is_valid_value_type(raw_type))
    return r.corrupt(fmt::format("invalid array element type {}", raw_type));
  PAGODA_RETURN_IF_ERROR(r.read(&count, "array length"));
  out->type = static_cast<GgufValueType>(raw_type);
  if (count > r.remaining() / min_encoded_size(out->type)) {
    return r.corrupt(fmt::format("array of {} {} elements exceeds the {} bytes left", count,
                                 gguf_value_type_name(out->type), r.remaining()));
  }
  const size_t n = static_cast<size_t>(count);
  if (out->type == GgufValueType::kString) {
    out->strings.resize(n);
    for (std::string& s : out->strings) PAGODA_RETURN_IF_ERROR(r.read_string(&s, "array string"));
  } else if (out->type == GgufValueType::kArray) {
    out->arrays.resize(n);
    for (GgufArray& a : out->arrays) PAGODA_RETURN_IF_ERROR(read_array(r, &a, depth + 1));
  } else if (is_float_type(out->type)) {
    out->floats.resize(n);
    int64_t unused = 0;
    for (double& f : out->floats) PAGODA_RETURN_IF_ERROR(read_number(r, out->type, &unused, &f));
  } else {
    out->ints.resize(n);
    double unused = 0;
    for (int64_t& v : out->ints) PAGODA_RETURN_IF_ERROR(read_number(r, out->type, &v, &unused));
  }
  return Status::Ok();
}

// Byte size of a tensor of known type, with overflow checks.
Status tensor_size(ByteReader& r, const GgufTensorInfo& t, const GgufTypeTraits& traits,
                   uint64_t* nbytes) {
  int64_t numel = 1;
  for (int64_t d : t.dims) {
    if (__builtin_mul_overflow(numel, d, &numel)) {
      return r.corrupt(fmt::format("tensor '{}' element count overflows", t.name));
    }
  }
  const int64_t row = t.dims.empty() ? 1 : t.dims[0];  // a 0-d tensor is one element
  if (row % traits.block_size != 0) {
    return r.corrupt(
        fmt::format("tensor '{}' row length {} is not a multiple of the {} block size {}", t.name,
                    row, gguf_type_name(t.type), traits.block_size));
  }
  int64_t bytes = 0;
  if (__builtin_mul_overflow(numel / traits.block_size, traits.type_size, &bytes)) {
    return r.corrupt(fmt::format("tensor '{}' byte size overflows", t.name));
  }
  *nbytes = static_cast<uint64_t>(bytes);
  return Status::Ok();
}

}  // namespace

// Fills a GgufFile from its buffer (data_, size_, path_ already set).
class GgufFile::Parser {
 public:
  explicit Parser(GgufFile* f) : f_(f), r_(f->data_, f->size_, f->path_) {}

  Status run() {
    uint64_t num_tensors = 0, num_kv = 0;
    PAGODA_RETURN_IF_ERROR(read_header(&num_tensors, &num_kv));
    PAGODA_RETURN_IF_ERROR(read_metadata(num_kv));
    PAGODA_RETURN_IF_ERROR(read_alignment());
    PAGODA_RETURN_IF_ERROR(read_tensor_infos(num_tensors));
    return place_tensors();
  }

 private:
  Status read_header(uint64_t* num_tensors, uint64_t* num_kv) {
    uint32_t magic = 0, version = 0;
    PAGODA_RETURN_IF_ERROR(r_.read(&magic, "magic"));
    if (magic != kGgufMagic) return r_.corrupt("not a GGUF file (bad magic)");
    PAGODA_RETURN_IF_ERROR(r_.read(&version, "version"));
    if ((version & 0xFFFFu) == 0 && __builtin_bswap32(version) <= 3) {
      return make_error(ErrorCode::kUnsupported,
                        fmt::format("GGUF {}: big-endian GGUF files are not supported", f_->path_));
    }
    if (version == 1) {
      return make_error(
          ErrorCode::kUnsupported,
          fmt::format("GGUF {}: version 1 is not supported (convert it to v3)", f_->path_));
    }
    if (version != 2 && version != 3) {
      return make_error(
          ErrorCode::kUnsupported,
          fmt::format("GGUF {}: unsupported version {} (expected 2 or 3)", f_->path_, version));
    }
    f_->version_ = version;
    PAGODA_RETURN_IF_ERROR(r_.read(num_tensors, "tensor count"));
    PAGODA_RETURN_IF_ERROR(r_.read(num_kv, "metadata count"));
    return Status::Ok();
  }

  Status read_metadata(uint64_t num_kv) {
    // A key-value pair takes at least 8 (key length) + 4 (type) + 1 bytes.
    if (num_kv > r_.remaining() / 13) {
      return r_.corrupt(fmt::format("metadata count {} exceeds the file size", num_kv));
    }
    f_->metadata_.reserve(static_cast<size_t>(num_kv));
    for (uint64_t i = 0; i < num_kv; ++i) {
      std::string key;
      uint32_t raw_type = 0;
      PAGODA_RETURN_IF_ERROR(r_.read_string(&key, "metadata key"));
      PAGODA_RETURN_IF_ERROR(r_.read(&raw_type, "metadata value type"));
      if (!is_valid_value_type(raw_type)) {
        return r_.corrupt(
            fmt::format("metadata key '{}' has invalid value type {}", key, raw_type));
      }
      GgufValue value;
      PAGODA_RETURN_IF_ERROR(read_value(r_, static_cast<GgufValueType>(raw_type), &value, 0));
      if (!f_->metadata_index_.emplace(key, f_->metadata_.size()).second) {
        return r_.corrupt(fmt::format("duplicate metadata key '{}'", key));
      }
      f_->metadata_.emplace_back(std::move(key), std::move(value));
    }
    return Status::Ok();
  }

  Status read_alignment() {
    f_->alignment_ = kDefaultAlignment;
    const GgufValue* v = f_->get("general.alignment");
    if (v == nullptr) return Status::Ok();
    if (v->type != GgufValueType::kUint32 || v->int_value == 0 ||
        !std::has_single_bit(static_cast<uint64_t>(v->int_value))) {
      return r_.corrupt("general.alignment must be a power-of-two uint32");
    }
    f_->alignment_ = static_cast<uint64_t>(v->int_value);
    return Status::Ok();
  }

  Status read_tensor_infos(uint64_t num_tensors) {
    // A tensor info takes at least 8 (name) + 4 (n_dims) + 4 (type) + 8 (offset) bytes.
    if (num_tensors > r_.remaining() / 24) {
      return r_.corrupt(fmt::format("tensor count {} exceeds the file size", num_tensors));
    }
    f_->tensors_.reserve(static_cast<size_t>(num_tensors));
    for (uint64_t i = 0; i < num_tensors; ++i) {
      GgufTensorInfo t;
      PAGODA_RETURN_IF_ERROR(read_tensor_info(&t));
      if (!f_->tensor_index_.emplace(t.name, f_->tensors_.size()).second) {
        return r_.corrupt(fmt::format("duplicate tensor name '{}'", t.name));
      }
      f_->tensors_.push_back(std::move(t));
    }
    return Status::Ok();
  }

  Status read_tensor_info(GgufTensorInfo* t) {
    uint32_t n_dims = 0, raw_type = 0;
    PAGODA_RETURN_IF_ERROR(r_.read_string(&t->name, "tensor name"));
    PAGODA_RETURN_IF_ERROR(r_.read(&n_dims, "tensor dimension count"));
    if (n_dims > kMaxDims) {
      return r_.corrupt(
          fmt::format("tensor '{}' has {} dimensions (at most {})", t->name, n_dims, kMaxDims));
    }
    for (uint32_t d = 0; d < n_dims; ++d) {
      uint64_t dim = 0;
      PAGODA_RETURN_IF_ERROR(r_.read(&dim, "tensor dimension"));
      if (dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return r_.corrupt(fmt::format("tensor '{}' dimension {} is {}", t->name, d, dim));
      }
      t->dims.push_back(static_cast<int64_t>(dim));
    }
    PAGODA_RETURN_IF_ERROR(r_.read(&raw_type, "tensor type"));
    t->type = static_cast<GgufType>(raw_type);
    PAGODA_RETURN_IF_ERROR(r_.read(&t->offset, "tensor offset"));
    auto traits = gguf_type_traits(t->type);
    if (!traits) {
      return make_error(ErrorCode::kUnsupported,
                        fmt::format("GGUF {}: tensor '{}' has unknown ggml type {}", f_->path_,
                                    t->name, raw_type));
    }
    return tensor_size(r_, *t, *traits, &t->nbytes);
  }

  // Turns relative offsets into absolute ones and checks each tensor lies
  // inside the buffer.
  Status place_tensors() {
    const uint64_t pos = r_.pos();
    const uint64_t data_start = (pos + f_->alignment_ - 1) / f_->alignment_ * f_->alignment_;
    if (f_->tensors_.empty()) return Status::Ok();
    if (data_start > f_->size_)
      return r_.corrupt("tensor data section starts past the end of the file");
    const uint64_t data_size = f_->size_ - data_start;
    for (GgufTensorInfo& t : f_->tensors_) {
      if (t.offset % f_->alignment_ != 0) {
        return r_.corrupt(fmt::format("tensor '{}' offset {} is not a multiple of the alignment {}",
                                      t.name, t.offset, f_->alignment_));
      }
      if (t.offset > data_size || t.nbytes > data_size - t.offset) {
        return r_.corrupt(fmt::format("tensor '{}' data [{}, +{}) lies outside the {} data bytes",
                                      t.name, t.offset, t.nbytes, data_size));
      }
      t.offset += data_start;
    }
    return Status::Ok();
  }

  GgufFile* f_;
  ByteReader r_;
};

GgufFile::~GgufFile() = default;

Result<std::unique_ptr<GgufFile>> GgufFile::parse(const uint8_t* data, size_t size,
                                                  std::string name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->data_ = data;
  f->size_ = size;
  f->path_ = std::move(name);
  Parser parser(f.get());
  PAGODA_RETURN_IF_ERROR(parser.run());
  return f;
}

Result<std::unique_ptr<GgufFile>> GgufFile::open(const std::string& path) {
  PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> map, MappedFile::open(path));
  PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> f, parse(map->data(), map->size(), path));
  f->map_ = std::move(map);
  log_debug("GGUF {}: v{}, {} metadata keys, {} tensors", path, f->version_, f->metadata_.size(),
            f->tensors_.size());
  return f;
}

const GgufValue* GgufFile::get(std::string_view key) const {
  auto it = metadata_index_.find(key);
  return it == metadata_index_.end() ? nullptr : &metadata_[it->second].second;
}

bool GgufFile::has(std::string_view key) const {
  return get(key) != nullptr;
}

std::optional<std::string> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = get(key);
  if (v == nullptr || v->type != GgufValueType::kString) return std::nullopt;
  return v->string_value;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = get(key);
  if (v == nullptr || v->type == GgufValueType::kString || v->type == GgufValueType::kArray ||
      is_float_type(v->type)) {
    return std::nullopt;
  }
  if (v->type == GgufValueType::kUint64 && v->int_value < 0) return std::nullopt;  // > INT64_MAX
  return v->int_value;
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = get(key);
  if (v != nullptr && is_float_type(v->type)) return v->float_value;
  if (auto i = get_int(key)) return static_cast<double>(*i);
  return std::nullopt;
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = get(key);
  if (v == nullptr || v->type != GgufValueType::kBool) return std::nullopt;
  return v->int_value != 0;
}

const std::vector<std::string>* GgufFile::get_string_array(std::string_view key) const {
  const GgufValue* v = get(key);
  if (v == nullptr || v->type != GgufValueType::kArray || v->array.type != GgufValueType::kString)
    return nullptr;
  return &v->array.strings;
}

std::optional<std::vector<int64_t>> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue* v = get(key);
  if (v == nullptr || v->type != GgufValueType::kArray) return std::nullopt;
  const GgufValueType t = v->array.type;
  if (t == GgufValueType::kString || t == GgufValueType::kArray || is_float_type(t))
    return std::nullopt;
  return v->array.ints;
}

std::optional<std::vector<double>> GgufFile::get_float_array(std::string_view key) const {
  const GgufValue* v = get(key);
  if (v == nullptr || v->type != GgufValueType::kArray) return std::nullopt;
  if (is_float_type(v->array.type)) return v->array.floats;
  auto ints = get_int_array(key);
  if (!ints) return std::nullopt;
  return std::vector<double>(ints->begin(), ints->end());
}

std::vector<std::string> GgufFile::keys() const {
  std::vector<std::string> out;
  out.reserve(metadata_.size());
  for (const auto& kv : metadata_) out.push_back(kv.first);
  return out;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const uint8_t* GgufFile::tensor_data(const GgufTensorInfo& info) const {
  return data_ + info.offset;
}

}  // namespace pagoda
