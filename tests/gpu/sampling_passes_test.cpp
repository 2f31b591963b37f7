// The fewer-pass sampling path (sampling_kernels.h's sample_fewer_passes())
// against the CPU reference sampler and against the previous passes
// (PAGODA_SAMPLE_KERNEL=old): rows {1, 3, 64, 256} x vocabularies {1000,
// 32000, 151936, 200064}, every setting of the row mixes (greedy,
// temperature, top_k, top_p, min_p alone and combined, penalties, bans,
// masks, top-K and target logprobs, targets at the argmax), on fresh logits
// with scattered -inf or quantised into exact ties; and greedy rows built
// for the one-pass argmax and log-sum-exp: ties of the max (the lowest id
// wins) across float4 and chunk edges, the max at the last token, rows all
// -inf but a few tokens, rows not 16-byte aligned (odd vocabularies), a
// banned argmax (the processed row), at G = 1, 7 and the automatic split.
// Expectations as in sampling_test.cpp.
#include <algorithm>
#include <string>

#include "backend/cuda/sampling_kernels.h"
#include "sampling_test_util.h"
#include "test_util.h"

namespace pagoda::gpu_test {
namespace {

// PAGODA_SAMPLE_KERNEL for the scope (nullptr: unset, the fewer passes).
struct ScopedKernel : ScopedEnv {
  explicit ScopedKernel(const char* value) : ScopedEnv("PAGODA_SAMPLE_KERNEL", value) {}
};

int32_t argmax_of(const std::vector<float>& logits, int64_t vocab, int64_t row) {
  const float* x = logits.data() + row * vocab;
  return static_cast<int32_t>(std::max_element(x, x + vocab) - x);
}

// The batch on the GPU with the fewer passes and with the old ones: each
// equal to the CPU, and to each other in every token, rank and top-K id.
void expect_both_paths_match_cpu(const std::vector<float>& logits, int64_t num_rows,
                                 int64_t vocab, const SamplingBatch& batch,
                                 const std::string& what) {
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  const SampleOutput c = run_sample(cpu_backend(), logits, num_rows, vocab, batch);
  SampleOutput fewer, old;
  {
    ScopedKernel env(nullptr);
    ASSERT_TRUE(cuda::sample_fewer_passes());
    fewer = run_sample(gpu, logits, num_rows, vocab, batch);
  }
  {
    ScopedKernel env("old");
    ASSERT_FALSE(cuda::sample_fewer_passes());
    old = run_sample(gpu, logits, num_rows, vocab, batch);
  }
  expect_same_output(fewer, c, batch, what + " fewer passes");
  expect_same_output(old, c, batch, what + " old passes");
  EXPECT_EQ(fewer.token_ids, old.token_ids) << what;
  EXPECT_EQ(fewer.ranks, old.ranks) << what;
  EXPECT_EQ(fewer.target_ranks, old.target_ranks) << what;
  EXPECT_EQ(fewer.top_ids, old.top_ids) << what;
  expect_status_ok(gpu);
}

void run_rows(int64_t vocab, int64_t num_rows, bool ties) {
  const std::string what = "V=" + std::to_string(vocab) + " rows=" + std::to_string(num_rows) +
                           (ties ? " ties" : " -inf, masks");
  SCOPED_TRACE(what);
  std::vector<float> logits = normal(static_cast<size_t>(num_rows * vocab), 0.0f, 3.0f);
  if (ties) {
    for (float& x : logits) x = std::round(x * 2.0f) / 2.0f;
  } else {  // ~1% of the tokens of every row impossible (never all of a row)
    for (int32_t i :
         uniform_ints(logits.size() / 100, 0, static_cast<int32_t>(logits.size() - 1))) {
      if (static_cast<int64_t>(i) % vocab != 0) logits[static_cast<size_t>(i)] = -INFINITY;
    }
  }
  SamplingBatch batch = mixed_batch(logits, num_rows, vocab, !ties);
  for (int64_t r = 2; r < num_rows; r += 5) {  // targets at the row's argmax (rank 1)
    batch.rows[static_cast<size_t>(r)].target_token = argmax_of(logits, vocab, r);
  }
  expect_both_paths_match_cpu(logits, num_rows, vocab, batch, what);
}

TEST(CudaSamplingTest, FewerPassesMatchCpuOverRowsAndVocabularies) {
  PAGODA_REQUIRE_GPU();
  for (int64_t vocab : {1000, 32000, 151936, 200064}) {
    for (int64_t rows : {1, 3, 64, 256}) {
      run_rows(vocab, rows, (vocab + rows) % 2 == 0);
      if (rows == 3) run_rows(vocab, rows, (vocab + rows) % 2 != 0);
    }
  }
}

// Greedy rows of six kinds (row % 6): plain; the max at three random
// tokens; all -inf but three tokens; the max at the last token; the max at
// both sides of a float4 edge; the max at both sides of the G = 7 chunk
// edge. Top-K on even rows, the target at the argmax or a random token;
// every seventh row bans its argmax by bias (a processed row).
void run_greedy_edges(int64_t vocab, const char* groups) {
  const std::string what = "V=" + std::to_string(vocab) + " G=" + (*groups != 0 ? groups : "auto");
  SCOPED_TRACE(what);
  ScopedGroups env(*groups != 0 ? groups : nullptr);
  const int64_t num_rows = 24;
  const int64_t chunk7 = (((vocab + 6) / 7 + 31) / 32) * 32;
  std::vector<float> logits = normal(static_cast<size_t>(num_rows * vocab), 0.0f, 3.0f);
  SamplingBatch batch;
  batch.max_top_logprobs = 5;
  for (int64_t r = 0; r < num_rows; ++r) {
    float* x = logits.data() + r * vocab;
    auto put_max = [&](int64_t t) {
      if (t >= 0 && t < vocab) x[t] = 50.0f;
    };
    switch (r % 6) {
      case 1:
        for (int32_t t : distinct_tokens(3, vocab)) put_max(t);
        break;
      case 2: {
        const std::vector<int32_t> keep = distinct_tokens(3, vocab);
        for (int64_t t = 0; t < vocab; ++t) {
          if (std::find(keep.begin(), keep.end(), static_cast<int32_t>(t)) == keep.end())
            x[t] = -INFINITY;
        }
        break;
      }
      case 3:
        put_max(vocab - 1);
        break;
      case 4: {
        const int64_t edge = 4 * uniform_ints(1, 1, static_cast<int32_t>(vocab / 4))[0];
        put_max(edge - 1);
        put_max(edge);
        break;
      }
      case 5:
        put_max(chunk7 - 1);
        put_max(chunk7);
        break;
      default:
        break;
    }
    SamplingRow row;
    row.temperature = 0.0f;
    row.num_top_logprobs = r % 2 == 0 ? 5 : 0;
    if (r % 4 == 0) row.target_token = argmax_of(logits, vocab, r);
    if (r % 4 == 1) row.target_token = uniform_ints(1, 0, static_cast<int32_t>(vocab - 1))[0];
    RowLists lists;
    if (r % 7 == 6) {
      lists.bias_tokens = {argmax_of(logits, vocab, r)};
      lists.bias_values = {-INFINITY};
    }
    add_row(batch, row, lists);
  }
  expect_both_paths_match_cpu(logits, num_rows, vocab, batch, what);
}

TEST(CudaSamplingTest, OnePassGreedyEdges) {
  PAGODA_REQUIRE_GPU();
  for (int64_t vocab : {1001, 4099, 32003, 151936}) {
    for (const char* groups : {"", "1", "7"}) run_greedy_edges(vocab, groups);
  }
}

}  // namespace
}  // namespace pagoda::gpu_test
