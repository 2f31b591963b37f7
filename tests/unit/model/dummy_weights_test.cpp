// --load-format dummy's WeightSource (model/dummy_weights.h): exactly the
// tensors each llama-decoder and MoE family loads, a ModelRunner that runs on them,
// fixed values (norms 1, biases 0, the rest from a pinned table), tiling past
// the table, and concurrent reads.
#include "model/dummy_weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "core/half.h"
#include "memory_source.h"
#include "model/model_runner.h"

namespace pagoda {
namespace {

using test::tiny_config;
using test::tiny_moe_config;

// Forwards to `inner`, counting the reads of each name.
class CountingSource final : public WeightSource {
 public:
  explicit CountingSource(WeightSource& inner) : inner_(inner) {}
  std::map<std::string, int> reads;

  const std::vector<TensorInfo>& tensors() const override { return inner_.tensors(); }
  const TensorInfo* find(std::string_view name) const override { return inner_.find(name); }
  Result<HostTensor> read(std::string_view name) override {
    ++reads[std::string(name)];
    return inner_.read(name);
  }
  std::string describe() const override { return inner_.describe(); }

 private:
  WeightSource& inner_;
};

std::unique_ptr<WeightSource> dummy(const ModelConfig& c) {
  auto w = make_dummy_weights(c);
  EXPECT_TRUE(w.ok()) << (w.ok() ? "" : w.error().message);
  return w.ok() ? std::move(w).value() : nullptr;
}

std::vector<uint16_t> read_bits(WeightSource& src, const std::string& name) {
  Result<HostTensor> t = src.read(name);
  EXPECT_TRUE(t.ok()) << name;
  if (!t.ok()) return {};
  EXPECT_EQ(dtype_size(t->dtype), 2u);
  std::vector<uint16_t> bits(static_cast<size_t>(t->numel()));
  std::memcpy(bits.data(), t->data, bits.size() * 2);
  return bits;
}

// The llama-decoder families, in their tiny shapes: qwen2 always with
// q/k/v biases, qwen3 with q/k norms (and a head_dim unlike hidden / heads),
// llama once with tied embeddings; and the MoE families (Qwen2-MoE with its
// shared expert and, in layer 0, a dense MLP).
std::vector<ModelConfig> family_configs() {
  ModelConfig llama = tiny_config("llama");
  ModelConfig tied = tiny_config("llama");
  tied.tie_word_embeddings = true;
  ModelConfig mistral = tiny_config("mistral");
  ModelConfig qwen2 = tiny_config("qwen2");
  ModelConfig qwen3 = tiny_config("qwen3");
  qwen3.qk_norm = true;
  qwen3.head_dim = 16;
  ModelConfig phi3 = tiny_config("phi3");  // pre-fused qkv_proj / gate_up_proj, each read once
  ModelConfig qwen2_moe = tiny_moe_config("qwen2_moe");
  qwen2_moe.mlp_only_layers = {0};
  return {llama,       tied, mistral, qwen2, qwen3, phi3, tiny_moe_config("mixtral"),
          qwen2_moe, tiny_moe_config("qwen3_moe")};
}

StepBatch prompt_step(const std::vector<int32_t>& tokens) {
  StepBatch in;
  in.max_blocks_per_seq = 4;
  in.query_start_loc = {0, static_cast<int32_t>(tokens.size())};
  in.seq_lens = {static_cast<int32_t>(tokens.size())};
  in.block_tables = {0, 1, 2, 3};
  for (size_t i = 0; i < tokens.size(); ++i) {
    in.token_ids.push_back(tokens[i]);
    in.positions.push_back(static_cast<int32_t>(i));
    in.slot_mapping.push_back(static_cast<int32_t>(i));
  }
  in.logits_rows = {static_cast<int32_t>(tokens.size()) - 1};
  in.sampling.rows.push_back(SamplingRow{});
  return in;
}

TEST(DummyWeights, ListsExactlyTheTensorsEachFamilyLoadsAndRuns) {
  for (const ModelConfig& c : family_configs()) {
    SCOPED_TRACE(c.architecture + (c.tie_word_embeddings ? " (tied)" : ""));
    std::unique_ptr<WeightSource> src = dummy(c);
    ASSERT_NE(src, nullptr);
    CountingSource counting(*src);
    CpuBackend be;
    RunnerOptions o;
    o.block_size = 4;
    o.num_kv_blocks = 8;
    auto runner = ModelRunner::create(be, c, counting, o);
    ASSERT_TRUE(runner.ok()) << runner.error().message;
    // Every listed tensor read once, nothing else read.
    std::set<std::string> listed;
    for (const TensorInfo& t : src->tensors()) listed.insert(t.name);
    EXPECT_EQ(listed.size(), src->tensors().size());
    std::set<std::string> read;
    for (const auto& [name, n] : counting.reads) {
      read.insert(name);
      EXPECT_EQ(n, 1) << name;
    }
    EXPECT_EQ(read, listed);
    EXPECT_EQ(listed.count("lm_head.weight"), c.tie_word_embeddings ? 0u : 1u);
    EXPECT_EQ(listed.count("model.layers.1.self_attn.q_proj.bias"),
              c.attention_bias || c.architecture == "qwen2");
    EXPECT_EQ(listed.count("model.layers.1.self_attn.k_norm.weight"), c.qk_norm);
    EXPECT_EQ(listed.count("model.layers.1.mlp.down_proj.weight") +
                  listed.count("model.layers.1.block_sparse_moe.experts.3.w2.weight") +
                  listed.count("model.layers.1.mlp.experts.3.down_proj.weight"),
              1u);
    EXPECT_EQ(listed.count("model.layers.0.mlp.down_proj.weight"),
              c.num_experts == 0 || !c.mlp_only_layers.empty());
    EXPECT_EQ(listed.count("model.layers.1.mlp.shared_expert_gate.weight"),
              c.shared_expert_intermediate_size > 0);

    std::vector<float> logits;
    ASSERT_TRUE((*runner)->execute_logits(prompt_step({5, 6, 7, 8, 9}), &logits).ok());
    ASSERT_EQ(logits.size(), static_cast<size_t>(c.vocab_size));
    std::set<float> distinct;
    for (float x : logits) {
      ASSERT_TRUE(std::isfinite(x));
      distinct.insert(x);
    }
    EXPECT_GT(distinct.size(), 10u);  // random weights, not all zero
  }
}

TEST(DummyWeights, ShapesFollowTheConfig) {
  ModelConfig c = tiny_config("qwen3");
  c.qk_norm = true;
  c.attention_bias = true;
  c.head_dim = 16;
  std::unique_ptr<WeightSource> src = dummy(c);
  ASSERT_NE(src, nullptr);
  auto shape = [&](const std::string& name) {
    const TensorInfo* t = src->find(name);
    EXPECT_NE(t, nullptr) << name;
    return t ? t->shape : std::vector<int64_t>{};
  };
  const std::string p = "model.layers.0.";
  EXPECT_EQ(shape("model.embed_tokens.weight"), (std::vector<int64_t>{97, 32}));
  EXPECT_EQ(shape("lm_head.weight"), (std::vector<int64_t>{97, 32}));
  EXPECT_EQ(shape(p + "self_attn.q_proj.weight"), (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(shape(p + "self_attn.k_proj.weight"), (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(shape(p + "self_attn.v_proj.bias"), (std::vector<int64_t>{32}));
  EXPECT_EQ(shape(p + "self_attn.o_proj.weight"), (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(shape(p + "self_attn.q_norm.weight"), (std::vector<int64_t>{16}));
  EXPECT_EQ(shape(p + "mlp.gate_proj.weight"), (std::vector<int64_t>{48, 32}));
  EXPECT_EQ(shape(p + "mlp.down_proj.weight"), (std::vector<int64_t>{32, 48}));
  EXPECT_EQ(shape(p + "post_attention_layernorm.weight"), (std::vector<int64_t>{32}));
  EXPECT_EQ(src->tensors().size(), 3u + 2u * 14u);
  for (const TensorInfo& t : src->tensors()) {
    EXPECT_EQ(t.dtype, DType::kBF16) << t.name;
    uint64_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    EXPECT_EQ(t.file_bytes, 2u * n) << t.name;
  }
  c.dtype = DType::kF16;  // the CUDA backend computes in f16 for it
  src = dummy(c);
  EXPECT_EQ(src->tensors()[0].dtype, DType::kF16);
}

TEST(DummyWeights, ValuesAreFixedNormsOneBiasesZero) {
  ModelConfig c = tiny_config("qwen2");
  std::unique_ptr<WeightSource> a = dummy(c), b = dummy(c);
  ASSERT_NE(a, nullptr);
  for (uint16_t x : read_bits(*a, "model.layers.0.input_layernorm.weight"))
    EXPECT_EQ(bf16_to_float(x), 1.0f);
  for (uint16_t x : read_bits(*a, "model.layers.1.self_attn.k_proj.bias"))
    EXPECT_EQ(bf16_to_float(x), 0.0f);
  // The same bits from another source, and in every process: pinned.
  const std::string q = "model.layers.0.self_attn.q_proj.weight";
  const std::vector<uint16_t> bits = read_bits(*a, q);
  EXPECT_EQ(bits, read_bits(*b, q));
  EXPECT_EQ(bits, read_bits(*a, q));
  ASSERT_GE(bits.size(), 4u);
  const std::vector<uint16_t> pinned(bits.begin(), bits.begin() + 4);
  EXPECT_EQ(pinned, (std::vector<uint16_t>{0x3c7b, 0x3b94, 0xbd06, 0xbcf1}));
  // Tensors differ from each other; normal(0, 0.02) statistics.
  EXPECT_NE(bits, read_bits(*a, "model.layers.1.self_attn.q_proj.weight"));
  const std::vector<uint16_t> embed = read_bits(*a, "model.embed_tokens.weight");
  double sum = 0, sq = 0;
  for (uint16_t x : embed) {
    const double v = bf16_to_float(x);
    sum += v;
    sq += v * v;
  }
  const double n = static_cast<double>(embed.size());
  EXPECT_NEAR(sum / n, 0.0, 0.002);
  EXPECT_NEAR(std::sqrt(sq / n), 0.02, 0.001);
}

// A tensor longer than the table (an embedding of 2^24 + 2^20 elements) is
// the table tiled: element i + N equals element i.
TEST(DummyWeights, TilesTheTablePastItsEnd) {
  ModelConfig c = tiny_config("llama");
  c.vocab_size = (int64_t{1} << 19) + (int64_t{1} << 15);
  std::unique_ptr<WeightSource> src = dummy(c);
  ASSERT_NE(src, nullptr);
  const std::vector<uint16_t> embed = read_bits(*src, "model.embed_tokens.weight");
  ASSERT_EQ(static_cast<int64_t>(embed.size()), c.vocab_size * 32);
  const size_t n = static_cast<size_t>(kDummyTableElements);
  for (size_t i = 0; i < embed.size() - n; i += 997) ASSERT_EQ(embed[i], embed[i + n]) << i;
  EXPECT_NE(0, std::memcmp(embed.data(), embed.data() + 1, 1024));  // not constant
}

// Tensor-parallel ranks load concurrently, from one source or from one each
// (made concurrently too): every thread reads the same bits a lone reader does.
TEST(DummyWeights, ConcurrentReadsMatch) {
  ModelConfig c = tiny_config("qwen3");
  c.qk_norm = true;
  c.vocab_size = int64_t{1} << 19;  // an embedding that tiles
  std::unique_ptr<WeightSource> src = dummy(c);
  ASSERT_NE(src, nullptr);
  std::map<std::string, std::vector<uint16_t>> expected;
  for (const TensorInfo& t : src->tensors()) expected[t.name] = read_bits(*src, t.name);
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int r = 0; r < 4; ++r) {
    threads.emplace_back([&, r] {
      Result<std::unique_ptr<WeightSource>> own = make_dummy_weights(c);
      if (!own.ok()) {
        ++mismatches[static_cast<size_t>(r)];
        return;
      }
      for (int round = 0; round < 3; ++round) {
        for (const TensorInfo& t : src->tensors()) {
          WeightSource& from = round % 2 ? **own : *src;
          Result<HostTensor> h = from.read(t.name);
          if (!h.ok() || std::memcmp(h->data, expected[t.name].data(), t.file_bytes) != 0)
            ++mismatches[static_cast<size_t>(r)];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

TEST(DummyWeights, RefusesAnUnknownFamilyAndUnknownTensors) {
  ModelConfig c = tiny_config("gpt2");
  auto w = make_dummy_weights(c);
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.error().message.find("\"gpt2\" is not supported"), std::string::npos)
      << w.error().message;
  std::unique_ptr<WeightSource> src = dummy(tiny_config("llama"));
  auto t = src->read("model.layers.2.mlp.up_proj.weight");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().code, ErrorCode::kNotFound);
  EXPECT_NE(t.error().message.find("model.layers.2.mlp.up_proj.weight"), std::string::npos);
}

}  // namespace
}  // namespace pagoda
