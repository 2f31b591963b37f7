// load_eagle_head: the published EAGLE-1 layout is read and checked against
// the target; every refusal names what is wrong.
#include "engine/eagle_head.h"

#include <gtest/gtest.h>

#include <cstring>

namespace pagoda {
namespace {

// Tensors in memory: each element of tensor `name` is its index (f32).
class MemorySource final : public IndexedWeightSource {
 public:
  void add(const std::string& name, std::vector<int64_t> shape) {
    TensorInfo info;
    info.name = name;
    info.shape = std::move(shape);
    add_tensor(info);
  }
  void remove(const std::string& name) {
    MemorySource copy;
    for (const TensorInfo& t : tensors())
      if (t.name != name) copy.add(t.name, t.shape);
    *this = copy;
  }
  Result<HostTensor> read(std::string_view name) override {
    const TensorInfo* info = find(name);
    if (info == nullptr) return make_error(ErrorCode::kNotFound, std::string(name));
    HostTensor t;
    t.shape = info->shape;
    std::vector<float> v(static_cast<size_t>(t.numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
    t.owned.resize(v.size() * sizeof(float));
    std::memcpy(t.owned.data(), v.data(), t.owned.size());
    t.data = t.owned.data();
    return t;
  }
  std::string describe() const override { return "memory"; }
};

constexpr int64_t kH = 8, kHeads = 2, kKvHeads = 1, kHeadDim = 4, kInter = 12, kVocab = 32;

ModelConfig head_config() {
  ModelConfig c;
  c.architecture = "llama";
  c.hf_architecture = "LlamaForCausalLM";
  c.vocab_size = kVocab;
  c.hidden_size = kH;
  c.intermediate_size = kInter;
  c.num_layers = 1;
  c.num_heads = kHeads;
  c.num_kv_heads = kKvHeads;
  c.head_dim = kHeadDim;
  return c;
}

// The published layout (no "model." prefix, no input_layernorm).
MemorySource published_head(bool with_embedding) {
  MemorySource s;
  s.add("fc.weight", {kH, 2 * kH});
  s.add("layers.0.self_attn.q_proj.weight", {kHeads * kHeadDim, kH});
  s.add("layers.0.self_attn.k_proj.weight", {kKvHeads * kHeadDim, kH});
  s.add("layers.0.self_attn.v_proj.weight", {kKvHeads * kHeadDim, kH});
  s.add("layers.0.self_attn.o_proj.weight", {kH, kHeads * kHeadDim});
  s.add("layers.0.post_attention_layernorm.weight", {kH});
  s.add("layers.0.mlp.gate_proj.weight", {kInter, kH});
  s.add("layers.0.mlp.up_proj.weight", {kInter, kH});
  s.add("layers.0.mlp.down_proj.weight", {kH, kInter});
  if (with_embedding) s.add("embed_tokens.weight", {kVocab, kH});
  return s;
}

const EagleHeadTarget kTarget{"tiny-target", kH, kVocab};

std::string refusal(const ModelConfig& config, MemorySource source) {
  Result<EagleHead> head = load_eagle_head(config, source, kTarget);
  EXPECT_FALSE(head.ok());
  if (head.ok()) return "";
  EXPECT_EQ(head.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(head.error().message.find("tiny-target"), std::string::npos) << head.error().message;
  return head.error().message;
}

TEST(EagleHead, LoadsThePublishedLayout) {
  MemorySource source = published_head(/*with_embedding=*/false);
  Result<EagleHead> head = load_eagle_head(head_config(), source, kTarget);
  ASSERT_TRUE(head.ok()) << head.error().message;
  EXPECT_EQ(head->fc.size(), static_cast<size_t>(kH * 2 * kH));
  EXPECT_EQ(head->fc[5], 5.0f);  // read in order
  EXPECT_TRUE(head->fc_bias.empty());
  EXPECT_TRUE(head->embed_tokens.empty());  // the target's is used
  EXPECT_EQ(head->down_proj.size(), static_cast<size_t>(kH * kInter));

  MemorySource with_embedding = published_head(/*with_embedding=*/true);
  with_embedding.add("fc.bias", {kH});
  head = load_eagle_head(head_config(), with_embedding, kTarget);
  ASSERT_TRUE(head.ok()) << head.error().message;
  EXPECT_EQ(head->embed_tokens.size(), static_cast<size_t>(kVocab * kH));
  EXPECT_EQ(head->fc_bias.size(), static_cast<size_t>(kH));
}

TEST(EagleHead, AcceptsTheModelPrefix) {
  const MemorySource published = published_head(true);
  MemorySource source;
  for (const TensorInfo& t : published.tensors()) source.add("model." + t.name, t.shape);
  EXPECT_TRUE(load_eagle_head(head_config(), source, kTarget).ok());
}

TEST(EagleHead, RefusalsNameWhatIsWrong) {
  MemorySource no_fc = published_head(false);
  no_fc.remove("fc.weight");
  EXPECT_NE(refusal(head_config(), no_fc).find("tensor 'fc.weight' is missing"), std::string::npos);

  MemorySource no_down = published_head(false);
  no_down.remove("layers.0.mlp.down_proj.weight");
  EXPECT_NE(refusal(head_config(), no_down).find("'layers.0.mlp.down_proj.weight' is missing"),
            std::string::npos);

  MemorySource wide_fc = published_head(false);
  wide_fc.remove("fc.weight");
  wide_fc.add("fc.weight", {kH, 3 * kH});  // an EAGLE-3 fc
  EXPECT_NE(refusal(head_config(), wide_fc).find("has shape [8, 24], expected [8, 16]"),
            std::string::npos);

  MemorySource wrong_embedding = published_head(false);
  wrong_embedding.add("embed_tokens.weight", {kVocab + 1, kH});
  EXPECT_NE(refusal(head_config(), wrong_embedding).find("embed_tokens.weight"), std::string::npos);

  ModelConfig hidden = head_config();
  hidden.hidden_size = 16;
  EXPECT_NE(refusal(hidden, published_head(false)).find("hidden size is 16, the target's 8"),
            std::string::npos);

  ModelConfig vocab = head_config();
  vocab.vocab_size = 64;
  EXPECT_NE(refusal(vocab, published_head(false)).find("vocabulary has 64 tokens, the target's 32"),
            std::string::npos);

  ModelConfig layers = head_config();
  layers.num_layers = 2;
  EXPECT_NE(refusal(layers, published_head(false)).find("2 layers"), std::string::npos);

  ModelConfig family = head_config();
  family.architecture = "qwen2";
  EXPECT_NE(refusal(family, published_head(false)).find("not a Llama"), std::string::npos);
}

}  // namespace
}  // namespace pagoda
