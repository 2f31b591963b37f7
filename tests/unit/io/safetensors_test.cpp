// safetensors header validation and the safetensors WeightSource, on files
// built here byte by byte (single, sharded, corrupt) and on the shared
// stories260K model.
#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "core/half.h"
#include "io_test_util.h"

namespace pagoda {
namespace {

using testing::TempDir;
using testing::write_bytes;

std::string u64_le(uint64_t v) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &v, 8);
  return s;
}

// header JSON text + data bytes → file bytes.
std::string file_bytes(const std::string& header, const std::string& data) {
  return u64_le(header.size()) + header + data;
}

template <typename T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// A well-formed file: a [2, 3] f32 tensor "a" then a [4] bf16 tensor "b".
struct SampleFile {
  std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, -7.0f};
  std::vector<uint16_t> b = {float_to_bf16(1.0f), float_to_bf16(-0.5f), float_to_bf16(3.0f),
                             float_to_bf16(8.0f)};
  std::string bytes() const {
    const std::string header = R"({"__metadata__":{"format":"pt"},)"
                               R"("a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]},)"
                               R"("b":{"dtype":"BF16","shape":[4],"data_offsets":[24,32]}})";
    return file_bytes(header, raw(a) + raw(b));
  }
};

Result<SafetensorsHeader> parse(const std::string& bytes) {
  return parse_safetensors_header(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                                  "t.safetensors");
}

void expect_header_error(const std::string& header, const std::string& data,
                         const std::string& fragment, ErrorCode code = ErrorCode::kCorrupt) {
  auto r = parse(file_bytes(header, data));
  ASSERT_FALSE(r.ok()) << header;
  EXPECT_EQ(r.error().code, code) << r.error().message;
  EXPECT_NE(r.error().message.find(fragment), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("t.safetensors"), std::string::npos) << r.error().message;
}

TEST(Safetensors, ParsesHeader) {
  auto h = parse(SampleFile().bytes());
  ASSERT_TRUE(h.ok()) << h.error().message;
  ASSERT_EQ(h->tensors.size(), 2u);
  const SafetensorsEntry& a = h->tensors[0];
  EXPECT_EQ(a.name, "a");
  EXPECT_EQ(a.dtype, DType::kF32);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.begin, h->data_start);
  EXPECT_EQ(a.end, h->data_start + 24);
  EXPECT_EQ(h->tensors[1].dtype, DType::kBF16);
  EXPECT_EQ(h->metadata.at("format"), "pt");
}

// A file written by the safetensors package (tools/gguf_fixtures.py).
TEST(Safetensors, ReadsFileWrittenByReferenceLibrary) {
  const auto bytes = testing::read_bytes(testing::data_path("reference.safetensors"));
  auto h = parse_safetensors_header(bytes.data(), bytes.size(), "reference.safetensors");
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_EQ(h->metadata.at("format"), "np");
  ASSERT_EQ(h->tensors.size(), 3u);
  std::map<std::string, const SafetensorsEntry*> by_name;
  for (const SafetensorsEntry& e : h->tensors) by_name[e.name] = &e;
  const SafetensorsEntry& w = *by_name.at("w");
  EXPECT_EQ(w.dtype_name, "F32");
  EXPECT_EQ(w.shape, (std::vector<int64_t>{3, 4}));
  for (int i = 0; i < 12; ++i) {
    float v;
    std::memcpy(&v, bytes.data() + w.begin + 4 * i, 4);
    EXPECT_EQ(v, 0.5f * static_cast<float>(i));
  }
  const SafetensorsEntry& f16 = *by_name.at("h");
  EXPECT_EQ(f16.dtype, DType::kF16);
  const float want[] = {1.0f, -2.5f, 0.0f, 65504.0f, 5.96046448e-08f};
  for (int i = 0; i < 5; ++i) {
    uint16_t hv;
    std::memcpy(&hv, bytes.data() + f16.begin + 2 * i, 2);
    EXPECT_EQ(fp16_to_float(hv), want[i]) << i;
  }
  const SafetensorsEntry& idx = *by_name.at("idx");
  EXPECT_EQ(idx.dtype_name, "I64");
  EXPECT_EQ(idx.dtype, DType::kI64);
  int64_t i1;
  std::memcpy(&i1, bytes.data() + idx.begin + 8, 8);
  EXPECT_EQ(i1, -1);
}

TEST(Safetensors, RejectsCorruptHeaders) {
  const std::string d32(32, '\0');
  expect_header_error("{", d32, "not valid JSON");
  expect_header_error("[1,2]", d32, "not a JSON object");
  expect_header_error(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,20]}})", d32,
                      "needs 24 bytes");
  expect_header_error(R"({"a":{"dtype":"F32","shape":[2,3],"data_offsets":[8,32]}})",
                      std::string(31, '\0'), "past the 31 data bytes");
  expect_header_error(R"({"a":{"dtype":"F32","shape":[2,-3],"data_offsets":[0,24]}})", d32,
                      "negative");
  expect_header_error(R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,24]}})", d32,
                      "non-integer");
  expect_header_error(R"({"a":{"dtype":"F32","shape":"x","data_offsets":[0,24]}})", d32,
                      "not an array");
  expect_header_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", d32, "reversed");
  expect_header_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", d32,
                      "two non-negative");
  expect_header_error(R"({"a":{"dtype":"F32","shape":[1]}})", d32, "missing data_offsets");
  expect_header_error(R"({"a":{"shape":[1],"data_offsets":[0,4]}})", d32, "missing dtype");
  expect_header_error(R"({"a":{"dtype":"F32","data_offsets":[0,4]}})", d32, "missing shape");
  expect_header_error(R"({"a":7})", d32, "not an object");
  expect_header_error(R"({"a":{"dtype":"Q4","shape":[1],"data_offsets":[0,4]}})", d32,
                      "unknown dtype 'Q4'", ErrorCode::kUnsupported);
  expect_header_error(
      R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,4]}})",
      d32, "overflows");
  expect_header_error(R"({"__metadata__":{"k":1}})", d32, "not a string");
  // header length field larger than the file / than the format's limit
  auto r = parse(u64_le(1000) + "{}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("exceeds the file size"), std::string::npos);
  r = parse(u64_le(1ull << 40) + "{}");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("limit"), std::string::npos);
  r = parse("abc");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("shorter than"), std::string::npos);
}

TEST(Safetensors, AcceptsZeroSizedTensorsAndPaddedHeaders) {
  auto h = parse(file_bytes(R"({"e":{"dtype":"F16","shape":[0,5],"data_offsets":[0,0]}}   )", ""));
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_EQ(h->tensors[0].shape, (std::vector<int64_t>{0, 5}));
}

TEST(Safetensors, EveryTruncationFailsCleanly) {
  const std::string bytes = SampleFile().bytes();
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    EXPECT_FALSE(parse_safetensors_header(prefix.data(), prefix.size(), "t").ok()) << n;
  }
}

TEST(SafetensorsSource, SingleFileViewsWithoutCopy) {
  TempDir dir;
  const SampleFile sample;
  write_bytes(dir.path() / "model.safetensors", sample.bytes());
  auto w = open_safetensors_folder(dir.path().string());
  ASSERT_TRUE(w.ok()) << w.error().message;
  ASSERT_EQ((*w)->tensors().size(), 2u);
  const TensorInfo* b = (*w)->find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kBF16);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{4}));
  EXPECT_EQ(b->file_bytes, 8u);
  auto a = (*w)->read("a");
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->dtype, DType::kF32);
  EXPECT_EQ(a->numel(), 6);
  EXPECT_TRUE(a->owned.empty()) << "aligned data must be a view into the map";
  EXPECT_EQ(std::memcmp(a->data, sample.a.data(), 24), 0);
  auto bt = (*w)->read("b");
  ASSERT_TRUE(bt.ok());
  EXPECT_EQ(std::memcmp(bt->data, sample.b.data(), 8), 0);
  auto missing = (*w)->read("zzz");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE((*w)->describe().find("2 tensors"), std::string::npos);
}

TEST(SafetensorsSource, MisalignedDataIsCopied) {
  TempDir dir;
  const std::vector<float> v = {1.0f, 2.0f};
  const std::string header =
      R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";  // odd length
  ASSERT_NE((8 + header.size()) % 4, 0u);
  write_bytes(dir.path() / "model.safetensors", file_bytes(header, raw(v)));
  auto w = open_safetensors_folder(dir.path().string());
  ASSERT_TRUE(w.ok()) << w.error().message;
  auto x = (*w)->read("x");
  ASSERT_TRUE(x.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(x->data) % 4, 0u);
  EXPECT_EQ(static_cast<const float*>(x->data)[1], 2.0f);
}

TEST(SafetensorsSource, RejectsUnsupportedDtypeNamingTensor) {
  TempDir dir;
  write_bytes(dir.path() / "model.safetensors",
              file_bytes(R"({"idx":{"dtype":"U16","shape":[4],"data_offsets":[0,8]}})",
                         std::string(8, '\0')));
  auto w = open_safetensors_folder(dir.path().string());
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(w.error().message.find("'idx'"), std::string::npos) << w.error().message;
  EXPECT_NE(w.error().message.find("U16"), std::string::npos) << w.error().message;
}

void write_sharded(const std::filesystem::path& dir, const std::string& index) {
  const std::vector<float> a = {1, 2, 3}, b = {4, 5};
  write_bytes(dir / "model-00001-of-00002.safetensors",
              file_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})", raw(a)));
  write_bytes(dir / "model-00002-of-00002.safetensors",
              file_bytes(R"({"b":{"dtype":"F32","shape":[1,2],"data_offsets":[0,8]}})", raw(b)));
  write_bytes(dir / "model.safetensors.index.json", index);
}

TEST(SafetensorsSource, ShardedThroughIndex) {
  TempDir dir;
  write_sharded(
      dir.path(),
      R"({"metadata":{"total_size":20},"weight_map":{)"
      R"("a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}})");
  auto w = open_safetensors_folder(dir.path().string());
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ((*w)->tensors().size(), 2u);
  auto b = (*w)->read("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(static_cast<const float*>(b->data)[1], 5.0f);
  auto a = (*w)->read("a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(static_cast<const float*>(a->data)[2], 3.0f);
  EXPECT_NE((*w)->describe().find("2 safetensors shards"), std::string::npos);
}

TEST(SafetensorsSource, ShardedIndexErrors) {
  {
    TempDir dir;
    write_sharded(dir.path(), R"({"weight_map":{"a":"model-00001-of-00002.safetensors","c":)"
                              R"("model-00002-of-00002.safetensors"}})");
    auto w = open_safetensors_folder(dir.path().string());
    ASSERT_FALSE(w.ok());
    EXPECT_NE(w.error().message.find("'c'"), std::string::npos) << w.error().message;
  }
  {
    TempDir dir;
    write_sharded(dir.path(), R"({"weight_map":{"a":"../model-00001-of-00002.safetensors"}})");
    auto w = open_safetensors_folder(dir.path().string());
    ASSERT_FALSE(w.ok());
    EXPECT_NE(w.error().message.find("same folder"), std::string::npos) << w.error().message;
  }
  {
    TempDir dir;
    write_sharded(dir.path(), R"({"weight_map":{"a":"model-00009-of-00009.safetensors"}})");
    auto w = open_safetensors_folder(dir.path().string());
    ASSERT_FALSE(w.ok());
    EXPECT_EQ(w.error().code, ErrorCode::kNotFound);
    EXPECT_NE(w.error().message.find("model-00009-of-00009.safetensors"), std::string::npos);
  }
  {
    TempDir dir;
    write_sharded(dir.path(), R"({"metadata":{}})");
    auto w = open_safetensors_folder(dir.path().string());
    ASSERT_FALSE(w.ok());
    EXPECT_NE(w.error().message.find("weight_map"), std::string::npos);
  }
  {
    TempDir dir;  // the same tensor in two shards
    const std::vector<float> a = {1, 2, 3};
    const std::string shard =
        file_bytes(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})", raw(a));
    write_bytes(dir.path() / "s1.safetensors", shard);
    write_bytes(dir.path() / "s2.safetensors", shard);
    write_bytes(dir.path() / "model.safetensors.index.json",
                R"({"weight_map":{"a":"s1.safetensors","b":"s2.safetensors"}})");
    auto w = open_safetensors_folder(dir.path().string());
    ASSERT_FALSE(w.ok());
    EXPECT_NE(w.error().message.find("appears in both"), std::string::npos) << w.error().message;
  }
}

TEST(SafetensorsSource, EmptyFolderSaysWhatIsExpected) {
  TempDir dir;
  auto w = open_safetensors_folder(dir.path().string());
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().code, ErrorCode::kNotFound);
  EXPECT_NE(w.error().message.find("model.safetensors"), std::string::npos);
}

// The shared stories260K checkpoint: every tensor readable, shapes per config.
TEST(SafetensorsSource, Stories260K) {
  const std::string dir = testing::shared_path("models/stories260K");
  if (!std::filesystem::exists(dir + "/model.safetensors")) GTEST_SKIP() << "absent: " << dir;
  auto w = open_safetensors_folder(dir);
  ASSERT_TRUE(w.ok()) << w.error().message;
  const TensorInfo* emb = (*w)->find("model.embed_tokens.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{512, 64}));
  EXPECT_EQ(emb->dtype, DType::kF32);
  const TensorInfo* k = (*w)->find("model.layers.4.self_attn.k_proj.weight");
  ASSERT_NE(k, nullptr);
  EXPECT_EQ(k->shape, (std::vector<int64_t>{32, 64}));
  for (const TensorInfo& t : (*w)->tensors()) {
    auto r = (*w)->read(t.name);
    ASSERT_TRUE(r.ok()) << t.name;
    EXPECT_EQ(static_cast<uint64_t>(r->numel()) * 4, t.file_bytes) << t.name;
  }
}

}  // namespace
}  // namespace pagoda
