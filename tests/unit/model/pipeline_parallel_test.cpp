// Pipeline parallelism in the model layer: the layer split and its
// validation (pipeline_parallel.h), what each stage loads, and M stages (each
// a tensor-parallel group of N ranks) on M x N cpu threads
// (create_cpu_communicators) running the same steps as one runner: the last
// stage's logits within fp32 noise and the same greedy tokens; the other
// stages sample nothing; every rank agrees on the KV blocks.
#include "model/pipeline_parallel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "backend/communicator.h"
#include "backend/cpu/cpu_backend.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "memory_source.h"
#include "model/architecture.h"
#include "model/load_weights.h"
#include "model/model_runner.h"
#include "model_steps.h"
#include "parallel/cpu_communicator.h"
#include "runner_script.h"

namespace pagoda {
namespace {

using test::MemorySource;
using test::run_script;
using test::script_options;
using test::tiny_config;
using test::Trace;

ModelConfig layers_config(const std::string& arch, int64_t num_layers) {
  ModelConfig c = tiny_config(arch);
  c.num_layers = num_layers;
  return c;
}

std::vector<std::pair<int64_t, int64_t>> split(int64_t num_layers, int m) {
  std::vector<std::pair<int64_t, int64_t>> v;
  for (int s = 0; s < m; ++s) {
    const IndexRange r = pp_layers(layers_config("llama", num_layers), {s, m});
    v.emplace_back(r.begin, r.end);
  }
  return v;
}

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

TEST(PipelineParallelRules, LayerSplitIsBalancedWithTheRestBeforeTheLastStage) {
  EXPECT_EQ(split(2, 1), (Ranges{{0, 2}}));
  EXPECT_EQ(split(2, 2), (Ranges{{0, 1}, {1, 2}}));
  EXPECT_EQ(split(4, 2), (Ranges{{0, 2}, {2, 4}}));
  EXPECT_EQ(split(5, 3), (Ranges{{0, 2}, {2, 4}, {4, 5}}));  // vLLM's get_pp_indices
  EXPECT_EQ(split(7, 3), (Ranges{{0, 2}, {2, 5}, {5, 7}}));
  EXPECT_EQ(split(5, 2), (Ranges{{0, 3}, {3, 5}}));
  EXPECT_EQ(split(20, 4), (Ranges{{0, 5}, {5, 10}, {10, 15}, {15, 20}}));
  EXPECT_EQ(split(3, 3), (Ranges{{0, 1}, {1, 2}, {2, 3}}));
  for (int64_t layers = 1; layers <= 40; ++layers)
    for (int m = 1; m <= std::min<int64_t>(layers, 8); ++m) {
      const Ranges r = split(layers, m);
      int64_t next = 0, lo = layers, hi = 0;
      for (const auto& [b, e] : r) {
        EXPECT_EQ(b, next) << layers << " over " << m;  // the stages tile the layers in order
        next = e;
        lo = std::min(lo, e - b);
        hi = std::max(hi, e - b);
      }
      EXPECT_EQ(next, layers);
      EXPECT_GE(lo, 1);
      EXPECT_LE(hi - lo, 1) << layers << " over " << m;         // balanced
      EXPECT_EQ(r.back().second - r.back().first, layers / m);  // the last stage: no extra
    }
}

std::string validation_error(int64_t num_layers, int m) {
  const Status st = validate_pipeline_parallel(layers_config("llama", num_layers), m);
  return st.ok() ? "" : st.error().message;
}

TEST(PipelineParallelRules, ValidationNamesTheFlagAndTheField) {
  EXPECT_EQ(validation_error(2, 3), "--pipeline-parallel-size 3 exceeds num_hidden_layers 2");
  EXPECT_EQ(validation_error(2, 0), "--pipeline-parallel-size 0 must be at least 1");
  EXPECT_EQ(validation_error(2, 2), "");
  EXPECT_EQ(validation_error(80, 8), "");

  // The runner checks it too, before loading anything.
  CpuBackend be;
  MemorySource src;
  const ModelConfig c = tiny_config();  // 2 layers
  test::fill_random(c, &src);
  auto comms = create_cpu_communicators(3);
  RunnerOptions o;
  o.num_kv_blocks = 4;
  o.pp = comms[0].get();
  auto r = ModelRunner::create(be, c, src, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "--pipeline-parallel-size 3 exceeds num_hidden_layers 2");
}

std::vector<float> host(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  std::memcpy(v.data(), t.data, v.size() * sizeof(float));
  return v;
}

TEST(PipelineParallelLoad, AStageHoldsItsLayersAndTheGlobalsOfItsEnd) {
  for (const bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied embeddings" : "own lm_head");
    ModelConfig c = layers_config("llama", 5);
    c.tie_word_embeddings = tied;
    MemorySource src;
    test::fill_random(c, &src, 31);
    CpuBackend be;
    const Architecture* arch = find_architecture(c).value();
    const ModelWeights full = load_model_weights(*arch, c, be, src).value();
    size_t bytes = 0;
    for (int s = 0; s < 3; ++s) {
      const PpStage stage{s, 3};
      const ModelWeights w = load_model_weights(*arch, c, be, src, {}, stage).value();
      const IndexRange layers = pp_layers(c, stage);
      ASSERT_EQ(w.first_layer, layers.begin);
      ASSERT_EQ(static_cast<int64_t>(w.layers.size()), layers.size());
      for (size_t i = 0; i < w.layers.size(); ++i) {
        const LayerWeights &x = w.layers[i],
                           &f = full.layers[static_cast<size_t>(layers.begin) + i];
        EXPECT_EQ(host(x.qkv), host(f.qkv)) << "stage " << s << " layer " << i;
        EXPECT_EQ(host(x.o_proj), host(f.o_proj));
        EXPECT_EQ(host(x.gate_up), host(f.gate_up));
        EXPECT_EQ(host(x.down), host(f.down));
        EXPECT_EQ(host(x.input_norm), host(f.input_norm));
      }
      // The embedding on stage 0 (and on the last stage when the lm_head is it).
      EXPECT_EQ(w.embed.empty(), !(stage.first() || (stage.last() && tied)));
      if (!w.embed.empty()) {
        EXPECT_EQ(host(w.embed), host(full.embed));
      }
      EXPECT_EQ(w.final_norm.empty(), !stage.last());
      EXPECT_EQ(w.lm_head.empty(), !stage.last());
      if (stage.last()) {
        EXPECT_EQ(host(w.lm_head), host(full.lm_head));
        EXPECT_EQ(host(w.final_norm), host(full.final_norm));
        if (tied) {
          EXPECT_EQ(w.lm_head.data, w.embed.data);
        }
      }
      bytes += w.num_bytes;
    }
    // Every weight once over the stages; a tied embedding twice.
    EXPECT_EQ(bytes, full.num_bytes + (tied ? host(full.embed).size() * sizeof(float) : 0));
  }
}

// ---- M stages x N tensor-parallel ranks against one runner ------------------------

Trace run_single(const ModelConfig& c, WeightSource& src) {
  CpuBackend be;
  auto r = ModelRunner::create(be, c, src, script_options());
  if (!r.ok()) {
    Trace t;
    t.error = r.error().message;
    return t;
  }
  return run_script(**r, c.vocab_size);
}

// M x N ranks, one thread and one CpuBackend each, all loading from `src`;
// rank (s, t) is traces[s * n + t], with a tp group per stage and a pp group
// per tp rank. Every stage runs the script on `feed`'s tokens.
std::vector<Trace> run_grid(const ModelConfig& c, WeightSource& src, int m, int n,
                            const Trace& feed, RunnerOptions options = script_options()) {
  std::vector<std::vector<std::unique_ptr<Communicator>>> tp, pp;
  for (int s = 0; s < m; ++s) tp.push_back(create_cpu_communicators(n));
  for (int t = 0; t < n; ++t) pp.push_back(create_cpu_communicators(m));
  std::vector<Trace> traces(static_cast<size_t>(m * n));
  std::vector<std::thread> threads;
  for (int s = 0; s < m; ++s)
    for (int t = 0; t < n; ++t)
      threads.emplace_back([&, s, t] {
        CpuBackend be;
        RunnerOptions o = options;
        if (n > 1) o.tp = tp[static_cast<size_t>(s)][static_cast<size_t>(t)].get();
        o.pp = pp[static_cast<size_t>(t)][static_cast<size_t>(s)].get();
        auto r = ModelRunner::create(be, c, src, o);
        Trace& trace = traces[static_cast<size_t>(s * n + t)];
        if (!r.ok()) {
          trace.error = r.error().message;
          return;
        }
        EXPECT_EQ((*r)->is_last_stage(), s == m - 1);
        EXPECT_EQ((*r)->layers().begin, pp_layers(c, {s, m}).begin);
        trace = run_script(**r, c.vocab_size, &feed);
      });
  for (auto& t : threads) t.join();
  return traces;
}

// Runs the script on one runner and on `m` stages of `n` ranks and compares.
void expect_pp_matches_one_runner(const std::string& label, const ModelConfig& c, WeightSource& src,
                                  int m, int n = 1) {
  SCOPED_TRACE(label + " PP=" + std::to_string(m) + " TP=" + std::to_string(n));
  const Trace single = run_single(c, src);
  ASSERT_EQ(single.error, "");
  ASSERT_EQ(single.logits.size(), 8u);
  const std::vector<Trace> ranks = run_grid(c, src, m, n, single);
  for (int s = 0; s < m; ++s) {
    const int64_t stage_layers = pp_layers(c, {s, m}).size();
    for (int t = 0; t < n; ++t) {
      const Trace& tr = ranks[static_cast<size_t>(s * n + t)];
      ASSERT_EQ(tr.error, "") << "stage " << s << " rank " << t;
      ASSERT_EQ(tr.logits.size(), single.logits.size()) << "stage " << s << " rank " << t;
      EXPECT_EQ(tr.num_kv_blocks, single.num_kv_blocks);
      EXPECT_EQ(tr.max_model_len, single.max_model_len);
      // The stage's KV holds its layers only (and, under tp, its kv heads).
      EXPECT_EQ(tr.kv_block_bytes, single.kv_block_bytes * stage_layers / c.num_layers *
                                       std::max<int64_t>(1, c.num_kv_heads / n) / c.num_kv_heads);
      if (s < m - 1) {  // no lm_head: no logits rows, no samples
        for (size_t i = 0; i < tr.logits.size(); ++i) {
          EXPECT_TRUE(tr.logits[i].empty()) << "stage " << s << " step " << i;
          EXPECT_TRUE(tr.tokens[i].empty()) << "stage " << s << " step " << i;
        }
      } else if (t > 0) {  // the last stage's tp ranks: bitwise the same
        const Trace& t0 = ranks[static_cast<size_t>(s * n)];
        for (size_t i = 0; i < tr.logits.size(); ++i)
          EXPECT_EQ(tr.logits[i], t0.logits[i]) << "rank " << t << " step " << i;
        EXPECT_EQ(tr.tokens, t0.tokens);
      }
    }
  }
  const Trace& last = ranks[static_cast<size_t>((m - 1) * n)];
  EXPECT_EQ(last.tokens, single.tokens);
  double max_abs = 0.0;
  for (size_t s = 0; s < single.logits.size(); ++s) {
    ASSERT_EQ(last.logits[s].size(), single.logits[s].size());
    for (size_t i = 0; i < single.logits[s].size(); ++i) {
      const double want = single.logits[s][i], got = last.logits[s][i];
      const double diff = std::abs(got - want);
      max_abs = std::max(max_abs, diff);
      ASSERT_LE(diff, 1e-4 + 1e-4 * std::abs(want)) << "step " << s << " logit " << i;
    }
  }
  // Without tp the stages change no arithmetic: bitwise the one runner's.
  if (n == 1) {
    EXPECT_EQ(last.logits, single.logits);
  }
  std::printf("[ pp ] %s PP=%d TP=%d: max |logit diff| %.3g\n", label.c_str(), m, n, max_abs);
}

TEST(PipelineParallelRunner, LlamaGqaTwoAndThreeStages) {
  ModelConfig c = layers_config("llama", 5);
  c.num_heads = 8;
  c.num_kv_heads = 4;
  MemorySource src;
  test::fill_random(c, &src, 41);
  expect_pp_matches_one_runner("llama Hq=8 Hkv=4 L=5", c, src, 2);
  expect_pp_matches_one_runner("llama Hq=8 Hkv=4 L=5", c, src, 3);  // 2 + 2 + 1 layers
  expect_pp_matches_one_runner("llama Hq=8 Hkv=4 L=5", c, src, 5);  // one layer each
}

TEST(PipelineParallelRunner, TwoStagesOfTwoTensorParallelRanks) {
  ModelConfig c = layers_config("llama", 4);
  c.num_heads = 8;
  c.num_kv_heads = 4;
  MemorySource src;
  test::fill_random(c, &src, 42);
  expect_pp_matches_one_runner("llama Hq=8 Hkv=4 L=4", c, src, 2, 2);
  ModelConfig q = layers_config("qwen3", 3);
  q.qk_norm = true;
  MemorySource qsrc;
  test::fill_random(q, &qsrc, 43);
  expect_pp_matches_one_runner("qwen3 L=3", q, qsrc, 2, 2);
}

TEST(PipelineParallelRunner, Qwen3QkNormAndTiedEmbeddings) {
  ModelConfig c = layers_config("qwen3", 4);
  c.qk_norm = true;
  c.tie_word_embeddings = true;  // the last stage loads the embedding for its lm_head
  MemorySource src;
  test::fill_random(c, &src, 44);
  expect_pp_matches_one_runner("qwen3 tied L=4", c, src, 2);
  expect_pp_matches_one_runner("qwen3 tied L=4", c, src, 3);
}

TEST(PipelineParallelRunner, MixtureOfExpertsStages) {
  for (const char* arch : {"mixtral", "qwen2_moe", "qwen3_moe"}) {
    ModelConfig c = test::tiny_moe_config(arch);
    c.num_layers = 3;
    if (std::string(arch) == "qwen2_moe") c.mlp_only_layers = {1};
    MemorySource src;
    test::fill_random(c, &src, 45);
    expect_pp_matches_one_runner(arch, c, src, 2);
    expect_pp_matches_one_runner(arch, c, src, 3);
  }
}

std::string stories_dir() {
  const char* shared = std::getenv("PAGODA_SHARED_DIR");
  return std::string(shared != nullptr ? shared : PAGODA_SHARED_DIR) + "/models/stories260K";
}

TEST(PipelineParallelRunner, Stories260K) {
  auto config = load_hf_config(stories_dir() + "/config.json");
  ASSERT_TRUE(config.ok()) << config.error().message;  // 5 layers, tied embeddings
  auto src = open_safetensors_folder(stories_dir());
  ASSERT_TRUE(src.ok()) << src.error().message;
  expect_pp_matches_one_runner("stories260K", *config, **src, 2);
  expect_pp_matches_one_runner("stories260K", *config, **src, 3);
  expect_pp_matches_one_runner("stories260K", *config, **src, 2, 2);
}

TEST(PipelineParallelRunner, StagesAgreeOnTheSmallestKvPool) {
  // 5 layers over 3 stages: 2 + 2 + 1. One budget in bytes gives the 1-layer
  // stage twice the blocks of the others; every rank must take the smaller.
  ModelConfig c = layers_config("llama", 5);
  MemorySource src;
  test::fill_random(c, &src, 45);
  RunnerOptions o = script_options();
  o.num_kv_blocks = 0;
  const int64_t two_layer_block = 2 * 2 * o.block_size * c.num_kv_heads * c.head_dim * 4;
  o.kv_cache_bytes = 40 * two_layer_block + two_layer_block / 2;
  std::vector<std::vector<std::unique_ptr<Communicator>>> pp;
  pp.push_back(create_cpu_communicators(3));
  std::vector<int64_t> blocks(3, -1), max_len(3, -1);
  std::vector<std::string> errors(3);
  std::vector<std::thread> threads;
  for (int s = 0; s < 3; ++s)
    threads.emplace_back([&, s] {
      CpuBackend be;
      RunnerOptions so = o;
      so.pp = pp[0][static_cast<size_t>(s)].get();
      auto r = ModelRunner::create(be, c, src, so);
      if (!r.ok()) {
        errors[static_cast<size_t>(s)] = r.error().message;
        return;
      }
      blocks[static_cast<size_t>(s)] = (*r)->num_kv_blocks();
      max_len[static_cast<size_t>(s)] = (*r)->max_model_len();
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors, std::vector<std::string>(3));
  EXPECT_EQ(blocks, std::vector<int64_t>(3, 40));
  EXPECT_EQ(max_len, std::vector<int64_t>(3, 16));
}

TEST(PipelineParallelRunner, RefusesPendingRowsOnEveryStage) {
  const ModelConfig c = layers_config("llama", 2);
  MemorySource src;
  test::fill_random(c, &src, 46);
  auto pp = create_cpu_communicators(2);
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int s = 0; s < 2; ++s)
    threads.emplace_back([&, s] {
      CpuBackend be;
      RunnerOptions o = script_options();
      o.pp = pp[static_cast<size_t>(s)].get();
      auto r = ModelRunner::create(be, c, src, o);
      if (!r.ok()) {
        errors[static_cast<size_t>(s)] = r.error().message;
        return;
      }
      // A first step, then a decode whose token is the first step's sample.
      SampleOutput out;
      StepBatch prefill = test::make_step({{{1, 2, 3}, 0, {0}}}, test::kScriptBlockSize, 1);
      Status st = (*r)->execute(prefill, &out);
      if (!st.ok()) {
        errors[static_cast<size_t>(s)] = "prefill: " + st.error().message;
        return;
      }
      StepBatch decode = test::make_step({{{0}, 3, {0}}}, test::kScriptBlockSize, 1);
      decode.pending_rows = {0};
      decode.pending_sources = {0};
      st = (*r)->launch(decode, 0);
      errors[static_cast<size_t>(s)] = st.ok() ? "" : st.error().message;
      if (!st.ok()) {
        EXPECT_EQ(st.error().code, ErrorCode::kInternal);
      }
    });
  for (auto& t : threads) t.join();
  const std::string want =
      "pipeline parallelism: a step with pending rows (sampled ids kept on the device) cannot "
      "run on a pipeline stage; async scheduling must be off";
  EXPECT_EQ(errors, std::vector<std::string>(2, want));
}

}  // namespace
}  // namespace pagoda
