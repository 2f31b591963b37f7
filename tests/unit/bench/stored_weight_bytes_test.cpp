// stored_weight_bytes: bytes per parameter of the layers' matmul weights and
// the head, as kept on the device (blocks where the source has them).
#include "bench/inproc/stored_weight_bytes.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "engine/scratch_dir.h"

namespace pagoda::bench {
namespace {

TensorInfo info(const std::string& name, std::vector<int64_t> shape,
                std::optional<DType> blocks = std::nullopt) {
  TensorInfo t;
  t.name = name;
  t.shape = std::move(shape);
  t.blocks = blocks;
  return t;
}

TEST(StoredWeightBytes, NothingInBlocksIsNullopt) {
  const std::vector<TensorInfo> t = {info("model.embed_tokens.weight", {512, 256}),
                                     info("model.layers.0.self_attn.q_proj.weight", {256, 256}),
                                     info("lm_head.weight", {512, 256})};
  EXPECT_FALSE(stored_weight_bytes(t, 2.0).has_value());
}

TEST(StoredWeightBytes, MixedLayerFormatsAndASeparateHead) {
  // q4_K: 144 bytes per 256; q6_K: 210 per 256; one bf16 matrix; 1-D norms
  // and a block-format embedding not used as the head are left out.
  const std::vector<TensorInfo> t = {
      info("model.embed_tokens.weight", {512, 256}, DType::kQ8_0),
      info("model.layers.0.input_layernorm.weight", {256}),
      info("model.layers.0.self_attn.q_proj.weight", {256, 256}, DType::kQ4_K),
      info("model.layers.0.self_attn.v_proj.weight", {256, 256}, DType::kQ6_K),
      info("model.layers.0.mlp.gate.weight", {256, 256}),
      info("lm_head.weight", {512, 256}, DType::kQ6_K)};
  const auto s = stored_weight_bytes(t, 2.0);
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->matmul, (144.0 / 256 + 210.0 / 256 + 2.0) / 3);
  EXPECT_DOUBLE_EQ(s->head, 210.0 / 256);
}

TEST(StoredWeightBytes, TiedHeadIsTheEmbeddingInItsBlocks) {
  const std::vector<TensorInfo> t = {
      info("model.embed_tokens.weight", {512, 256}, DType::kQ8_0),
      info("model.layers.0.mlp.down_proj.weight", {256, 512}, DType::kW4G128)};
  const auto s = stored_weight_bytes(t, 2.0);
  ASSERT_TRUE(s.has_value());
  EXPECT_DOUBLE_EQ(s->matmul, 68.0 / 128);
  EXPECT_DOUBLE_EQ(s->head, 34.0 / 32);
}

TEST(StoredWeightBytes, AnEmbeddingInBlocksBesideABf16HeadIsNotQuantized) {
  const std::vector<TensorInfo> t = {
      info("model.embed_tokens.weight", {512, 256}, DType::kQ8_0),
      info("model.layers.0.mlp.down_proj.weight", {256, 512}),
      info("lm_head.weight", {512, 256})};
  EXPECT_FALSE(stored_weight_bytes(t, 2.0).has_value());
}

// --load-format dummy of an AWQ checkpoint (tiny_llama_linear's config with
// a 4-bit group-32 quantization_config, no weight files): its *_proj
// weights are w4g32 blocks (4 + 16 bytes per 32), the lm_head stays dense;
// the same folder opened as "auto" has only dense tensors.
TEST(StoredWeightBytes, DummyAwqModelCountsItsGroupBlocks) {
  namespace fs = std::filesystem;
  const fs::path tiny = fs::path(PAGODA_TEST_DATA) / "models" / "tiny_llama_linear";
  nlohmann::json config = nlohmann::json::parse(std::ifstream(tiny / "config.json"));
  config["quantization_config"] = {
      {"quant_method", "awq"}, {"bits", 4}, {"group_size", 32}, {"zero_point", true}};
  test::ScratchDir dir;
  std::ofstream(dir.path() / "config.json") << config.dump();
  const ModelLocation awq{ModelFormat::kHuggingFace, dir.path().string(), "tiny-awq"};
  const auto dummy = stored_weight_bytes_of(awq, "dummy", 2.0);
  ASSERT_TRUE(dummy.ok()) << dummy.error().message;
  ASSERT_TRUE(dummy->has_value());
  EXPECT_DOUBLE_EQ((*dummy)->matmul, 20.0 / 32);
  EXPECT_DOUBLE_EQ((*dummy)->head, 2.0);

  const ModelLocation dense{ModelFormat::kHuggingFace, tiny.string(), "tiny"};
  const auto own = stored_weight_bytes_of(dense, "auto", 2.0);
  ASSERT_TRUE(own.ok()) << own.error().message;
  EXPECT_FALSE(own->has_value());
  const auto dense_dummy = stored_weight_bytes_of(dense, "dummy", 2.0);
  ASSERT_TRUE(dense_dummy.ok()) << dense_dummy.error().message;
  EXPECT_FALSE(dense_dummy->has_value());
}

}  // namespace
}  // namespace pagoda::bench
