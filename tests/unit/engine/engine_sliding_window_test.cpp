// The sliding-window KV group end to end (docs/architecture.md, "KV groups")
// on the tiny Gemma 3 (six layers, five sliding with window 8, one full):
// the engine keeping only the window of the sliding layers gives the tokens
// and logprobs of the engine keeping every layer's whole context, through
// chunked prefill and a prefix-cache hit, holds more tokens in the same
// memory, and runs a sequence whose context is far larger than its
// sliding-window pool (which needs the blocks that leave the window freed).
#include <gtest/gtest.h>

#include <cmath>

#include "engine_harness.h"

namespace pagoda::test {
namespace {

constexpr int32_t kMaxTokens = 24;

std::string gemma_dir() {
  return tiny_model_dir("tiny_gemma3");
}

// Several windows of 8 long, tokens of the 512-word vocabulary.
std::vector<int32_t> long_prompt(int32_t n, int32_t salt) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < n; ++i) p.push_back(3 + (i * 37 + salt * 101) % 500);
  return p;
}

TestRequest greedy_request(const std::string& id, std::vector<int32_t> prompt) {
  TestRequest r{.id = id, .prompt = std::move(prompt), .params = greedy_params(kMaxTokens)};
  r.params.logprobs = 5;
  r.params.ignore_eos = true;  // every request runs its kMaxTokens
  return r;
}

// Runs `a`, then `b` (after `a` finished, so that it hits the prefix cache).
std::vector<std::shared_ptr<RequestLog>> run_in_turn(LlmEngine& engine, const TestRequest& a,
                                                     const TestRequest& b) {
  std::vector<std::shared_ptr<RequestLog>> logs = run_all(engine, {a});
  std::vector<std::shared_ptr<RequestLog>> second = run_all(engine, {b});
  logs.insert(logs.end(), second.begin(), second.end());
  return logs;
}

TEST(SlidingWindowKv, WindowedCacheGivesTheFullCachesTokensAndLogprobs) {
  // Blocks of 4, prefill chunks of 12 tokens: every chunk's first query
  // needs the window behind it, and blocks leave the window at every step.
  EngineSetup setup{.model = gemma_dir(),
                    .tokenizer = stories_dir(),
                    .block_size = 4,
                    .num_kv_blocks = 128,
                    .max_num_seqs = 4,
                    .max_num_batched_tokens = 32,
                    .max_chunk_tokens = 12};
  auto windowed = start_engine(setup);
  setup.hybrid_kv_cache = false;
  auto full = start_engine(setup);
  ASSERT_NE(windowed, nullptr);
  ASSERT_NE(full, nullptr);
  EXPECT_GT(windowed->info().num_sliding_kv_blocks, 0);
  EXPECT_EQ(windowed->info().sliding_window, 8);
  EXPECT_EQ(full->info().num_sliding_kv_blocks, 0);

  // 100 prompt tokens (12 windows); the second request shares the first 80.
  const std::vector<int32_t> prompt = long_prompt(100, 1);
  std::vector<int32_t> shared(prompt.begin(), prompt.begin() + 80);
  const std::vector<int32_t> tail = long_prompt(30, 2);
  shared.insert(shared.end(), tail.begin(), tail.end());
  const TestRequest a = greedy_request("a", prompt), b = greedy_request("b", shared);
  const auto got = run_in_turn(*windowed, a, b);
  const auto want = run_in_turn(*full, a, b);
  ASSERT_EQ(got.size(), 2u);
  ASSERT_EQ(want.size(), 2u);
  // The second request was served from the prefix cache in both.
  EXPECT_GE(got[1]->num_cached_prompt_tokens, 64);
  EXPECT_EQ(got[1]->num_cached_prompt_tokens, want[1]->num_cached_prompt_tokens);

  auto ref = ReferenceModel::load(gemma_dir());
  ASSERT_NE(ref, nullptr);
  ReferenceCheck check(ref.get(), "sliding-window KV");
  for (size_t i = 0; i < got.size(); ++i) {
    const SampleLog& g = got[i]->samples[0];
    const SampleLog& w = want[i]->samples[0];
    const TestRequest& r = i == 0 ? a : b;
    ASSERT_EQ(g.tokens.size(), static_cast<size_t>(kMaxTokens));
    const RefSample sample = ref->sample(r.prompt, r.params, {}, 0, kMaxTokens);
    check.expect_tokens(g.tokens, sample, "windowed request " + r.id);
    check.expect_tokens(w.tokens, sample, "full-cache request " + r.id);
    if (!on_cuda()) {  // the same f32 arithmetic: the same tokens and logprobs
      EXPECT_EQ(g.tokens, w.tokens) << r.id;
      ASSERT_EQ(g.logprobs.size(), w.logprobs.size());
      for (size_t t = 0; t < g.logprobs.size(); ++t)
        EXPECT_NEAR(g.logprobs[t].logprob, w.logprobs[t].logprob, tol::kCpuLogprob)
            << r.id << " token " << t;
    }
    std::vector<int32_t> context = r.prompt;
    for (size_t t = 0; t < g.tokens.size(); ++t) {
      const std::vector<double> lp = log_softmax(ref->next_logits(context));
      check.expect_logprob(g.logprobs[t], g.tokens[t], lp, 5,
                           "windowed request " + r.id + " token " + std::to_string(t));
      context.push_back(g.tokens[t]);
    }
  }
}

TEST(SlidingWindowKv, TheSameMemoryHoldsMoreTokens) {
  EngineSetup setup{.model = gemma_dir(),
                    .tokenizer = stories_dir(),
                    .block_size = 4,
                    .num_kv_blocks = 0,
                    .kv_cache_memory_bytes = int64_t{2} << 20,
                    .max_num_batched_tokens = 32};
  auto windowed = start_engine(setup);
  setup.hybrid_kv_cache = false;
  auto full = start_engine(setup);
  ASSERT_NE(windowed, nullptr);
  ASSERT_NE(full, nullptr);
  // One full layer of six keeps the whole context: the pool holds about
  // four times the tokens (the sliding layers keep 3 blocks of each
  // sequence of 256 tokens, and a step's 32 / 4 + 32: kv_budget.h's split).
  EXPECT_GT(windowed->info().kv_capacity_tokens, 4 * full->info().kv_capacity_tokens);
  EXPECT_EQ(full->info().num_sliding_kv_blocks, 0);
  // A model without sliding layers keeps one pool.
  auto llama = start_engine({.model = tiny_model_dir("tiny_llama_linear"),
                             .tokenizer = stories_dir(),
                             .num_kv_blocks = 0,
                             .kv_cache_memory_bytes = int64_t{2} << 20});
  ASSERT_NE(llama, nullptr);
  EXPECT_EQ(llama->info().num_sliding_kv_blocks, 0);
}

// 64 full blocks hold one sequence of 256 tokens; the sliding pool gets 13
// blocks (52 tokens: a decoding window's 3 and a step's 32 / 4 + 2). A
// 200-token prompt and 40 more tokens run only when the blocks that leave
// the window return to that pool.
TEST(SlidingWindowKv, BlocksLeavingTheWindowAreFreed) {
  EngineSetup setup{.model = gemma_dir(),
                    .tokenizer = stories_dir(),
                    .block_size = 4,
                    .num_kv_blocks = 64,
                    .max_num_seqs = 2,
                    .max_num_batched_tokens = 32};
  auto engine = start_engine(setup);
  ASSERT_NE(engine, nullptr);
  ASSERT_EQ(engine->info().num_sliding_kv_blocks, 13);
  ASSERT_EQ(engine->info().max_model_len, 256);
  TestRequest r = greedy_request("long", long_prompt(200, 3));
  r.params.max_tokens = 40;
  const auto logs = run_all(*engine, {r});  // also checks that no block stays in use
  ASSERT_EQ(logs.size(), 1u);
  const SampleLog& s = logs[0]->samples[0];
  EXPECT_TRUE(s.error.empty()) << s.error;
  ASSERT_EQ(s.tokens.size(), 40u);
  auto ref = ReferenceModel::load(gemma_dir());
  ASSERT_NE(ref, nullptr);
  ReferenceCheck check(ref.get(), "sliding-window KV, long");
  check.expect_tokens(s.tokens, ref->sample(r.prompt, r.params, {}, 0, 40), "long request");
}

// Every rank keeps the same groups: with two pipeline stages (stage 0 holds
// three sliding layers and no full one) or two tensor-parallel ranks the
// engine still gives the reference's tokens.
TEST(SlidingWindowKv, ParallelRanksKeepTheGroups) {
  // Two ranks on one GPU is refused (one rank per GPU): the CPU's ranks only.
  if (on_cuda()) GTEST_SKIP() << "cpu ranks only";
  auto ref = ReferenceModel::load(gemma_dir());
  ASSERT_NE(ref, nullptr);
  const TestRequest r = greedy_request("parallel", long_prompt(60, 4));
  const RefSample want = ref->sample(r.prompt, r.params, {}, 0, kMaxTokens);
  for (const auto& [tp, pp] : {std::pair{1, 2}, std::pair{2, 1}}) {
    SCOPED_TRACE("tp " + std::to_string(tp) + " pp " + std::to_string(pp));
    auto engine = start_engine({.model = gemma_dir(),
                                .tokenizer = stories_dir(),
                                .block_size = 4,
                                .num_kv_blocks = 64,
                                .max_num_seqs = 2,
                                .max_num_batched_tokens = 32,
                                .max_chunk_tokens = 12,
                                .tensor_parallel_size = tp,
                                .pipeline_parallel_size = pp});
    ASSERT_NE(engine, nullptr);
    EXPECT_EQ(engine->info().num_sliding_kv_blocks, 13);
    const auto logs = run_all(*engine, {r});
    ASSERT_EQ(logs.size(), 1u);
    ReferenceCheck check(ref.get(), "sliding-window KV, parallel");
    check.expect_tokens(logs[0]->samples[0].tokens, want, "parallel request");
  }
}

}  // namespace
}  // namespace pagoda::test
