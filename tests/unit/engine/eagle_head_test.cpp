// load_eagle_head: the published EAGLE-1 layout is read and checked against
// the target; every refusal names what is wrong.
#include "engine/eagle_head.h"

#include <gtest/gtest.h>

#include <cstring>

namespace pagoda {
namespace {

// Tensors in memory: each element of tensor `name` is its index (f32, or
// i64 for a kI64 tensor).
class MemorySource final : public IndexedWeightSource {
 public:
  void add(const std::string& name, std::vector<int64_t> shape, DType dtype = DType::kF32) {
    TensorInfo info;
    info.name = name;
    info.shape = std::move(shape);
    info.dtype = dtype;
    add_tensor(info);
  }
  void remove(const std::string& name) {
    MemorySource copy;
    for (const TensorInfo& t : tensors())
      if (t.name != name) copy.add(t.name, t.shape, t.dtype);
    *this = copy;
  }
  Result<HostTensor> read(std::string_view name) override {
    const TensorInfo* info = find(name);
    if (info == nullptr) return make_error(ErrorCode::kNotFound, std::string(name));
    HostTensor t;
    t.shape = info->shape;
    t.dtype = info->dtype;
    const auto n = static_cast<size_t>(t.numel());
    if (info->dtype == DType::kI64) {
      std::vector<int64_t> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = static_cast<int64_t>(i);
      t.owned.resize(n * sizeof(int64_t));
      std::memcpy(t.owned.data(), v.data(), t.owned.size());
    } else {
      std::vector<float> v(n);
      for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i);
      t.owned.resize(n * sizeof(float));
      std::memcpy(t.owned.data(), v.data(), t.owned.size());
    }
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

constexpr int64_t kTargetLayers = 8;
const EagleHeadTarget kTarget{"tiny-target", kH, kVocab, kTargetLayers};

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

// ---- EAGLE-3 ------------------------------------------------------------------

constexpr int64_t kDraftVocab = 8;

// The published EAGLE-3 layout; d2t[d] = d (the source's index fill), so
// draft d is target token 2d.
MemorySource published_eagle3_head(int64_t draft_vocab = kDraftVocab) {
  MemorySource s;
  const int64_t q = kHeads * kHeadDim, kv = kKvHeads * kHeadDim;
  s.add("fc.weight", {kH, 3 * kH});
  s.add("midlayer.input_layernorm.weight", {kH});
  s.add("midlayer.hidden_norm.weight", {kH});
  s.add("midlayer.self_attn.q_proj.weight", {q, 2 * kH});
  s.add("midlayer.self_attn.k_proj.weight", {kv, 2 * kH});
  s.add("midlayer.self_attn.v_proj.weight", {kv, 2 * kH});
  s.add("midlayer.self_attn.o_proj.weight", {kH, q});
  s.add("midlayer.post_attention_layernorm.weight", {kH});
  s.add("midlayer.mlp.gate_proj.weight", {kInter, kH});
  s.add("midlayer.mlp.up_proj.weight", {kInter, kH});
  s.add("midlayer.mlp.down_proj.weight", {kH, kInter});
  s.add("norm.weight", {kH});
  s.add("lm_head.weight", {draft_vocab, kH});
  s.add("d2t", {draft_vocab}, DType::kI64);
  s.add("t2d", {kVocab}, DType::kU8);
  return s;
}

Eagle3Fields eagle3_fields(int64_t draft_vocab = kDraftVocab) {
  return Eagle3Fields{draft_vocab, eagle3_default_aux_layers(kTargetLayers)};
}

std::string eagle3_refusal(MemorySource source, const ModelConfig& config = head_config(),
                           const Eagle3Fields& fields = eagle3_fields()) {
  Result<Eagle3Head> head = load_eagle3_head(config, fields, source, kTarget);
  EXPECT_FALSE(head.ok());
  if (head.ok()) return "";
  EXPECT_EQ(head.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(head.error().message.find("tiny-target"), std::string::npos) << head.error().message;
  return head.error().message;
}

TEST(Eagle3Head, LoadsThePublishedLayout) {
  MemorySource source = published_eagle3_head();
  Result<Eagle3Head> head = load_eagle3_head(head_config(), eagle3_fields(), source, kTarget);
  ASSERT_TRUE(head.ok()) << head.error().message;
  EXPECT_EQ(head->fc.size(), static_cast<size_t>(kH * 3 * kH));
  EXPECT_EQ(head->q_proj.size(), static_cast<size_t>(kHeads * kHeadDim * 2 * kH));
  EXPECT_EQ(head->lm_head.size(), static_cast<size_t>(kDraftVocab * kH));
  EXPECT_EQ(head->draft_to_target, (std::vector<int32_t>{0, 2, 4, 6, 8, 10, 12, 14}));
  EXPECT_TRUE(head->embed_tokens.empty());

  MemorySource prefixed;
  for (const TensorInfo& t : source.tensors()) prefixed.add("model." + t.name, t.shape, t.dtype);
  prefixed.add("model.embed_tokens.weight", {kVocab, kH});
  head = load_eagle3_head(head_config(), eagle3_fields(), prefixed, kTarget);
  ASSERT_TRUE(head.ok()) << head.error().message;
  EXPECT_EQ(head->embed_tokens.size(), static_cast<size_t>(kVocab * kH));
}

TEST(Eagle3Head, RefusalsNameWhatIsWrong) {
  MemorySource no_hidden_norm = published_eagle3_head();
  no_hidden_norm.remove("midlayer.hidden_norm.weight");
  EXPECT_NE(eagle3_refusal(no_hidden_norm).find("'midlayer.hidden_norm.weight' is missing"),
            std::string::npos);

  MemorySource no_d2t = published_eagle3_head();
  no_d2t.remove("d2t");
  EXPECT_NE(eagle3_refusal(no_d2t).find("tensor 'd2t' is missing"), std::string::npos);

  MemorySource float_d2t = published_eagle3_head();
  float_d2t.remove("d2t");
  float_d2t.add("d2t", {kDraftVocab});
  EXPECT_NE(eagle3_refusal(float_d2t).find("'d2t' is not an integer tensor"), std::string::npos);

  MemorySource eagle1_fc = published_eagle3_head();
  eagle1_fc.remove("fc.weight");
  eagle1_fc.add("fc.weight", {kH, 2 * kH});
  EXPECT_NE(eagle3_refusal(eagle1_fc).find("'fc.weight' has shape [8, 16], expected [8, 24]"),
            std::string::npos);

  MemorySource narrow_q = published_eagle3_head();
  narrow_q.remove("midlayer.self_attn.q_proj.weight");
  narrow_q.add("midlayer.self_attn.q_proj.weight", {kHeads * kHeadDim, kH});
  EXPECT_NE(eagle3_refusal(narrow_q).find("q_proj.weight' has shape [8, 8], expected [8, 16]"),
            std::string::npos);

  // d2t[d] = d sends draft 16 to 32, past the target's 32 tokens.
  EXPECT_NE(eagle3_refusal(published_eagle3_head(20), head_config(), eagle3_fields(20))
                .find("d2t[16] = 16 maps draft token 16 to 32, outside"),
            std::string::npos);

  ModelConfig layers = head_config();
  layers.num_layers = 2;
  EXPECT_NE(
      eagle3_refusal(published_eagle3_head(), layers).find("2 layers; EAGLE-3 heads have one"),
      std::string::npos);
}

TEST(Eagle3Head, ConfigFields) {
  Result<Eagle3Fields> f = parse_eagle3_fields(R"({"draft_vocab_size": 8})", kTarget);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->draft_vocab_size, 8);
  EXPECT_EQ(f->aux_layer_ids, (std::vector<int64_t>{2, 4, 5}));  // 2, L/2, L-3 of 8 layers

  f = parse_eagle3_fields(R"({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 7]}})",
                          kTarget);
  ASSERT_TRUE(f.ok()) << f.error().message;
  EXPECT_EQ(f->draft_vocab_size, kVocab);  // absent: the target's
  EXPECT_EQ(f->aux_layer_ids, (std::vector<int64_t>{1, 3, 7}));

  for (const char* bad : {R"({"draft_vocab_size": 33})", R"({"draft_vocab_size": 0})",
                          R"({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 9]}})",
                          R"({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 1, 2]}})",
                          R"({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2]}})",
                          R"({"eagle_config": [2, 16, 29]})", "[1, 2]"}) {
    Result<Eagle3Fields> r = parse_eagle3_fields(bad, kTarget);
    EXPECT_FALSE(r.ok()) << bad;
    if (!r.ok()) {
      EXPECT_NE(r.error().message.find("tiny-target"), std::string::npos);
    }
  }
  // A 4-layer target's default picks layer 2 twice: refused, naming the ids.
  const Result<Eagle3Fields> small = parse_eagle3_fields("{}", {"tiny-target", kH, kVocab, 4});
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.error().message.find("[2, 2, 1]"), std::string::npos) << small.error().message;
}

}  // namespace
}  // namespace pagoda
