// PyTorch zip checkpoints (io/torch_checkpoint.h, io/torch_pickle.h,
// io/zip_archive.h) on archives built here byte by byte as torch.save lays
// them out (a protocol-2 pickle of an OrderedDict of _rebuild_tensor_v2
// calls over persistent-id storages): dtypes, shared storages, shards, and
// refusals (a foreign global or opcode, a truncated file, a compressed
// entry, a strided view, a big-endian archive).
#include "io/torch_checkpoint.h"

#include <gtest/gtest.h>

#include <cstring>
#include <tuple>

#include "core/half.h"
#include "io/zip_archive.h"
#include "io_test_util.h"

namespace pagoda {
namespace {

using testing::TempDir;
using testing::write_bytes;

std::string le(uint64_t v, int n) {
  std::string s;
  for (int k = 0; k < n; ++k) s += static_cast<char>((v >> (8 * k)) & 0xFF);
  return s;
}

template <typename T>
std::string raw(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// A zip of entries (name, bytes, compression method), sizes and offsets as
// a stored writer puts them (method 8 entries just carry the bytes given).
std::string zip_of(const std::vector<std::tuple<std::string, std::string, int>>& entries) {
  std::string out, central;
  for (const auto& [name, data, method] : entries) {
    const uint64_t local = out.size();
    out += le(0x04034b50, 4) + le(20, 2) + le(0, 2) + le(method, 2) + le(0, 4) + le(0, 4) +
           le(data.size(), 4) + le(data.size(), 4) + le(name.size(), 2) + le(0, 2) + name + data;
    central += le(0x02014b50, 4) + le(20, 2) + le(20, 2) + le(0, 2) + le(method, 2) + le(0, 4) +
               le(0, 4) + le(data.size(), 4) + le(data.size() + (method ? 7 : 0), 4) +
               le(name.size(), 2) + le(0, 2) + le(0, 2) + le(0, 2) + le(0, 2) + le(0, 4) +
               le(local, 4) + name;
  }
  const uint64_t cd = out.size();
  out += central;
  out += le(0x06054b50, 4) + le(0, 2) + le(0, 2) + le(entries.size(), 2) + le(entries.size(), 2) +
         le(central.size(), 4) + le(cd, 4) + le(0, 2);
  return out;
}

struct Record {
  std::string name, storage_type, key;
  int64_t numel, offset;
  std::vector<int64_t> shape, stride;
};

std::string binunicode(const std::string& s) {
  std::string out = "X";
  out += le(s.size(), 4);
  return out + s;
}
std::string int_tuple(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (int64_t x : v) {
    s += 'J';
    s += le(static_cast<uint64_t>(x), 4);
  }
  return s + "t";
}

// torch.save's pickle of an OrderedDict of tensors, with _metadata BUILD.
std::string state_dict_pickle(const std::vector<Record>& records) {
  std::string p =
      std::string("\x80\x02", 2) + "ccollections\nOrderedDict\n" + std::string("q\x00", 2) + ")R(";
  for (const Record& r : records) {
    p += binunicode(r.name) + "ctorch._utils\n_rebuild_tensor_v2\n((" + binunicode("storage") +
         "ctorch\n" + r.storage_type + "\n" + binunicode(r.key) + binunicode("cpu") + "J" +
         le(static_cast<uint64_t>(r.numel), 4) + "tQJ" + le(static_cast<uint64_t>(r.offset), 4) +
         int_tuple(r.shape) + int_tuple(r.stride) + "\x89" + std::string("h\x00", 2) + ")RtR";
  }
  p += "u}" + binunicode("_metadata") + std::string("h\x00", 2) + ")R" + binunicode("") + "}" +
       binunicode("version") + "K\x01sssb.";
  return p;
}

// `s` with its first `from` replaced by `to`.
std::string replaced(const std::string& s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return s.substr(0, at) + to + s.substr(at + from.size());
}

Result<std::vector<TorchCheckpointTensor>> parse(const std::string& bytes) {
  return parse_torch_checkpoint(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                                "t.bin");
}

void expect_error(const std::string& bytes, ErrorCode code, const std::string& fragment) {
  auto r = parse(bytes);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, code) << r.error().message;
  EXPECT_NE(r.error().message.find(fragment), std::string::npos) << r.error().message;
}

// f32 "a" [2, 3], f16 "b" [4], bf16 "c" [2, 2], each its own storage.
struct ThreeDtypes {
  std::vector<float> a = {1.5f, -2.0f, 3.25f, 0.0f, 1e-3f, -7.0f};
  std::vector<uint16_t> b = {float_to_fp16(1.0f), float_to_fp16(-0.5f), float_to_fp16(3.0f),
                             float_to_fp16(8.0f)};
  std::vector<uint16_t> c = {float_to_bf16(2.0f), float_to_bf16(-4.0f), float_to_bf16(0.25f),
                             float_to_bf16(9.0f)};
  std::string pickle() const {
    return state_dict_pickle({{"a", "FloatStorage", "0", 6, 0, {2, 3}, {3, 1}},
                              {"b", "HalfStorage", "1", 4, 0, {4}, {1}},
                              {"c", "BFloat16Storage", "2", 4, 0, {2, 2}, {2, 1}}});
  }
  std::string bytes(const std::string& pkl) const {
    return zip_of({{"archive/data.pkl", pkl, 0},
                   {"archive/byteorder", "little", 0},
                   {"archive/data/0", raw(a), 0},
                   {"archive/data/1", raw(b), 0},
                   {"archive/data/2", raw(c), 0},
                   {"archive/version", "3\n", 0}});
  }
  std::string bytes() const { return bytes(pickle()); }
};

TEST(TorchCheckpoint, ReadsF32F16Bf16TensorsThroughTheWeightSource) {
  const ThreeDtypes f;
  TempDir dir;
  write_bytes(dir.path() / "pytorch_model.bin", f.bytes());
  auto source = open_torch_checkpoint_folder(dir.path().string());
  ASSERT_TRUE(source.ok()) << source.error().message;
  WeightSource& w = **source;
  ASSERT_EQ(w.tensors().size(), 3u);
  EXPECT_EQ(w.tensors()[0].name, "a");  // the state dict's order
  const TensorInfo* b = w.find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->dtype, DType::kF16);
  EXPECT_EQ(b->shape, std::vector<int64_t>({4}));
  EXPECT_EQ(b->file_bytes, 8u);
  auto a = w.read("a");
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->dtype, DType::kF32);
  EXPECT_EQ(a->shape, std::vector<int64_t>({2, 3}));
  EXPECT_EQ(std::memcmp(a->data, f.a.data(), 24), 0);
  auto hb = w.read("b");
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(std::memcmp(hb->data, f.b.data(), 8), 0);
  auto c = w.read("c");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->dtype, DType::kBF16);
  EXPECT_EQ(bf16_to_float(static_cast<const uint16_t*>(c->data)[1]), -4.0f);
  auto missing = w.read("d");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
}

TEST(TorchCheckpoint, TensorsAtOffsetsIntoOneSharedStorage) {
  // One f32 storage of 10: "x" [2, 2] at 0, "y" [3] at 4, "z" [3] at 7 (a
  // tied weight may also share a whole storage: "x2" is "x" again).
  std::vector<float> s = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  const std::string pkl = state_dict_pickle({{"x", "FloatStorage", "0", 10, 0, {2, 2}, {2, 1}},
                                             {"y", "FloatStorage", "0", 10, 4, {3}, {1}},
                                             {"z", "FloatStorage", "0", 10, 7, {3}, {1}},
                                             {"x2", "FloatStorage", "0", 10, 0, {2, 2}, {2, 1}}});
  const std::string bytes = zip_of({{"archive/data.pkl", pkl, 0}, {"archive/data/0", raw(s), 0}});
  auto r = parse(bytes);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 4u);
  auto value_at = [&](uint64_t begin) {
    float v;
    std::memcpy(&v, bytes.data() + begin, 4);
    return v;
  };
  EXPECT_EQ(value_at((*r)[1].begin), 4.0f);
  EXPECT_EQ((*r)[1].end - (*r)[1].begin, 12u);
  EXPECT_EQ(value_at((*r)[2].begin), 7.0f);
  EXPECT_EQ(value_at((*r)[2].end - 4), 9.0f);
  EXPECT_EQ((*r)[3].begin, (*r)[0].begin);
  // A view past the storage's end is refused.
  expect_error(zip_of({{"archive/data.pkl",
                        state_dict_pickle({{"z", "FloatStorage", "0", 10, 8, {3}, {1}}}), 0},
                       {"archive/data/0", raw(s), 0}}),
               ErrorCode::kCorrupt, "tensor 'z' needs more than the 2 elements");
}

TEST(TorchCheckpoint, ShardedIndexFolder) {
  std::vector<float> a = {1, 2}, b = {3, 4, 5};
  TempDir dir;
  write_bytes(
      dir.path() / "p-1.bin",
      zip_of({{"p-1/data.pkl", state_dict_pickle({{"a", "FloatStorage", "0", 2, 0, {2}, {1}}}), 0},
              {"p-1/data/0", raw(a), 0}}));
  write_bytes(dir.path() / "p-2.bin",
              zip_of({{"archive/data.pkl",
                       state_dict_pickle({{"b", "FloatStorage", "0", 3, 0, {3}, {1}}}), 0},
                      {"archive/data/0", raw(b), 0}}));
  write_bytes(dir.path() / "pytorch_model.bin.index.json",
              R"({"weight_map": {"a": "p-1.bin", "b": "p-2.bin"}})");
  auto source = open_torch_checkpoint_folder(dir.path().string());
  ASSERT_TRUE(source.ok()) << source.error().message;
  auto hb = (*source)->read("b");
  ASSERT_TRUE(hb.ok());
  EXPECT_EQ(static_cast<const float*>(hb->data)[2], 5.0f);
  write_bytes(dir.path() / "pytorch_model.bin.index.json",
              R"({"weight_map": {"a": "p-1.bin", "c": "p-2.bin"}})");
  auto bad = open_torch_checkpoint_folder(dir.path().string());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("tensor 'c' is mapped to p-2.bin"), std::string::npos);
}

TEST(TorchCheckpoint, RefusesGlobalsAndOpcodesOutsideTheWhitelist) {
  const ThreeDtypes f;
  std::string pkl = f.pickle();
  const std::string evil = replaced(pkl, "torch._utils\n_rebuild_tensor_v2\n", "posix\nsystem\n");
  expect_error(f.bytes(evil), ErrorCode::kUnsupported, "pickle global posix.system");
  expect_error(f.bytes(replaced(pkl, "FloatStorage", "DoubleStorage")), ErrorCode::kUnsupported,
               "global torch.DoubleStorage");
  // INST ('i') would import and call: refused by opcode.
  expect_error(f.bytes(pkl.substr(0, 2) + "i" + pkl.substr(2)), ErrorCode::kUnsupported,
               "pickle opcode 0x69 at byte 2");
  expect_error(f.bytes(std::string("\x80\x02K\x05.", 5)), ErrorCode::kUnsupported,
               "the pickle is a int, not a state dict");
}

TEST(TorchCheckpoint, RefusesTruncatedFilesAndPickles) {
  const std::string bytes = ThreeDtypes().bytes();
  for (size_t cut : {size_t{0}, size_t{10}, bytes.size() / 2, bytes.size() - 1}) {
    auto r = parse(bytes.substr(0, cut));
    ASSERT_FALSE(r.ok()) << cut;
    EXPECT_EQ(r.error().code, ErrorCode::kCorrupt) << r.error().message;
  }
  const ThreeDtypes f;
  const std::string pkl = f.pickle();
  expect_error(f.bytes(pkl.substr(0, pkl.size() - 1)), ErrorCode::kCorrupt, "ends before STOP");
  expect_error(f.bytes(pkl.substr(0, 40)), ErrorCode::kCorrupt, "t.bin: pickle");
  // A storage shorter than its numel.
  std::vector<float> short_a = {1, 2};
  expect_error(zip_of({{"archive/data.pkl", pkl, 0},
                       {"archive/data/0", raw(short_a), 0},
                       {"archive/data/1", raw(f.b), 0},
                       {"archive/data/2", raw(f.c), 0}}),
               ErrorCode::kCorrupt, "holds 8 bytes, not 6 FloatStorages");
}

TEST(TorchCheckpoint, RefusesCompressedEntriesStridedViewsAndBigEndian) {
  const ThreeDtypes f;
  expect_error(zip_of({{"archive/data.pkl", f.pickle(), 8}, {"archive/data/0", raw(f.a), 0}}),
               ErrorCode::kUnsupported, "zip entry 'archive/data.pkl' is compressed (method 8)");
  expect_error(zip_of({{"archive/data.pkl", f.pickle(), 0},
                       {"archive/data/0", raw(f.a), 8},
                       {"archive/data/1", raw(f.b), 0},
                       {"archive/data/2", raw(f.c), 0}}),
               ErrorCode::kUnsupported, "'archive/data/0' is compressed");
  // "a" as a transposed [3, 2] view of its storage.
  const std::string t = state_dict_pickle({{"a", "FloatStorage", "0", 6, 0, {3, 2}, {1, 3}}});
  expect_error(zip_of({{"archive/data.pkl", t, 0}, {"archive/data/0", raw(f.a), 0}}),
               ErrorCode::kUnsupported, "tensor 'a' is not contiguous");
  // Size-1 dimensions may carry any stride.
  const std::string ones = state_dict_pickle({{"a", "FloatStorage", "0", 6, 0, {1, 6}, {99, 1}}});
  EXPECT_TRUE(parse(zip_of({{"archive/data.pkl", ones, 0}, {"archive/data/0", raw(f.a), 0}})).ok());
  expect_error(zip_of({{"archive/data.pkl", f.pickle(), 0}, {"archive/byteorder", "big", 0}}),
               ErrorCode::kUnsupported, "byteorder is 'big'");
  expect_error(zip_of({{"data.pkl", f.pickle(), 0}}), ErrorCode::kUnsupported,
               "0 top-level '<folder>/data.pkl' entries");
}

TEST(ZipArchive, ListsStoredEntriesAndTheirData) {
  const std::string bytes = zip_of({{"a/x", "hello", 0}, {"a/y", "", 0}, {"a/z", "zz", 8}});
  auto r = parse_zip_archive(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "t.zip");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 3u);
  EXPECT_EQ(bytes.substr((*r)[0].data_begin, (*r)[0].size), "hello");
  EXPECT_TRUE((*r)[1].stored);
  EXPECT_EQ((*r)[1].size, 0u);
  EXPECT_FALSE((*r)[2].stored);
  EXPECT_EQ((*r)[2].method, 8);
}

// Bounds on what a hostile pickle makes: a chain of nested tuples (one byte
// a level, freed recursively) and a stream of one-byte values are refused
// before they exhaust the stack or memory.
TEST(TorchCheckpoint, RefusesDeepTuplesAndTooManyValues) {
  const ThreeDtypes f;
  const std::string deep = std::string("\x80\x02)", 3) + std::string(1000000, '\x85') + ".";
  expect_error(f.bytes(deep), ErrorCode::kCorrupt, "nests tuples over 16 deep");
  const std::string many = std::string("\x80\x02", 2) + std::string(3000000, 'N') + ".";
  expect_error(f.bytes(many), ErrorCode::kCorrupt, "makes over 1048576 values");
}

// A storage numel whose byte count overflows 64 bits (2^62 floats: 2^64
// bytes, 0 modulo 2^64) does not pass for an empty storage.
TEST(TorchCheckpoint, RefusesAStorageNumelThatOverflows) {
  const ThreeDtypes f;
  const std::string pkl = replaced(f.pickle(), binunicode("cpu") + "J" + le(6, 4),
                                   binunicode("cpu") + "\x8a\x08" + le(uint64_t{1} << 62, 8));
  expect_error(zip_of({{"archive/data.pkl", pkl, 0},
                       {"archive/data/0", "", 0},
                       {"archive/data/1", raw(f.b), 0},
                       {"archive/data/2", raw(f.c), 0}}),
               ErrorCode::kCorrupt, "holds 0 bytes, not 4611686018427387904 FloatStorages");
}

// _rebuild_tensor_v2's 7th argument (tensor metadata) is refused unless
// empty: pagoda would not apply it.
TEST(TorchCheckpoint, RefusesTensorMetadataItDoesNotApply) {
  const ThreeDtypes f;
  const std::string with_empty = replaced(f.pickle(), ")RtR", ")R}tR");
  EXPECT_TRUE(parse(f.bytes(with_empty)).ok());
  const std::string with_meta =
      replaced(f.pickle(), ")RtR", ")R}" + binunicode("_is_conj") + "\x88stR");
  expect_error(f.bytes(with_meta), ErrorCode::kUnsupported,
               "a tensor carries _rebuild_tensor_v2 metadata (a dict");
}

}  // namespace
}  // namespace pagoda
