// GGUF parser and dequantization against fixtures written by gguf-py
// (tools/gguf_fixtures.py), plus hand-built corrupt files.
#include "io/gguf.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "io_test_util.h"

namespace pagoda {
namespace {

using testing::data_path;
using testing::read_bytes;

nlohmann::json load_json(const std::string& path) {
  auto bytes = read_bytes(path);
  return nlohmann::json::parse(bytes.begin(), bytes.end());
}

std::unique_ptr<GgufFile> open_or_die(const std::string& path) {
  auto r = GgufFile::open(path);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? std::move(r).value() : nullptr;
}

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Little-endian GGUF writer for hand-made (often broken) files.
class Builder {
 public:
  Builder& u32(uint32_t v) { return raw(&v, 4); }
  Builder& u64(uint64_t v) { return raw(&v, 8); }
  Builder& str(const std::string& s) {
    u64(s.size());
    bytes_ += s;
    return *this;
  }
  Builder& header(uint32_t version, uint64_t num_tensors, uint64_t num_kv) {
    return u32(0x46554747).u32(version).u64(num_tensors).u64(num_kv);
  }
  Builder& kv_u32(const std::string& key, uint32_t v) { return str(key).u32(4).u32(v); }
  Builder& tensor(const std::string& name, std::vector<uint64_t> dims, uint32_t type,
                  uint64_t offset) {
    str(name).u32(static_cast<uint32_t>(dims.size()));
    for (uint64_t d : dims) u64(d);
    return u32(type).u64(offset);
  }
  Builder& pad_to(size_t alignment) {
    while (bytes_.size() % alignment != 0) bytes_ += '\0';
    return *this;
  }
  Builder& zeros(size_t n) {
    bytes_.append(n, '\0');
    return *this;
  }
  const std::string& bytes() const { return bytes_; }

 private:
  Builder& raw(const void* p, size_t n) {
    bytes_.append(static_cast<const char*>(p), n);
    return *this;
  }
  std::string bytes_;
};

Result<std::unique_ptr<GgufFile>> parse(const std::string& bytes) {
  return GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "test.gguf");
}

void expect_error(const std::string& bytes, ErrorCode code, const std::string& fragment) {
  auto r = parse(bytes);
  ASSERT_FALSE(r.ok()) << "expected an error containing '" << fragment << "'";
  EXPECT_EQ(r.error().code, code) << r.error().message;
  EXPECT_NE(r.error().message.find(fragment), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("test.gguf"), std::string::npos) << r.error().message;
}

TEST(Gguf, MetadataOfEveryValueType) {
  auto f = open_or_die(data_path("metadata.gguf"));
  ASSERT_NE(f, nullptr);
  const nlohmann::json expected = load_json(data_path("metadata.json"));
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->alignment(), 64u);
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_EQ(f->keys().front(), "general.architecture");
  EXPECT_EQ(f->get_string("general.architecture"), "pagoda-test");
  for (const char* key :
       {"test.u8", "test.i8", "test.u16", "test.i16", "test.u32", "test.i32", "test.i64"}) {
    EXPECT_EQ(f->get_int(key), expected[key].get<int64_t>()) << key;
    EXPECT_EQ(f->get_float(key), static_cast<double>(expected[key].get<int64_t>())) << key;
  }
  // 18e18 does not fit int64: get_int refuses, the raw value keeps the bits.
  EXPECT_EQ(f->get_int("test.u64"), std::nullopt);
  ASSERT_NE(f->get("test.u64"), nullptr);
  EXPECT_EQ(static_cast<uint64_t>(f->get("test.u64")->int_value),
            expected["test.u64"].get<uint64_t>());
  EXPECT_EQ(f->get("test.u64")->type, GgufValueType::kUint64);
  EXPECT_EQ(f->get_float("test.f32"), expected["test.f32"].get<double>());
  EXPECT_EQ(f->get_float("test.f64"), expected["test.f64"].get<double>());
  EXPECT_EQ(f->get_int("test.f32"), std::nullopt);
  EXPECT_EQ(f->get_bool("test.bool_true"), true);
  EXPECT_EQ(f->get_bool("test.bool_false"), false);
  EXPECT_EQ(f->get_bool("test.u8"), std::nullopt);
  EXPECT_EQ(f->get_string("test.string"), expected["test.string"].get<std::string>());
  EXPECT_EQ(f->get_string("test.empty_string"), "");
  EXPECT_EQ(f->get_string("test.u8"), std::nullopt);
  EXPECT_FALSE(f->has("test.absent"));
  EXPECT_EQ(f->get_int("test.absent"), std::nullopt);

  ASSERT_NE(f->get_string_array("test.arr_str"), nullptr);
  EXPECT_EQ(*f->get_string_array("test.arr_str"),
            expected["test.arr_str"].get<std::vector<std::string>>());
  EXPECT_EQ(f->get_string_array("test.arr_u16"), nullptr);
  for (const char* key : {"test.arr_u16", "test.arr_i8", "test.arr_u64"}) {
    EXPECT_EQ(f->get_int_array(key), expected[key].get<std::vector<int64_t>>()) << key;
  }
  EXPECT_EQ(f->get_int_array("test.arr_bool"), (std::vector<int64_t>{1, 0, 1}));
  EXPECT_EQ(f->get_float_array("test.arr_f32"),
            expected["test.arr_f32"].get<std::vector<double>>());
  EXPECT_EQ(f->get_float_array("test.arr_f64"),
            expected["test.arr_f64"].get<std::vector<double>>());
  EXPECT_EQ(f->get_int_array("test.arr_f32"), std::nullopt);
  const GgufValue* nested = f->get("test.arr_nested");
  ASSERT_NE(nested, nullptr);
  ASSERT_EQ(nested->array.type, GgufValueType::kArray);
  ASSERT_EQ(nested->array.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(nested->array.arrays[i].ints,
              expected["test.arr_nested"][i].get<std::vector<int64_t>>());
  }
}

TEST(Gguf, DequantizesEveryTypeBitExactly) {
  auto f = open_or_die(data_path("quants.gguf"));
  ASSERT_NE(f, nullptr);
  const nlohmann::json expected = load_json(data_path("quants.json"));
  ASSERT_EQ(f->tensors().size(), expected.size());
  for (const auto& [name, e] : expected.items()) {
    SCOPED_TRACE(name);
    const GgufTensorInfo* t = f->find_tensor(name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(gguf_type_name(t->type), e["type"].get<std::string>());
    EXPECT_EQ(t->dims, e["dims"].get<std::vector<int64_t>>());
    EXPECT_TRUE(gguf_can_dequantize(t->type));
    const auto bits = e["bits"].get<std::vector<uint32_t>>();
    ASSERT_EQ(static_cast<size_t>(t->numel()), bits.size());
    std::vector<float> out(bits.size(), -12345.0f);
    ASSERT_TRUE(dequantize(t->type, f->tensor_data(*t), t->numel(), out.data()).ok());
    size_t mismatches = 0;
    for (size_t i = 0; i < bits.size(); ++i) mismatches += float_bits(out[i]) != bits[i];
    EXPECT_EQ(mismatches, 0u);
  }
}

TEST(Gguf, DequantizeRejectsUnsupportedTypeAndPartialBlocks) {
  std::vector<uint8_t> raw(292, 0);
  std::vector<float> out(256);
  Status s = dequantize(GgufType::kQ8_K, raw.data(), 256, out.data());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(s.error().message.find("Q8_K"), std::string::npos);
  s = dequantize(GgufType::kQ4_0, raw.data(), 31, out.data());
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("block size 32"), std::string::npos);
  EXPECT_FALSE(gguf_can_dequantize(GgufType::kIQ2_XXS));
  EXPECT_STREQ(gguf_type_name(static_cast<GgufType>(99)), "unknown");
}

// The block DTypes that keep GGUF tensors quantized have the file's geometry.
TEST(Gguf, BlockDtypesMatchGgufGeometry) {
  int num_block = 0;
  for (uint32_t v = 0; v < 64; ++v) {
    const auto type = static_cast<GgufType>(v);
    const std::optional<DType> d = gguf_block_dtype(type);
    if (!d) continue;
    ++num_block;
    SCOPED_TRACE(gguf_type_name(type));
    EXPECT_TRUE(is_block_dtype(*d));
    EXPECT_EQ(dtype_block_elems(*d), gguf_type_traits(type)->block_size);
    EXPECT_EQ(static_cast<int64_t>(dtype_block_bytes(*d)), gguf_type_traits(type)->type_size);
  }
  EXPECT_EQ(num_block, 10);
  EXPECT_FALSE(gguf_block_dtype(GgufType::kF16).has_value());
  EXPECT_FALSE(gguf_block_dtype(GgufType::kQ8_K).has_value());
}

TEST(Gguf, Version2ParsesLikeVersion3) {
  auto bytes = read_bytes(data_path("quants.gguf"));
  bytes[4] = 2;  // v2 and v3 share the layout
  auto r = GgufFile::parse(bytes.data(), bytes.size(), "v2.gguf");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ((*r)->version(), 2u);
  EXPECT_EQ((*r)->tensors().size(), 13u);
}

TEST(Gguf, RejectsV1BigEndianAndUnknownVersions) {
  expect_error(Builder().header(1, 0, 0).bytes(), ErrorCode::kUnsupported, "version 1");
  expect_error(Builder().header(0x03000000, 0, 0).bytes(), ErrorCode::kUnsupported, "big-endian");
  expect_error(Builder().header(4, 0, 0).bytes(), ErrorCode::kUnsupported, "version 4");
  expect_error(Builder().u32(0x46554746).u32(3).u64(0).u64(0).bytes(), ErrorCode::kCorrupt,
               "magic");
  expect_error("", ErrorCode::kCorrupt, "truncated");
}

TEST(Gguf, RejectsCorruptMetadata) {
  expect_error(Builder().header(3, 0, 1ull << 60).bytes(), ErrorCode::kCorrupt, "metadata count");
  expect_error(Builder().header(3, 0, 1).u64(1ull << 62).zeros(16).bytes(), ErrorCode::kCorrupt,
               "exceeds");
  expect_error(Builder().header(3, 0, 1).str("k").u32(13).u32(0).bytes(), ErrorCode::kCorrupt,
               "invalid value type");
  expect_error(Builder().header(3, 0, 1).str("k").u32(9).u32(4).u64(1ull << 61).zeros(8).bytes(),
               ErrorCode::kCorrupt, "array of");
  expect_error(Builder().header(3, 0, 1).str("k").u32(9).u32(99).u64(0).bytes(),
               ErrorCode::kCorrupt, "array element type");
  expect_error(Builder().header(3, 0, 2).kv_u32("k", 1).kv_u32("k", 2).bytes(), ErrorCode::kCorrupt,
               "duplicate");
  expect_error(Builder().header(3, 0, 1).kv_u32("general.alignment", 24).bytes(),
               ErrorCode::kCorrupt, "alignment");
  expect_error(Builder().header(3, 0, 1).str("k").u32(4).bytes(), ErrorCode::kCorrupt, "truncated");
  Builder deep;
  deep.header(3, 0, 1).str("k").u32(9);
  for (int i = 0; i < 20; ++i) deep.u32(9).u64(1);
  expect_error(deep.u32(4).u64(0).bytes(), ErrorCode::kCorrupt, "nested");
}

TEST(Gguf, AcceptsEmptyArraysAndStrings) {
  auto r =
      parse(Builder().header(3, 0, 2).str("a").u32(9).u32(8).u64(0).str("").u32(8).str("").bytes());
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_NE((*r)->get_string_array("a"), nullptr);
  EXPECT_TRUE((*r)->get_string_array("a")->empty());
  EXPECT_EQ((*r)->get_string(""), "");
}

TEST(Gguf, RejectsCorruptTensorInfos) {
  auto one = [](std::vector<uint64_t> dims, uint32_t type, uint64_t offset, size_t data) {
    Builder b;
    b.header(3, 1, 0).tensor("w", std::move(dims), type, offset).pad_to(32).zeros(data);
    return b.bytes();
  };
  ASSERT_TRUE(parse(one({32, 2}, 0, 0, 256)).ok());
  expect_error(one({1, 1, 1, 1, 1}, 0, 0, 4), ErrorCode::kCorrupt, "dimensions");
  expect_error(one({32}, 99, 0, 128), ErrorCode::kUnsupported, "unknown ggml type 99");
  expect_error(one({32, 2}, 0, 0, 255), ErrorCode::kCorrupt, "outside");
  expect_error(one({32}, 0, 32, 128), ErrorCode::kCorrupt, "outside");
  expect_error(one({32}, 0, 8, 160), ErrorCode::kCorrupt, "alignment");
  expect_error(one({32}, 0, ~0ull - 31, 128), ErrorCode::kCorrupt, "outside");
  expect_error(one({1ull << 40, 1ull << 40}, 0, 0, 0), ErrorCode::kCorrupt, "overflows");
  expect_error(one({1ull << 63, 1}, 0, 0, 0), ErrorCode::kCorrupt, "dimension");
  expect_error(one({1ull << 61}, 0, 0, 0), ErrorCode::kCorrupt, "overflows");
  expect_error(one({33}, 2, 0, 64), ErrorCode::kCorrupt, "block size");
  expect_error(one({}, 2, 0, 64), ErrorCode::kCorrupt, "block size");
  expect_error(Builder().header(3, 1ull << 59, 0).bytes(), ErrorCode::kCorrupt, "tensor count");
  Builder dup;
  dup.header(3, 2, 0).tensor("w", {8}, 0, 0).tensor("w", {8}, 0, 32).pad_to(32).zeros(64);
  expect_error(dup.bytes(), ErrorCode::kCorrupt, "duplicate tensor");
}

// Every truncation of a valid file is an error (until the last tensor's data
// is complete), and never a crash; so is every single-byte corruption.
TEST(Gguf, TruncatedAndBitFlippedFilesFailCleanly) {
  for (const char* name : {"metadata.gguf", "quants.gguf", "llama_tiny.gguf"}) {
    SCOPED_TRACE(name);
    const auto bytes = read_bytes(data_path(name));
    auto full = GgufFile::parse(bytes.data(), bytes.size(), name);
    ASSERT_TRUE(full.ok());
    size_t needed = 0;
    for (const GgufTensorInfo& t : (*full)->tensors())
      needed = std::max<size_t>(needed, t.offset + t.nbytes);
    size_t first_ok = bytes.size();
    for (size_t n = 0; n < bytes.size(); ++n) {
      std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
      if (GgufFile::parse(prefix.data(), prefix.size(), name).ok()) {
        first_ok = n;
        break;
      }
    }
    EXPECT_GE(first_ok, needed);
    if (!(*full)->tensors().empty()) {
      EXPECT_EQ(first_ok, needed);
    }
    const size_t header_end = std::min<size_t>(bytes.size(), 4096);
    std::vector<uint8_t> mutated = bytes;
    for (size_t i = 0; i < header_end; ++i) {
      mutated[i] ^= 0xFF;
      (void)GgufFile::parse(mutated.data(), mutated.size(), name);  // must not crash
      mutated[i] = bytes[i];
    }
  }
}

TEST(Gguf, OpenMissingFileNamesIt) {
  auto r = GgufFile::open("/nonexistent/dir/model.gguf");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, ErrorCode::kNotFound);
  EXPECT_NE(r.error().message.find("/nonexistent/dir/model.gguf"), std::string::npos);
}

// The vocab-only GGUFs from llama.cpp, against what gguf-py reads from them.
TEST(Gguf, LlamaCppVocabFilesMatchGgufPy) {
  const nlohmann::json expected = load_json(data_path("vocab_expected.json"));
  const std::string dir = testing::shared_path("models/llama.cpp-vocab-tests");
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << "shared vocab GGUFs absent: " << dir;
  for (const auto& [file, e] : expected.items()) {
    SCOPED_TRACE(file);
    auto f = open_or_die(dir + "/" + file);
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->version(), e["version"].get<uint32_t>());
    EXPECT_EQ(f->keys(), e["keys"].get<std::vector<std::string>>());
    EXPECT_EQ(f->tensors().size(), e["num_tensors"].get<size_t>());
    const auto* tokens = f->get_string_array("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    ASSERT_EQ(tokens->size(), e["num_tokens"].get<size_t>());
    for (size_t i = 0; i < e["tokens_head"].size(); ++i)
      EXPECT_EQ((*tokens)[i], e["tokens_head"][i]);
    EXPECT_EQ(tokens->back(), e["token_last"].get<std::string>());
    EXPECT_EQ(f->get_string("tokenizer.ggml.model"), e["tokenizer.ggml.model"].get<std::string>());
    if (e.contains("num_merges")) {
      const auto* merges = f->get_string_array("tokenizer.ggml.merges");
      ASSERT_NE(merges, nullptr);
      EXPECT_EQ(merges->size(), e["num_merges"].get<size_t>());
      EXPECT_EQ(merges->back(), e["merge_last"].get<std::string>());
    }
    if (e.contains("scores_tail_bits")) {
      auto scores = f->get_float_array("tokenizer.ggml.scores");
      ASSERT_TRUE(scores.has_value());
      const auto bits = e["scores_tail_bits"].get<std::vector<uint32_t>>();
      for (size_t i = 0; i < 3; ++i) {
        EXPECT_EQ(float_bits(static_cast<float>((*scores)[scores->size() - 3 + i])), bits[i]);
      }
    }
    if (e.contains("token_type_sum")) {
      auto types = f->get_int_array("tokenizer.ggml.token_type");
      ASSERT_TRUE(types.has_value());
      int64_t sum = 0;
      for (int64_t t : *types) sum += t;
      EXPECT_EQ(sum, e["token_type_sum"].get<int64_t>());
    }
    for (const char* key : {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id"}) {
      if (e.contains(key)) {
        EXPECT_EQ(f->get_int(key), e[key].get<int64_t>()) << key;
      }
    }
  }
}

}  // namespace
}  // namespace pagoda
