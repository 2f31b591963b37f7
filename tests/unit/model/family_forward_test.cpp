// The backend op sequence of each family's forward through ModelRunner: the
// contract the CUDA backend relies on (decode graphs capture this sequence,
// and the CUDA kernels are tuned for it). A family that changes its ops
// changes its expected list here.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "io/quantization_config.h"
#include "memory_source.h"
#include "model/model_runner.h"

namespace pagoda {
namespace {

using test::MemorySource;
using test::tiny_config;

// The CPU backend, recording the name of every model op it runs ("linear+bias"
// for a linear with a bias).
class RecordingBackend final : public Backend {
 public:
  std::vector<std::string> ops;

  DeviceKind kind() const override { return cpu_.kind(); }
  std::string name() const override { return "recording " + cpu_.name(); }
  DType compute_dtype() const override { return cpu_.compute_dtype(); }
  void* allocate(size_t bytes) override { return cpu_.allocate(bytes); }
  void deallocate(void* ptr) override { cpu_.deallocate(ptr); }
  void* allocate_host(size_t bytes) override { return cpu_.allocate_host(bytes); }
  void deallocate_host(void* ptr) override { cpu_.deallocate_host(ptr); }
  void copy_to_device(void* dst, const void* src, size_t bytes) override {
    cpu_.copy_to_device(dst, src, bytes);
  }
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    cpu_.copy_to_host(dst, src, bytes);
  }
  void copy_device(void* dst, const void* src, size_t bytes) override {
    cpu_.copy_device(dst, src, bytes);
  }
  void synchronize() override { cpu_.synchronize(); }
  void memory_info(size_t* free_bytes, size_t* total_bytes) override {
    cpu_.memory_info(free_bytes, total_bytes);
  }
  void embedding(const Tensor& t, const Tensor& ids, int64_t first_row, Tensor& out) override {
    ops.push_back("embedding");
    cpu_.embedding(t, ids, first_row, out);
  }
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override {
    ops.push_back("rms_norm");
    cpu_.rms_norm(x, w, eps, out);
  }
  void add_rms_norm(Tensor& r, const Tensor& x, const Tensor& w, float eps, Tensor& out) override {
    ops.push_back("add_rms_norm");
    cpu_.add_rms_norm(r, x, w, eps, out);
  }
  void linear(const Tensor& x, const LinearWeight& w, const Tensor& b, Tensor& out) override {
    ops.push_back(b.empty() ? "linear" : "linear+bias");
    cpu_.linear(x, w, b, out);
  }
  void rms_norm_fp8(const Tensor& x, const Tensor& w, float eps, Tensor& out, Fp8Rows& q) override {
    ops.push_back("rms_norm_fp8");
    cpu_.rms_norm_fp8(x, w, eps, out, q);
  }
  void add_rms_norm_fp8(Tensor& r, const Tensor& x, const Tensor& w, float eps, Tensor& out,
                        Fp8Rows& q) override {
    ops.push_back("add_rms_norm_fp8");
    cpu_.add_rms_norm_fp8(r, x, w, eps, out, q);
  }
  void silu_mul_fp8(const Tensor& gu, Tensor& out, Fp8Rows& q) override {
    ops.push_back("silu_mul_fp8");
    cpu_.silu_mul_fp8(gu, out, q);
  }
  void linear_fp8_rows(const Fp8Rows& x, const LinearWeight& w, const Tensor& b,
                       Tensor& out) override {
    ops.push_back(b.empty() ? "linear_fp8_rows" : "linear_fp8_rows+bias");
    cpu_.linear_fp8_rows(x, w, b, out);
  }
  void qk_norm(Tensor& qkv, const QkvLayout& l, const Tensor& q, const Tensor& k,
               float eps) override {
    ops.push_back("qk_norm");
    cpu_.qk_norm(qkv, l, q, k, eps);
  }
  void rope(Tensor& qkv, const QkvLayout& l, const Tensor& pos, const Tensor& cs) override {
    ops.push_back("rope");
    cpu_.rope(qkv, l, pos, cs);
  }
  void kv_write(const Tensor& qkv, const QkvLayout& l, const Tensor& slots,
                KvCacheView& c) override {
    ops.push_back("kv_write");
    cpu_.kv_write(qkv, l, slots, c);
  }
  // The fused op records what it fuses, joined by '+'.
  void qk_norm_rope_kv_write(Tensor& qkv, const QkvLayout& l, const Tensor& q, const Tensor& k,
                             float eps, const Tensor& pos, const Tensor& cs, const Tensor& slots,
                             KvCacheView& c) override {
    ops.push_back(q.empty() ? "rope+kv_write" : "qk_norm+rope+kv_write");
    cpu_.qk_norm_rope_kv_write(qkv, l, q, k, eps, pos, cs, slots, c);
  }
  void paged_attention(const Tensor& qkv, const QkvLayout& l, const KvCacheView& c,
                       const AttentionMetadata& m, const AttentionScoring& scoring,
                       Tensor& out) override {
    ops.push_back("paged_attention");
    cpu_.paged_attention(qkv, l, c, m, scoring, out);
  }
  void silu_mul(const Tensor& gu, Tensor& out) override {
    ops.push_back("silu_mul");
    cpu_.silu_mul(gu, out);
  }
  void gelu_tanh_mul(const Tensor& gu, Tensor& out) override {
    ops.push_back("gelu_tanh_mul");
    cpu_.gelu_tanh_mul(gu, out);
  }
  void scale(Tensor& x, float s) override {
    ops.push_back("scale");
    cpu_.scale(x, s);
  }
  void softcap(Tensor& x, float cap) override {
    ops.push_back("softcap");
    cpu_.softcap(x, cap);
  }
  void moe_route(const Tensor& logits, bool renorm, Tensor& ids, Tensor& w) override {
    ops.push_back("moe_route");
    cpu_.moe_route(logits, renorm, ids, w);
  }
  void moe_experts(const Tensor& x, const Tensor& gu, const Tensor& down, const Tensor& ids,
                   const Tensor& w, Tensor& gu_scratch, Tensor& act_scratch, Tensor& out) override {
    ops.push_back("moe_experts");
    // The runner's scratch is what any backend may use (backend.h).
    const int64_t t = x.dim(0), k = ids.dim(1), h = x.dim(1), in = down.dim(2);
    EXPECT_GE(static_cast<int64_t>(gu_scratch.nbytes()), moe_experts_scratch_bytes(t, k, h));
    EXPECT_GE(act_scratch.numel(), t * k * in);
    cpu_.moe_experts(x, gu, down, ids, w, gu_scratch, act_scratch, out);
  }
  void add_sigmoid_gated(Tensor& out, const Tensor& y, const Tensor& x,
                         const Tensor& gate_w) override {
    ops.push_back("add_sigmoid_gated");
    cpu_.add_sigmoid_gated(out, y, x, gate_w);
  }
  void gather_rows(const Tensor& x, const Tensor& idx, Tensor& out) override {
    ops.push_back("gather_rows");
    cpu_.gather_rows(x, idx, out);
  }
  void copy_blocks(std::vector<KvCacheView>& c, const std::vector<int32_t>& src,
                   const std::vector<int32_t>& dst) override {
    cpu_.copy_blocks(c, src, dst);
  }
  void sample_async(const Tensor& logits, const SamplingBatch& b, int slot) override {
    cpu_.sample_async(logits, b, slot);
  }
  void finish_sample(int slot, SampleOutput& out) override { cpu_.finish_sample(slot, out); }
  void copy_sampled_tokens(const Tensor& rows, const Tensor& src, Tensor& ids) override {
    cpu_.copy_sampled_tokens(rows, src, ids);
  }

 private:
  CpuBackend cpu_;
};

// The llama decoder's ops for `num_layers` layers, then the lm_head.
std::vector<std::string> llama_decoder_ops(int64_t num_layers, bool qkv_bias, bool qk_norm) {
  std::vector<std::string> ops = {"embedding"};
  for (int64_t i = 0; i < num_layers; ++i) {
    ops.push_back(i == 0 ? "rms_norm" : "add_rms_norm");
    ops.push_back(qkv_bias ? "linear+bias" : "linear");
    ops.push_back(qk_norm ? "qk_norm+rope+kv_write" : "rope+kv_write");
    for (const char* op :
         {"paged_attention", "linear", "add_rms_norm", "linear", "silu_mul", "linear"})
      ops.push_back(op);
  }
  for (const char* op : {"add_rms_norm", "gather_rows", "linear"}) ops.push_back(op);
  return ops;
}

// The ops of one 3-token prefill of a tiny random `config` (logits only),
// with RunnerOptions::fp8_producer as given.
std::vector<std::string> forward_ops(const ModelConfig& config, bool fp8_producer = true) {
  RecordingBackend be;
  MemorySource src;
  test::fill_random(config, &src);
  RunnerOptions o;
  o.block_size = 4;
  o.num_kv_blocks = 4;
  o.max_model_len = 16;
  o.fp8_producer = fp8_producer;
  auto runner = ModelRunner::create(be, config, src, o);
  EXPECT_TRUE(runner.ok()) << (runner.ok() ? "" : runner.error().message);
  if (!runner.ok()) return {};
  StepBatch step;
  step.token_ids = {5, 6, 7};
  step.positions = {0, 1, 2};
  step.slot_mapping = {0, 1, 2};
  step.query_start_loc = {0, 3};
  step.seq_lens = {3};
  step.block_tables = {0};
  step.max_blocks_per_seq = 1;
  step.logits_rows = {2};
  be.ops.clear();
  std::vector<float> logits;
  const Status st = (*runner)->execute_logits(step, &logits);
  EXPECT_TRUE(st.ok()) << (st.ok() ? "" : st.error().message);
  return be.ops;
}

TEST(FamilyForward, LlamaAndMistralRunThePlainLlamaDecoder) {
  for (const char* family : {"llama", "mistral"}) {
    const ModelConfig c = tiny_config(family);
    EXPECT_EQ(forward_ops(c), llama_decoder_ops(c.num_layers, false, false)) << family;
  }
  ModelConfig biased = tiny_config("llama");
  biased.attention_bias = true;
  EXPECT_EQ(forward_ops(biased), llama_decoder_ops(biased.num_layers, true, false));
}

// FP8 linears with dynamic per-token activations (the online scheme) take
// the codes their producers write: the norms before qkv and gate_up and
// silu_mul before down; o_proj (after attention) and the f32 lm_head do not.
// Without the path (fp8_producer false): the plain decoder's ops.
TEST(FamilyForward, Fp8DynamicLinearsTakeTheirProducersCodes) {
  ModelConfig c = tiny_config("llama");
  c.quantization = online_fp8_config();
  std::vector<std::string> want = {"embedding"};
  for (int64_t i = 0; i < c.num_layers; ++i) {
    want.push_back(i == 0 ? "rms_norm_fp8" : "add_rms_norm_fp8");
    for (const char* op : {"linear_fp8_rows", "rope+kv_write", "paged_attention", "linear",
                           "add_rms_norm_fp8", "linear_fp8_rows", "silu_mul_fp8",
                           "linear_fp8_rows"})
      want.push_back(op);
  }
  for (const char* op : {"add_rms_norm", "gather_rows", "linear"}) want.push_back(op);
  EXPECT_EQ(forward_ops(c), want);
  EXPECT_EQ(forward_ops(c, false), llama_decoder_ops(c.num_layers, false, false));
}

TEST(FamilyForward, Qwen2AddsTheQkvBias) {
  ModelConfig c = tiny_config("qwen2");
  c.attention_bias = true;  // what the config parser sets for qwen2 (fill_random adds the biases)
  EXPECT_EQ(forward_ops(c), llama_decoder_ops(c.num_layers, true, false));
}

TEST(FamilyForward, Qwen3AddsQkNorms) {
  ModelConfig c = tiny_config("qwen3");
  c.qk_norm = true;
  EXPECT_EQ(forward_ops(c), llama_decoder_ops(c.num_layers, false, true));
}

// Phi-3: the llama decoder from the pre-fused tensors, with or without its
// sliding window (a scoring parameter, no extra op).
TEST(FamilyForward, Phi3RunsThePlainLlamaDecoder) {
  ModelConfig c = tiny_config("phi3");
  EXPECT_EQ(forward_ops(c), llama_decoder_ops(c.num_layers, false, false));
  c.sliding_window = 2;
  c.sliding_layers = {true, true};
  EXPECT_EQ(forward_ops(c), llama_decoder_ops(c.num_layers, false, false));
}

// Gemma: scaled embedding, the sandwich norms (rms_norm of each block's
// output before the add), GeGLU, and the final-logit soft-capping when set.
TEST(FamilyForward, GemmaAddsSandwichNormsGegluAndSoftcapping) {
  for (const char* family : {"gemma2", "gemma3"}) {
    const ModelConfig c = tiny_config(family);
    std::vector<std::string> want = {"embedding", "scale"};
    for (int64_t i = 0; i < c.num_layers; ++i) {
      want.push_back(i == 0 ? "rms_norm" : "add_rms_norm");
      want.push_back("linear");
      want.push_back(c.qk_norm ? "qk_norm+rope+kv_write" : "rope+kv_write");
      for (const char* op : {"paged_attention", "linear", "rms_norm", "add_rms_norm", "linear",
                             "gelu_tanh_mul", "linear", "rms_norm"})
        want.push_back(op);
    }
    for (const char* op : {"add_rms_norm", "gather_rows", "linear"}) want.push_back(op);
    if (c.final_logit_softcapping > 0) want.push_back("softcap");
    EXPECT_EQ(forward_ops(c), want) << family;
  }
}

// The MoE decoder's ops: llama attention, then per layer the sparse MLP
// (router, route, experts, and the gated shared expert when `shared`) or,
// in the layers `dense` names, the llama MLP.
std::vector<std::string> moe_decoder_ops(const ModelConfig& c, bool qkv_bias, bool qk_norm,
                                         bool shared) {
  std::vector<std::string> ops = {"embedding"};
  for (int64_t i = 0; i < c.num_layers; ++i) {
    ops.push_back(i == 0 ? "rms_norm" : "add_rms_norm");
    ops.push_back(qkv_bias ? "linear+bias" : "linear");
    ops.push_back(qk_norm ? "qk_norm+rope+kv_write" : "rope+kv_write");
    for (const char* op : {"paged_attention", "linear", "add_rms_norm"}) ops.push_back(op);
    std::vector<const char*> mlp = {"linear", "silu_mul", "linear"};
    if (c.is_moe_layer(i)) {
      mlp = {"linear", "moe_route", "moe_experts"};
      if (shared)
        for (const char* op : {"linear", "silu_mul", "linear", "add_sigmoid_gated"})
          mlp.push_back(op);
    }
    ops.insert(ops.end(), mlp.begin(), mlp.end());
  }
  for (const char* op : {"add_rms_norm", "gather_rows", "linear"}) ops.push_back(op);
  return ops;
}

TEST(FamilyForward, MixtralRoutesEveryLayerThroughTheExperts) {
  const ModelConfig c = test::tiny_moe_config("mixtral");
  EXPECT_EQ(forward_ops(c), moe_decoder_ops(c, false, false, false));
}

TEST(FamilyForward, Qwen2MoeAddsTheGatedSharedExpertAndKeepsDenseLayers) {
  ModelConfig c = test::tiny_moe_config("qwen2_moe");
  EXPECT_EQ(forward_ops(c), moe_decoder_ops(c, true, false, true));
  c.mlp_only_layers = {0};  // layer 0 dense
  const std::vector<std::string> ops = forward_ops(c);
  EXPECT_EQ(ops, moe_decoder_ops(c, true, false, true));
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "moe_route"), 1);
}

TEST(FamilyForward, Qwen3MoeAddsQkNormsAndHonoursTheSparseStep) {
  ModelConfig c = test::tiny_moe_config("qwen3_moe");
  c.decoder_sparse_step = 2;  // layer 1 sparse, layer 0 dense
  const std::vector<std::string> ops = forward_ops(c);
  EXPECT_EQ(ops, moe_decoder_ops(c, false, true, false));
  EXPECT_EQ(std::count(ops.begin(), ops.end(), "moe_route"), 1);
}

}  // namespace
}  // namespace pagoda
