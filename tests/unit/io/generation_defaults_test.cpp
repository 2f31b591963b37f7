#include "io/generation_defaults.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "io/model_description.h"
#include "io_test_util.h"

namespace pagoda {
namespace {

using testing::TempDir;
using testing::write_bytes;

// GGUF v3 bytes with metadata only: f32 (type 6) and i32 (type 5) values.
class MetadataBuilder {
 public:
  explicit MetadataBuilder(uint64_t num_kv) { u32(0x46554747).u32(3).u64(0).u64(num_kv); }
  MetadataBuilder& f32(const std::string& key, float v) { return str(key).u32(6).raw(&v, 4); }
  MetadataBuilder& i32(const std::string& key, int32_t v) { return str(key).u32(5).raw(&v, 4); }
  MetadataBuilder& string(const std::string& key, const std::string& v) {
    return str(key).u32(8).str(v);
  }
  const std::string& bytes() const { return bytes_; }

 private:
  MetadataBuilder& u32(uint32_t v) { return raw(&v, 4); }
  MetadataBuilder& u64(uint64_t v) { return raw(&v, 8); }
  MetadataBuilder& str(const std::string& s) {
    u64(s.size());
    bytes_ += s;
    return *this;
  }
  MetadataBuilder& raw(const void* p, size_t n) {
    bytes_.append(static_cast<const char*>(p), n);
    return *this;
  }
  std::string bytes_;
};

Result<GenerationDefaults> read(const std::string& bytes) {
  auto file =
      GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "m.gguf");
  EXPECT_TRUE(file.ok());
  return gguf_sampling_defaults(**file);
}

TEST(GenerationDefaults, ReadsLlamaCppSamplingKeys) {
  MetadataBuilder b(6);
  b.f32("general.sampling.temp", 0.25f)
      .f32("general.sampling.top_p", 0.5f)
      .i32("general.sampling.top_k", 40)
      .f32("general.sampling.min_p", 0.125f)
      .f32("general.sampling.penalty_repeat", 1.5f)
      .f32("general.sampling.xtc_probability", 0.5f);  // not a pagoda default: ignored
  auto g = read(b.bytes());
  ASSERT_TRUE(g.ok()) << g.error().message;
  EXPECT_EQ(g->temperature, 0.25);
  EXPECT_EQ(g->top_p, 0.5);
  EXPECT_EQ(g->top_k, 40);
  EXPECT_EQ(g->min_p, 0.125);
  EXPECT_EQ(g->repetition_penalty, 1.5);
  EXPECT_FALSE(g->max_new_tokens);

  auto none = read(MetadataBuilder(0).bytes());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(has_sampling(*none));

  auto bad = read(MetadataBuilder(1).string("general.sampling.temp", "hot").bytes());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("general.sampling.temp"), std::string::npos)
      << bad.error().message;
}

TEST(GenerationDefaults, SelectsAutoVllmOrAFolder) {
  GenerationDefaults model;
  model.temperature = 0.7;
  model.eos_token_ids = {2};
  auto auto_ = select_sampling_defaults("auto", model, "/m/generation_config.json");
  ASSERT_TRUE(auto_.ok());
  EXPECT_EQ(auto_->values.temperature, 0.7);
  EXPECT_TRUE(auto_->values.eos_token_ids.empty());
  EXPECT_EQ(auto_->source, "/m/generation_config.json");

  auto vllm = select_sampling_defaults("vllm", model, "/m/generation_config.json");
  ASSERT_TRUE(vllm.ok());
  EXPECT_FALSE(has_sampling(vllm->values));
  EXPECT_EQ(vllm->source, "");

  TempDir dir;
  auto missing = select_sampling_defaults(dir.path().string(), model, "");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("no generation_config.json"), std::string::npos);
  write_bytes(dir.path() / "generation_config.json",
              R"({"top_p": 0.8, "top_k": 5, "eos_token_id": 9})");
  auto folder = select_sampling_defaults(dir.path().string(), model, "");
  ASSERT_TRUE(folder.ok()) << folder.error().message;
  EXPECT_FALSE(folder->values.temperature);  // the folder's file replaces the model's
  EXPECT_EQ(folder->values.top_p, 0.8);
  EXPECT_EQ(folder->values.top_k, 5);
  EXPECT_EQ(folder->source, (dir.path() / "generation_config.json").string());
}

TEST(GenerationDefaults, GgufReadsTheGenerationConfigBesideIt) {
  TempDir dir;
  const auto gguf = dir.path() / "tiny.gguf";
  std::filesystem::copy_file(testing::data_path("llama_tiny.gguf"), gguf);
  const ModelLocation where{ModelFormat::kGguf, gguf.string(), "tiny"};
  auto plain = describe_model(where);
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_FALSE(has_sampling(plain->generation));
  EXPECT_EQ(plain->generation_source, "");

  write_bytes(dir.path() / "generation_config.json",
              R"({"temperature": 0.2, "top_p": 0.9, "eos_token_id": 7})");
  auto d = describe_model(where);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->generation.temperature, 0.2);
  EXPECT_EQ(d->generation.top_p, 0.9);
  EXPECT_EQ(d->generation.eos_token_ids, std::vector<int32_t>{2});  // the GGUF's own
  EXPECT_EQ(d->eos_token_ids, std::vector<int32_t>{2});
  EXPECT_EQ(d->generation_source, (dir.path() / "generation_config.json").string());
}

}  // namespace
}  // namespace pagoda
