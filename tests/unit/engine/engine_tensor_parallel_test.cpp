// Tensor and pipeline parallelism through the whole engine on the cpu (ranks
// as threads, parallel/cpu_communicator.h): stories260K (8 heads, 4 kv
// heads, intermediate 172, 5 layers) split over 2 and 4 ranks, into 2 or 3
// pipeline stages, or 2 stages of 2 ranks, gives the same greedy and seeded
// (n > 1) outputs as one rank, with continuous batching, chunked prefill,
// preemption in a tiny KV pool, the prefix cache and async scheduling on
// (which pipeline parallelism turns off); and layouts that cannot split fail
// before loading with an error naming the flag and the field. On cuda the ranks are GPUs and bf16
// sums in another order may flip near-ties, so there the comparison is the
// GPU machine's (docs/parallelism.md); these cases run on the cpu only.
#include <gtest/gtest.h>

#include <string>
#include <utility>

#include "core/log.h"
#include "engine_harness.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::test {
namespace {

constexpr int32_t kMaxTokens = 32;

std::vector<TestRequest> story_requests(bool seeded) {
  auto tok = Tokenizer::load(stories_dir());
  EXPECT_TRUE(tok.ok());
  if (!tok.ok()) return {};
  const std::vector<std::string> texts = {
      "Once upon a time",
      "Lily and Ben went to the park. They saw a big",
      "The little dog was sad because",
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park. "
      "One day, she saw a big, red ball.",
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
      "park. "
      "Tom",
  };
  std::vector<TestRequest> out;
  for (size_t i = 0; i < texts.size(); ++i) {
    SamplingParams p;
    p.max_tokens = kMaxTokens;
    if (seeded) {
      p.temperature = 0.8f;
      p.top_p = 0.95f;
      p.seed = 1000 + i;
      p.n = 3;
    } else {
      p.temperature = 0.0f;
    }
    out.push_back({"r" + std::to_string(i), (*tok)->encode(texts[i]), p});
  }
  return out;
}

struct Layout {
  std::string name;
  int64_t num_kv_blocks = 256;
  int64_t max_num_batched_tokens = 256;
  int32_t max_chunk_tokens = 0;
  bool async_scheduling = true;
  bool expect_preemption = false;
};

// The greedy requests preempt in 16 blocks only when enough of them run
// together, which depends on whether some share the gate's first step (a
// race; seen missing at TP=4 and with pipeline parallelism, whose scheduling
// is synchronous), so `tight` runs their preemption case in 10 blocks, where
// it always happens (the seeded requests, n = 3, need 16 for one of them
// alone and always preempt there).
const std::vector<Layout>& layouts(bool tight = false) {
  static const std::vector<Layout> all = {
      {"batch"},
      {"chunk7", 256, 256, 7},
      {"preempt", 16, 256, 0, true, true},
      {"sync", 256, 256, 0, false},
  };
  static const std::vector<Layout> greedy = {
      {"batch"},
      {"chunk7", 256, 256, 7},
      {"preempt", 10, 256, 0, true, true},
      {"sync", 256, 256, 0, false},
  };
  return tight ? greedy : all;
}

// Every sample's tokens of every request, in request then index order.
std::vector<std::vector<int32_t>> run_tokens(const EngineSetup& setup,
                                             const std::vector<TestRequest>& requests,
                                             const Layout& layout, bool twice) {
  EngineSetup s = setup;
  s.num_kv_blocks = layout.num_kv_blocks;
  s.max_num_batched_tokens = layout.max_num_batched_tokens;
  s.max_chunk_tokens = layout.max_chunk_tokens;
  s.async_scheduling = layout.async_scheduling;
  auto engine = start_engine(s);
  if (engine == nullptr) return {};
  std::vector<std::vector<int32_t>> tokens;
  auto collect = [&](const std::vector<std::shared_ptr<RequestLog>>& logs) {
    for (const auto& log : logs) {
      for (const SampleLog& sample : log->samples) tokens.push_back(sample.tokens);
    }
  };
  collect(run_all(*engine, requests));
  if (layout.expect_preemption) {
    EXPECT_GT(engine->metrics().num_preemptions, 0u) << layout.name;
  }
  if (twice) {  // through the prefix cache
    std::vector<TestRequest> again = requests;
    for (TestRequest& r : again) r.id += "-again";
    const uint64_t hits = engine->metrics().prefix_cache_hits;
    collect(run_all(*engine, again));
    EXPECT_GT(engine->metrics().prefix_cache_hits, hits) << layout.name;
  }
  return tokens;
}

class TensorParallelEngine : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    if (on_cuda()) GTEST_SKIP() << "cpu ranks only (see the file comment)";
  }
};

void expect_same_as_one_rank(int tp, bool seeded, int pp = 1) {
  const std::vector<TestRequest> requests = story_requests(seeded);
  ASSERT_FALSE(requests.empty());
  for (const Layout& layout : layouts(/*tight=*/!seeded)) {
    const bool twice = layout.name == "batch";
    const auto one = run_tokens({.model = stories_dir()}, requests, layout, twice);
    const auto split = run_tokens(
        {.model = stories_dir(), .tensor_parallel_size = tp, .pipeline_parallel_size = pp},
        requests, layout, twice);
    ASSERT_FALSE(one.empty()) << layout.name;
    EXPECT_EQ(split, one) << "tensor parallel " << tp << ", pipeline parallel " << pp << ", "
                          << layout.name;
    size_t generated = 0;
    for (const auto& t : one) generated += t.size();
    EXPECT_GT(generated, one.size() * 4) << layout.name;  // real continuations were compared
  }
}

TEST_P(TensorParallelEngine, GreedyOutputsEqualOneRank) {
  expect_same_as_one_rank(GetParam(), false);
}

TEST_P(TensorParallelEngine, SeededSamplesEqualOneRank) {
  expect_same_as_one_rank(GetParam(), true);
}

INSTANTIATE_TEST_SUITE_P(Ranks, TensorParallelEngine, ::testing::Values(2, 4));

// {tensor-parallel size, pipeline stages}.
class PipelineParallelEngine : public ::testing::TestWithParam<std::pair<int, int>> {
 protected:
  void SetUp() override {
    if (on_cuda()) GTEST_SKIP() << "cpu ranks only (see the file comment)";
  }
};

TEST_P(PipelineParallelEngine, GreedyOutputsEqualOneRank) {
  expect_same_as_one_rank(GetParam().first, false, GetParam().second);
}

TEST_P(PipelineParallelEngine, SeededSamplesEqualOneRank) {
  expect_same_as_one_rank(GetParam().first, true, GetParam().second);
}

INSTANTIATE_TEST_SUITE_P(Stages, PipelineParallelEngine,
                         ::testing::Values(std::pair{1, 2}, std::pair{1, 3}, std::pair{2, 2}),
                         [](const auto& info) {
                           return "tp" + std::to_string(info.param.first) + "_pp" +
                                  std::to_string(info.param.second);
                         });

Status load_with(int tp, int pp) {
  set_log_level(LogLevel::kError);
  EngineOptions o;
  o.model = stories_dir();
  o.device = "cpu";
  o.num_kv_blocks = 64;
  o.tensor_parallel_size = tp;
  o.pipeline_parallel_size = pp;
  Result<EngineParts> parts = load_engine_parts(o);
  if (!parts.ok()) return parts.error();
  EXPECT_EQ(parts->info.tensor_parallel_size, tp);
  // The last stage samples on its device; stage 0 needs the ids on the host.
  EXPECT_EQ(parts->options.async_scheduling, pp == 1);
  return {};
}

TEST(TensorParallelLayout, ImpossibleSplitsFailNamingTheFieldBeforeLoading) {
  Status st = load_with(3, 1);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(st.error().message, "--tensor-parallel-size 3 does not divide num_attention_heads 8");
  st = load_with(8, 1);  // 172 intermediate rows do not split 8 ways
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("intermediate_size 172"), std::string::npos)
      << st.error().message;
  st = load_with(0, 1);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "--tensor-parallel-size must be >= 1, got 0");
  st = load_with(-2, 1);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "--tensor-parallel-size must be >= 1, got -2");
}

TEST(TensorParallelLayout, PipelineStagesBeyondTheLayersFailBeforeLoading) {
  Status st = load_with(1, 6);  // stories260K has 5 layers
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(st.error().message, "--pipeline-parallel-size 6 exceeds num_hidden_layers 5");
  st = load_with(3, 2);  // the tensor-parallel split is checked too
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "--tensor-parallel-size 3 does not divide num_attention_heads 8");
  st = load_with(1, 0);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().message, "--pipeline-parallel-size must be >= 1, got 0");
}

TEST(TensorParallelLayout, TwoRanksLoadAndReportTheirSize) {
  EXPECT_TRUE(load_with(2, 1).ok());
  EXPECT_TRUE(load_with(1, 5).ok());  // one layer per stage
  EXPECT_TRUE(load_with(2, 2).ok());
}

}  // namespace
}  // namespace pagoda::test
