// Tensor parallelism in the model layer: the sharding rules and their
// validation (tensor_parallel.h), the WeightLoader's slice loads, the
// vocab-parallel embedding's lookup (bitwise the full table's rows) and its
// bytes per rank, and N
// ModelRunners on N cpu threads (create_cpu_communicators) running the same
// steps as one runner without tp: the same greedy tokens, logits within fp32
// summation-order noise, and every rank bitwise equal to rank 0.
#include "model/tensor_parallel.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "backend/communicator.h"
#include "backend/cpu/cpu_backend.h"
#include "finishes_within.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "memory_source.h"
#include "model/architecture.h"
#include "model/blocks.h"
#include "model/load_weights.h"
#include "model/model_runner.h"
#include "model/parallel_runner.h"
#include "model/weight_loader.h"
#include "model_steps.h"
#include "runner_script.h"
#include "parallel/cpu_communicator.h"

namespace pagoda {
namespace {

using test::MemorySource;
using test::run_script;
using test::script_options;
using test::Trace;
using test::tiny_config;

ModelConfig heads_config(const std::string& arch, int64_t hq, int64_t hkv) {
  ModelConfig c = tiny_config(arch);
  c.num_heads = hq;
  c.num_kv_heads = hkv;
  return c;
}

std::string validation_error(int64_t hq, int64_t hkv, int64_t inter, int tp) {
  ModelConfig c = heads_config("llama", hq, hkv);
  c.intermediate_size = inter;
  const Status st = validate_tensor_parallel(c, tp);
  return st.ok() ? "" : st.error().message;
}

TEST(TensorParallelRules, ValidationNamesTheFlagTheFieldAndTheValues) {
  EXPECT_EQ(validation_error(32, 8, 64, 3),
            "--tensor-parallel-size 3 does not divide num_attention_heads 32");
  EXPECT_EQ(validation_error(12, 6, 64, 4),
            "--tensor-parallel-size 4 neither divides nor is a multiple of num_key_value_heads 6");
  EXPECT_EQ(validation_error(8, 8, 50, 4),
            "--tensor-parallel-size 4 does not divide intermediate_size 50");
  EXPECT_EQ(validation_error(8, 8, 64, 0), "--tensor-parallel-size 0 must be at least 1");
  for (int tp : {1, 2, 4, 8}) EXPECT_EQ(validation_error(32, 8, 64, tp), "") << tp;
  EXPECT_EQ(validation_error(32, 2, 64, 8), "");  // kv heads replicated on 4 ranks each
  EXPECT_EQ(validation_error(32, 1, 64, 8), "");

  // The runner checks it too, before loading anything.
  CpuBackend be;
  MemorySource src;
  const ModelConfig c = tiny_config();  // 4 heads
  test::fill_random(c, &src);
  auto comms = create_cpu_communicators(3);
  RunnerOptions o;
  o.num_kv_blocks = 4;
  o.tp = comms[0].get();
  auto r = ModelRunner::create(be, c, src, o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().message, "--tensor-parallel-size 3 does not divide num_attention_heads 4");
}

TEST(TensorParallelRules, MixtureOfExpertsModelsAreRefusedAboveOneRank) {
  for (const char* arch : {"mixtral", "qwen2_moe", "qwen3_moe"}) {
    const ModelConfig c = test::tiny_moe_config(arch);
    EXPECT_TRUE(validate_tensor_parallel(c, 1).ok()) << arch;
    const Status st = validate_tensor_parallel(c, 2);
    ASSERT_FALSE(st.ok()) << arch;
    EXPECT_EQ(st.error().message,
              "--tensor-parallel-size 2 is not supported for mixture-of-experts models yet "
              "(experts are not sharded)");
  }
}

TEST(TensorParallelRules, ShardsSplitHeadsAndKeepTheGqaMappingLocally) {
  struct Case {
    int64_t hq, hkv;
    int n;
  };
  for (const Case k : {Case{8, 4, 2}, Case{8, 4, 4}, Case{8, 2, 4}, Case{8, 1, 2}, Case{8, 8, 8},
                       Case{32, 8, 8}, Case{32, 2, 8}, Case{8, 4, 1}}) {
    const ModelConfig c = heads_config("llama", k.hq, k.hkv);
    ASSERT_TRUE(validate_tensor_parallel(c, k.n).ok());
    int64_t next_q = 0, next_i = 0;
    for (int r = 0; r < k.n; ++r) {
      const TpShard s{r, k.n};
      const IndexRange q = tp_q_heads(c, s), kv = tp_kv_heads(c, s), in = tp_intermediate(c, s);
      EXPECT_EQ(q.begin, next_q);  // the q heads and MLP rows tile the model in rank order
      EXPECT_EQ(in.begin, next_i);
      next_q = q.end;
      next_i = in.end;
      const ModelConfig local = tp_local_config(c, s);
      EXPECT_EQ(local.num_heads, k.hq / k.n);
      EXPECT_EQ(local.num_kv_heads, std::max<int64_t>(1, k.hkv / k.n));
      EXPECT_EQ(local.intermediate_size, c.intermediate_size / k.n);
      EXPECT_EQ(local.hidden_size, c.hidden_size);
      // Local q head j reads local kv head j / (local Hq / local Hkv): that must
      // be the global head's kv head h / (Hq / Hkv).
      const int64_t local_group = local.num_heads / local.num_kv_heads;
      for (int64_t j = 0; j < local.num_heads; ++j)
        EXPECT_EQ(kv.begin + j / local_group, (q.begin + j) / (k.hq / k.hkv))
            << "Hq " << k.hq << " Hkv " << k.hkv << " N " << k.n << " rank " << r << " head " << j;
    }
    EXPECT_EQ(next_q, k.hq);
    EXPECT_EQ(next_i, c.intermediate_size);
  }
}

TEST(TensorParallelRules, TpMinGivesEveryRankTheSmallestValue) {
  const std::vector<int64_t> values = {(int64_t{1} << 39) + 12345, 7, (int64_t{3} << 30) + 1, 1000};
  auto comms = create_cpu_communicators(static_cast<int>(values.size()));
  std::vector<int64_t> got(values.size(), -1);
  std::vector<std::thread> threads;
  for (size_t r = 0; r < values.size(); ++r)
    threads.emplace_back([&, r] {
      CpuBackend be;
      got[r] = tp_min(comms[r].get(), be, values[r]);
    });
  for (auto& t : threads) t.join();
  for (int64_t g : got) EXPECT_EQ(g, 7);

  // Exact above f32's 24-bit mantissa.
  auto two = create_cpu_communicators(2);
  const std::vector<int64_t> big = {(int64_t{1} << 39) + 3, (int64_t{1} << 39) + 1};
  threads.clear();
  for (size_t r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      CpuBackend be;
      got[r] = tp_min(two[r].get(), be, big[r]);
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(got[0], big[1]);
  EXPECT_EQ(got[1], big[1]);
  CpuBackend be;
  EXPECT_EQ(tp_min(nullptr, be, 42), 42);
}

// ---- WeightLoader slices -------------------------------------------------------

std::vector<float> iota(int64_t n, float scale) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = scale * static_cast<float>(i) - 1.0f;
  return v;
}

std::vector<float> host(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  std::memcpy(v.data(), t.data, v.size() * sizeof(float));
  return v;
}

// Rows [r0, r1) x columns [c0, c1) of a full [*, cols] load.
std::vector<float> slice(const std::vector<float>& full, int64_t cols, int64_t r0, int64_t r1,
                         int64_t c0, int64_t c1) {
  std::vector<float> v;
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t c = c0; c < c1; ++c) v.push_back(full[static_cast<size_t>(r * cols + c)]);
  return v;
}

TEST(WeightLoaderSlices, RowsFusedPartsAndColumnsMatchTheFullLoads) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {  // as is, and converted per slice
    CpuBackend be;
    MemorySource src;
    src.add("a", {6, 4}, iota(24, 0.25f), dtype);
    src.add("b", {3, 4}, iota(12, 0.5f), dtype);
    src.add("bias_a", {6}, iota(6, 0.125f), dtype);
    src.add("bias_b", {3}, iota(3, 2.0f), dtype);
    ModelWeights w;
    WeightLoader loader(be, src, &w);
    const std::vector<float> a = host(loader.load("a", {6, 4}).value());
    const std::vector<float> b = host(loader.load("b", {3, 4}).value());
    const std::vector<float> ba = host(loader.load("bias_a", {6}).value());
    const std::vector<float> bb = host(loader.load("bias_b", {3}).value());

    auto fused = loader.load_fused({"a", "b"}, {6, 3}, {4}, {{2, 5}, {1, 2}});
    ASSERT_TRUE(fused.ok()) << fused.error().message;
    EXPECT_EQ(fused->shape[0], 4);
    EXPECT_EQ(fused->shape[1], 4);
    std::vector<float> want = slice(a, 4, 2, 5, 0, 4);
    for (float x : slice(b, 4, 1, 2, 0, 4)) want.push_back(x);
    EXPECT_EQ(host(*fused), want);

    auto bias = loader.load_fused({"bias_a", "bias_b"}, {6, 3}, {}, {{4, 6}, {0, 1}});
    ASSERT_TRUE(bias.ok()) << bias.error().message;
    EXPECT_EQ(host(*bias), (std::vector<float>{ba[4], ba[5], bb[0]}));

    auto cols = loader.load_columns("a", {6, 4}, {1, 3});
    ASSERT_TRUE(cols.ok()) << cols.error().message;
    EXPECT_EQ(cols->shape[0], 6);
    EXPECT_EQ(cols->shape[1], 2);
    EXPECT_EQ(host(*cols), slice(a, 4, 0, 6, 1, 3));
    auto all_cols = loader.load_columns("a", {6, 4}, {0, 4});
    ASSERT_TRUE(all_cols.ok());
    EXPECT_EQ(host(*all_cols), a);

    // Shapes are checked against the file's full shape, not the slice's.
    auto wrong = loader.load_columns("a", {6, 2}, {0, 2});
    ASSERT_FALSE(wrong.ok());
    EXPECT_EQ(wrong.error().message, "tensor a: expected [6, 2], found [6, 4]");
    auto wrong_rows = loader.load_fused({"a", "b"}, {3, 3}, {4}, {{0, 3}, {0, 3}});
    ASSERT_FALSE(wrong_rows.ok());
    EXPECT_EQ(wrong_rows.error().message, "tensor a: expected [3, 4], found [6, 4]");
  }
}

TEST(WeightLoaderSlices, AShardHoldsItsHeadsAndMlpRowsOfTheFullWeights) {
  const ModelConfig c = heads_config("qwen2", 8, 2);  // replicated kv heads at N = 4
  ModelConfig biased = c;
  biased.attention_bias = true;
  MemorySource src;
  test::fill_random(biased, &src, 21);
  CpuBackend be;
  const Architecture* arch = find_architecture(biased).value();
  const ModelWeights full = load_model_weights(*arch, biased, be, src).value();
  const int64_t h = c.hidden_size, d = c.head_dim, inter = c.intermediate_size;
  const int64_t q_rows = c.num_heads * d, kv_rows = c.num_kv_heads * d;
  for (int rank = 0; rank < 4; ++rank) {
    const TpShard s{rank, 4};
    const ModelWeights w = load_model_weights(*arch, biased, be, src, s).value();
    const IndexRange q = tp_q_heads(c, s), kv = tp_kv_heads(c, s), in = tp_intermediate(c, s);
    ASSERT_EQ(kv.size(), 1);
    for (size_t l = 0; l < w.layers.size(); ++l) {
      const LayerWeights &f = full.layers[l], &x = w.layers[l];
      const std::vector<float> qkv = host(f.qkv), bias = host(f.qkv_bias);
      std::vector<float> want, want_bias;
      for (const auto [r0, r1] :
           {std::pair{q.begin * d, q.end * d},
            std::pair{q_rows + kv.begin * d, q_rows + kv.end * d},
            std::pair{q_rows + kv_rows + kv.begin * d, q_rows + kv_rows + kv.end * d}}) {
        for (float v : slice(qkv, h, r0, r1, 0, h)) want.push_back(v);
        for (float v : slice(bias, 1, r0, r1, 0, 1)) want_bias.push_back(v);
      }
      EXPECT_EQ(host(x.qkv), want) << "rank " << rank << " layer " << l;
      EXPECT_EQ(host(x.qkv_bias), want_bias);
      EXPECT_EQ(host(x.o_proj), slice(host(f.o_proj), q_rows, 0, h, q.begin * d, q.end * d));
      const std::vector<float> gate_up = host(f.gate_up);
      want = slice(gate_up, h, in.begin, in.end, 0, h);
      for (float v : slice(gate_up, h, inter + in.begin, inter + in.end, 0, h)) want.push_back(v);
      EXPECT_EQ(host(x.gate_up), want);
      EXPECT_EQ(host(x.down), slice(host(f.down), inter, 0, h, in.begin, in.end));
      EXPECT_EQ(host(x.input_norm), host(f.input_norm));  // replicated
    }
    // Vocab-parallel head and embedding: the rank's block of rows, zero rows
    // padding it (97 = 4 * 25 - 3: the last rank holds 22 rows and 3 of padding).
    const IndexRange v = tp_vocab(c, s);
    const int64_t block = tp_vocab_block(c, 4);
    ASSERT_EQ(block, 25);
    ASSERT_EQ(w.lm_head.shape[0], block);
    std::vector<float> want = slice(host(full.lm_head), h, v.begin, v.end, 0, h);
    want.resize(static_cast<size_t>(block * h), 0.0f);
    EXPECT_EQ(host(w.lm_head), want) << "rank " << rank;
    ASSERT_EQ(w.embed.shape[0], block);
    EXPECT_EQ(w.embed_first_row, v.begin);
    want = slice(host(full.embed), h, v.begin, v.end, 0, h);
    want.resize(static_cast<size_t>(block * h), 0.0f);
    EXPECT_EQ(host(w.embed), want) << "rank " << rank;
  }
}

TEST(TensorParallelRules, VocabBlocksCoverTheVocabOnceWithPaddingLast) {
  ModelConfig c = tiny_config("llama");
  for (int64_t vocab : {1, 5, 96, 97, 128256}) {
    c.vocab_size = vocab;
    for (int n : {1, 2, 3, 4, 8}) {
      const int64_t block = tp_vocab_block(c, n);
      EXPECT_EQ(block, (vocab + n - 1) / n);
      int64_t next = 0;
      for (int r = 0; r < n; ++r) {
        const IndexRange v = tp_vocab(c, {r, n});
        EXPECT_EQ(v.begin, std::min(next, vocab)) << vocab << " " << n << " " << r;
        EXPECT_LE(v.size(), block);
        next = v.end;
        if (v.size() < block) {
          EXPECT_EQ(v.end, vocab);  // only the last ranks' blocks are short
        }
      }
      EXPECT_EQ(next, vocab);
    }
  }
}

// ---- the vocab-parallel embedding ----------------------------------------------

// Sets PAGODA_REPLICATED_EMBEDDING for its lifetime (the A/B switch of
// tp_vocab_parallel_embedding).
class ReplicatedEmbedding {
 public:
  ReplicatedEmbedding() { setenv("PAGODA_REPLICATED_EMBEDDING", "1", 1); }
  ~ReplicatedEmbedding() { unsetenv("PAGODA_REPLICATED_EMBEDDING"); }
};

TEST(VocabParallelEmbedding, DefaultAboveOneRankUnlessTheEnvironmentAsksForReplicated) {
  EXPECT_FALSE(tp_vocab_parallel_embedding(1));
  EXPECT_TRUE(tp_vocab_parallel_embedding(2));
  setenv("PAGODA_REPLICATED_EMBEDDING", "0", 1);
  EXPECT_TRUE(tp_vocab_parallel_embedding(4));
  {
    ReplicatedEmbedding replicated;
    EXPECT_FALSE(tp_vocab_parallel_embedding(2));
  }
  EXPECT_TRUE(tp_vocab_parallel_embedding(2));
}

// Each of N ranks loads its block with load_embedding and embeds ids at every
// shard's first and last row (the last block's padded rows lie past V) and
// elsewhere; embed_tokens (lookup + all-reduce) must give every rank bitwise
// the full table's rows: one rank contributes each row, the others zeros.
TEST(VocabParallelEmbedding, ShardLookupsSumToTheFullRowsBitwise) {
  for (int64_t vocab : {97, 96, 3}) {  // 97: padded last block; 3 < 4 ranks: an empty rank
    for (int n : {2, 3, 4}) {
      SCOPED_TRACE("V=" + std::to_string(vocab) + " N=" + std::to_string(n));
      ModelConfig c = tiny_config("llama");
      c.vocab_size = vocab;
      const int64_t h = c.hidden_size, block = tp_vocab_block(c, n);
      MemorySource src;
      test::fill_random(c, &src, 21);
      std::vector<int32_t> ids = {0, static_cast<int32_t>(vocab - 1), static_cast<int32_t>(vocab / 2)};
      for (int r = 0; r < n; ++r) {
        const IndexRange v = tp_vocab(c, {r, n});
        if (v.size() == 0) continue;
        ids.push_back(static_cast<int32_t>(v.begin));
        ids.push_back(static_cast<int32_t>(v.end - 1));
      }
      const int64_t t = static_cast<int64_t>(ids.size());
      CpuBackend full_be;
      ModelWeights full;
      WeightLoader full_loader(full_be, src, &full);
      const std::vector<float> table =
          host(full_loader.load("model.embed_tokens.weight", {vocab, h}).value());
      std::vector<float> want;
      for (int32_t id : ids)
        for (float x : slice(table, h, id, id + 1, 0, h)) want.push_back(x);

      auto comms = create_cpu_communicators(n);
      std::vector<std::vector<float>> got(static_cast<size_t>(n));
      std::vector<std::thread> threads;
      for (int rank = 0; rank < n; ++rank)
        threads.emplace_back([&, rank] {
          CpuBackend be;
          ModelWeights w;
          WeightLoader loader(be, src, &w, {rank, n});
          const GlobalTensorNames g{"model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"};
          ASSERT_TRUE(load_embedding(c, g, loader, &w).ok());
          // The rank's block: its rows, then zero rows up to C.
          const IndexRange v = tp_vocab(c, {rank, n});
          EXPECT_TRUE(w.embed_vocab_parallel);
          EXPECT_EQ(w.embed_first_row, v.begin);
          ASSERT_EQ(w.embed.shape[0], block);
          std::vector<float> block_want = slice(table, h, v.begin, v.end, 0, h);
          block_want.resize(static_cast<size_t>(block * h), 0.0f);
          EXPECT_EQ(host(w.embed), block_want) << "rank " << rank;

          std::vector<int32_t> id_copy = ids;
          std::vector<float> out(static_cast<size_t>(t * h), std::nanf(""));
          AttentionMetadata meta{};
          std::vector<KvCacheView> caches;
          ForwardContext ctx{.backend = be,
                             .config = c,
                             .tp = comms[static_cast<size_t>(rank)].get(),
                             .pp = nullptr,
                             .layout = {},
                             .attention_scale = 1.0f,
                             .eps = 1e-5f,
                             .ids = Tensor(id_copy.data(), DType::kI32, {t}),
                             .meta = meta,
                             .caches = caches,
                             .residual = Tensor(out.data(), DType::kF32, {t, h})};
          embed_tokens(ctx, w);
          got[static_cast<size_t>(rank)] = out;
        });
      for (auto& th : threads) th.join();
      for (int r = 0; r < n; ++r) {
        const std::vector<float>& o = got[static_cast<size_t>(r)];
        ASSERT_EQ(o.size(), want.size());
        EXPECT_EQ(0, std::memcmp(o.data(), want.data(), want.size() * sizeof(float))) << "rank " << r;
      }
    }
  }
}

// Every rank's weight bytes (ModelRunner::weights().num_bytes), the N
// runners created together (their start-up runs collectives).
std::vector<size_t> rank_weight_bytes(const ModelConfig& c, WeightSource& src, int n,
                                      std::vector<bool>* head_is_embed = nullptr) {
  auto comms = create_cpu_communicators(n);
  std::vector<size_t> bytes(static_cast<size_t>(n), 0);
  std::vector<char> shared(static_cast<size_t>(n), 0);
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank)
    threads.emplace_back([&, rank] {
      CpuBackend be;
      RunnerOptions o = script_options();
      o.tp = comms[static_cast<size_t>(rank)].get();
      auto r = ModelRunner::create(be, c, src, o);
      ASSERT_TRUE(r.ok()) << r.error().message;
      const ModelWeights& w = (*r)->weights();
      bytes[static_cast<size_t>(rank)] = w.num_bytes;
      shared[static_cast<size_t>(rank)] = w.lm_head.data == w.embed.data;
    });
  for (auto& th : threads) th.join();
  if (head_is_embed != nullptr) head_is_embed->assign(shared.begin(), shared.end());
  return bytes;
}

// The rank holds C = ceil(V/N) embedding rows instead of V; a tied model's
// head block is that same buffer, so it drops the whole replicated table.
TEST(VocabParallelEmbedding, EachRankHoldsItsBlockAndATiedHeadSharesIt) {
  for (bool tied : {false, true}) {
    for (int n : {2, 4}) {
      SCOPED_TRACE(std::string(tied ? "tied" : "untied") + " N=" + std::to_string(n));
      ModelConfig c = heads_config("llama", 8, 4);
      c.tie_word_embeddings = tied;
      MemorySource src;
      test::fill_random(c, &src, 22);
      std::vector<bool> shares;
      const std::vector<size_t> sharded = rank_weight_bytes(c, src, n, &shares);
      std::vector<size_t> replicated;
      {
        ReplicatedEmbedding env;
        replicated = rank_weight_bytes(c, src, n);
      }
      const size_t row = static_cast<size_t>(c.hidden_size) * sizeof(float);
      const size_t v = static_cast<size_t>(c.vocab_size), block = static_cast<size_t>(tp_vocab_block(c, n));
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(shares[static_cast<size_t>(r)], tied) << "rank " << r;
        EXPECT_EQ(replicated[static_cast<size_t>(r)] - sharded[static_cast<size_t>(r)],
                  (tied ? v : v - block) * row)
            << "rank " << r;
      }
    }
  }
}

// ---- N runners against one ----------------------------------------------------

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

// N ranks, one thread and one CpuBackend each, all loading from `src`.
std::vector<Trace> run_ranks(const ModelConfig& c, WeightSource& src, int n) {
  auto comms = create_cpu_communicators(n);
  std::vector<Trace> traces(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int rank = 0; rank < n; ++rank)
    threads.emplace_back([&, rank] {
      CpuBackend be;
      RunnerOptions o = script_options();
      o.tp = comms[static_cast<size_t>(rank)].get();
      auto r = ModelRunner::create(be, c, src, o);
      Trace& t = traces[static_cast<size_t>(rank)];
      if (!r.ok()) {
        t.error = r.error().message;
        return;
      }
      t = run_script(**r, c.vocab_size);
    });
  for (auto& t : threads) t.join();
  return traces;
}

// Runs the script on one runner and on `n` ranks and compares them.
void expect_tp_matches_one_runner(const std::string& label, const ModelConfig& c, WeightSource& src,
                                  int n) {
  SCOPED_TRACE(label);
  const Trace single = run_single(c, src);
  ASSERT_EQ(single.error, "");
  ASSERT_EQ(single.logits.size(), 8u);
  const std::vector<Trace> ranks = run_ranks(c, src, n);
  for (int r = 0; r < n; ++r) {
    const Trace& t = ranks[static_cast<size_t>(r)];
    ASSERT_EQ(t.error, "") << "rank " << r;
    ASSERT_EQ(t.logits.size(), single.logits.size()) << "rank " << r;
    EXPECT_EQ(t.num_kv_blocks, single.num_kv_blocks);
    EXPECT_EQ(t.max_model_len, single.max_model_len);
    // The rank's KV holds its kv heads only (one when they are replicated).
    EXPECT_EQ(t.kv_block_bytes,
              single.kv_block_bytes * std::max<int64_t>(1, c.num_kv_heads / n) / c.num_kv_heads);
    if (r == 0) continue;
    for (size_t s = 0; s < t.logits.size(); ++s) {  // bitwise: every rank samples the same
      ASSERT_EQ(t.logits[s].size(), ranks[0].logits[s].size());
      EXPECT_EQ(0, std::memcmp(t.logits[s].data(), ranks[0].logits[s].data(),
                               t.logits[s].size() * sizeof(float)))
          << "rank " << r << " step " << s;
    }
    EXPECT_EQ(t.tokens, ranks[0].tokens) << "rank " << r;
  }
  EXPECT_EQ(ranks[0].tokens, single.tokens);
  double max_abs = 0.0, max_rel = 0.0;
  for (size_t s = 0; s < single.logits.size(); ++s) {
    ASSERT_EQ(ranks[0].logits[s].size(), single.logits[s].size());
    for (size_t i = 0; i < single.logits[s].size(); ++i) {
      const double want = single.logits[s][i], got = ranks[0].logits[s][i];
      const double diff = std::abs(got - want);
      max_abs = std::max(max_abs, diff);
      max_rel = std::max(max_rel, diff / std::max(1e-3, std::abs(want)));
      ASSERT_LE(diff, 1e-4 + 1e-4 * std::abs(want)) << "step " << s << " logit " << i;
    }
  }
  std::printf("[ tp ] %s N=%d: max |logit diff| %.3g abs, %.3g rel\n", label.c_str(), n, max_abs,
              max_rel);
}

TEST(TensorParallelRunner, LlamaGqaAtTwoAndFourRanks) {
  const ModelConfig c = heads_config("llama", 8, 4);
  MemorySource src;
  test::fill_random(c, &src, 11);
  expect_tp_matches_one_runner("llama Hq=8 Hkv=4", c, src, 2);
  expect_tp_matches_one_runner("llama Hq=8 Hkv=4", c, src, 4);
  ReplicatedEmbedding replicated;  // the A/B path stays right
  expect_tp_matches_one_runner("llama Hq=8 Hkv=4, replicated embedding", c, src, 2);
}

// A tied llama: the vocab-parallel embedding's block is also the head's.
TEST(TensorParallelRunner, LlamaTiedHeadSharesTheEmbeddingBlock) {
  ModelConfig c = heads_config("llama", 8, 4);
  c.tie_word_embeddings = true;
  MemorySource src;
  test::fill_random(c, &src, 19);
  expect_tp_matches_one_runner("llama tied", c, src, 2);
  expect_tp_matches_one_runner("llama tied", c, src, 4);
}

TEST(TensorParallelRunner, ReplicatedKvHeads) {
  const ModelConfig two = heads_config("llama", 8, 2);
  MemorySource src2;
  test::fill_random(two, &src2, 12);
  expect_tp_matches_one_runner("llama Hq=8 Hkv=2", two, src2, 4);
  const ModelConfig one = heads_config("llama", 8, 1);
  MemorySource src1;
  test::fill_random(one, &src1, 13);
  expect_tp_matches_one_runner("llama Hq=8 Hkv=1", one, src1, 2);
}

TEST(TensorParallelRunner, Qwen2QkvBias) {
  ModelConfig c = heads_config("qwen2", 8, 4);
  c.attention_bias = true;
  MemorySource src;
  test::fill_random(c, &src, 14);
  expect_tp_matches_one_runner("qwen2", c, src, 2);
  expect_tp_matches_one_runner("qwen2", c, src, 4);
}

TEST(TensorParallelRunner, Qwen3QkNorm) {
  ModelConfig c = heads_config("qwen3", 8, 2);
  c.qk_norm = true;
  MemorySource src;
  test::fill_random(c, &src, 15);
  expect_tp_matches_one_runner("qwen3", c, src, 2);
  expect_tp_matches_one_runner("qwen3", c, src, 4);
}

// Phi-3's pre-fused qkv_proj / gate_up_proj sliced per rank.
TEST(TensorParallelRunner, Phi3PreFusedTensors) {
  const ModelConfig c = heads_config("phi3", 8, 2);
  MemorySource src;
  test::fill_random(c, &src, 17);
  expect_tp_matches_one_runner("phi3", c, src, 2);
  expect_tp_matches_one_runner("phi3", c, src, 4);
}

// Gemma 2: a tied, vocab-parallel head with final-logit soft-capping (on
// each rank's block), sandwich norms (the partial block output is summed
// before norm_output) and the embedding scale.
TEST(TensorParallelRunner, Gemma2TiedHeadAndSandwichNorms) {
  const ModelConfig c = tiny_config("gemma2");
  MemorySource src;
  test::fill_random(c, &src, 18);
  expect_tp_matches_one_runner("gemma2", c, src, 2);
  expect_tp_matches_one_runner("gemma2", c, src, 4);
}

TEST(TensorParallelRunner, Mistral) {
  const ModelConfig c = heads_config("mistral", 4, 2);
  MemorySource src;
  test::fill_random(c, &src, 16);
  expect_tp_matches_one_runner("mistral", c, src, 2);
}

std::string stories_dir() {
  const char* shared = std::getenv("PAGODA_SHARED_DIR");
  return std::string(shared != nullptr ? shared : PAGODA_SHARED_DIR) + "/models/stories260K";
}

TEST(TensorParallelRunner, Stories260KAtTwoAndFourRanks) {
  auto config = load_hf_config(stories_dir() + "/config.json");
  ASSERT_TRUE(config.ok()) << config.error().message;
  ASSERT_TRUE(validate_tensor_parallel(*config, 2).ok());  // 8 heads, 4 kv heads, 172
  auto src = open_safetensors_folder(stories_dir());
  ASSERT_TRUE(src.ok()) << src.error().message;
  expect_tp_matches_one_runner("stories260K", *config, **src, 2);
  ASSERT_TRUE(validate_tensor_parallel(*config, 4).ok());
  expect_tp_matches_one_runner("stories260K", *config, **src, 4);
}

TEST(TensorParallelRunner, SafetensorsReadsAreSafeFromSeveralThreads) {
  auto src = open_safetensors_folder(stories_dir());
  ASSERT_TRUE(src.ok()) << src.error().message;
  WeightSource& s = **src;
  std::vector<std::vector<uint8_t>> serial;
  auto bytes_of = [](const HostTensor& h) {
    const auto* p = static_cast<const uint8_t*>(h.data);
    return std::vector<uint8_t>(p, p + h.numel() * static_cast<int64_t>(dtype_size(h.dtype)));
  };
  for (const TensorInfo& t : s.tensors()) serial.push_back(bytes_of(s.read(t.name).value()));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < mismatches.size(); ++i)
    threads.emplace_back([&, i] {
      for (int round = 0; round < 3; ++round)
        for (size_t k = 0; k < s.tensors().size(); ++k) {
          auto h = s.read(s.tensors()[k].name);
          if (!h.ok() || bytes_of(*h) != serial[k]) ++mismatches[i];
        }
    });
  for (auto& t : threads) t.join();
  EXPECT_EQ(mismatches, std::vector<int>(4, 0));
}

// Rank 1's runner fails at once (its options are refused) while rank 0 loads
// its shard and then waits in the KV sizing's all-reduce for rank 1: the
// abort releases it and the error is rank 1's own.
TEST(TensorParallelRunner, ARankFailingInCreateDoesNotHangThePeerWaitingForIt) {
  EXPECT_TRUE(test::finishes_within(std::chrono::seconds(60), [] {
    auto config = load_hf_config(stories_dir() + "/config.json");
    ASSERT_TRUE(config.ok()) << config.error().message;
    auto src = open_safetensors_folder(stories_dir());
    ASSERT_TRUE(src.ok()) << src.error().message;
    RankResources resources;
    resources.communicators = create_cpu_communicators(2);
    std::vector<Communicator*> comms = {resources.communicators[0].get(),
                                        resources.communicators[1].get()};
    std::vector<std::unique_ptr<CpuBackend>> backends(2);
    const ParallelRunner::RankFactory make = [&](int r) -> Result<std::unique_ptr<Runner>> {
      backends[static_cast<size_t>(r)] = std::make_unique<CpuBackend>();
      RunnerOptions o = script_options();
      o.tp = comms[static_cast<size_t>(r)];
      if (r == 1) o.max_model_len = config->max_position_embeddings + 1;
      PAGODA_ASSIGN_OR_RETURN(
          std::unique_ptr<ModelRunner> m,
          ModelRunner::create(*backends[static_cast<size_t>(r)], *config, **src, o));
      return std::unique_ptr<Runner>(std::move(m));
    };
    auto p = ParallelRunner::create(2, make, std::move(resources));
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.error().message, "tensor-parallel rank 1: max_model_len " +
                                     std::to_string(config->max_position_embeddings + 1) +
                                     " exceeds the model's max_position_embeddings " +
                                     std::to_string(config->max_position_embeddings));
  }));
}

}  // namespace
}  // namespace pagoda
