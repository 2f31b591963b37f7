// sample() on the CUDA backend against the CPU reference sampler: greedy,
// temperature, min_p, top_k, top_p (alone and combined), penalties, bias
// and bans, top-K logprobs, target logprobs, vocabularies up to 256k,
// continuous logits and logits quantised into exact ties (which both
// backends must break towards the lower id), allowed-token masks (mixed
// masked and unmasked rows, shared masks, vocabularies not a multiple of
// 32), and invariance to row order. Rows split over several CTAs
// (PAGODA_SAMPLE_GROUPS forcing G from 1 to 64; vocabularies from 1 to 200k,
// not multiples of the chunk; 1 to 300 rows) against the CPU, and the split's
// run-to-run determinism. Large batches (1 to 512 rows, vocabularies to 256k,
// -inf logits, ties, greedy rows beside top_p rows) against the CPU.
//
// Expectations: token ids, ranks and top-K ids equal; logprobs within 1e-5
// (both compute log_softmax with an f64 sum). Seeded draws are compared
// exactly: with these inputs the kept sets are unambiguous except with
// negligible probability (a near-tie of two race scores within ~1e-7).
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "backend/cuda/sampling_kernels.h"
#include "sampling_test_util.h"
#include "test_util.h"

namespace pagoda::gpu_test {
namespace {

void run_vocab(int64_t vocab, bool quantised, int repeats) {
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  for (int rep = 0; rep < repeats; ++rep) {
    SCOPED_TRACE("V=" + std::to_string(vocab) + (quantised ? " quantised" : "") + " repeat " + std::to_string(rep));
    const int64_t num_rows = 14;
    std::vector<float> logits = normal(static_cast<size_t>(num_rows * vocab), 0.0f, 3.0f);
    if (quantised) {
      for (float& x : logits) x = std::round(x * 2.0f) / 2.0f;  // many exact ties
    }
    SamplingBatch batch;
    batch.max_top_logprobs = 20;
    for (auto& [row, lists] : row_mix(vocab, logits, 0)) add_row(batch, row, lists);
    ASSERT_EQ(static_cast<int64_t>(batch.rows.size()), num_rows);
    const SampleOutput c = run_sample(cpu_backend(), logits, num_rows, vocab, batch);
    const SampleOutput g = run_sample(gpu, logits, num_rows, vocab, batch);
    expect_same_output(g, c, batch, "gpu vs cpu");
    expect_status_ok(gpu);
  }
}

TEST(CudaSamplingTest, MatchesCpuOnContinuousLogits) {
  PAGODA_REQUIRE_GPU();
  run_vocab(1000, false, 3);
  run_vocab(32000, false, 2);
  run_vocab(151936, false, 1);
}

TEST(CudaSamplingTest, MatchesCpuOnTiedLogits) {
  PAGODA_REQUIRE_GPU();
  run_vocab(1000, true, 3);
  run_vocab(50257, true, 1);
}

TEST(CudaSamplingTest, LargeVocabularyAndManyRows) {
  PAGODA_REQUIRE_GPU();
  run_vocab(256000, false, 1);
  // 1024 rows of mixed settings in one call (several scratch chunks).
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  const int64_t vocab = 65536, num_rows = 1024;
  std::vector<float> logits = normal(static_cast<size_t>(num_rows * vocab), 0.0f, 2.0f);
  SamplingBatch batch;
  batch.max_top_logprobs = 4;
  while (static_cast<int64_t>(batch.rows.size()) < num_rows) {
    const int64_t first = static_cast<int64_t>(batch.rows.size());
    for (auto& [row, lists] : row_mix(vocab, logits, first)) {
      if (static_cast<int64_t>(batch.rows.size()) == num_rows) break;
      row.num_top_logprobs = std::min(row.num_top_logprobs, 4);
      add_row(batch, row, lists);
    }
  }
  const SampleOutput c = run_sample(cpu_backend(), logits, num_rows, vocab, batch);
  const SampleOutput g = run_sample(gpu, logits, num_rows, vocab, batch);
  expect_same_output(g, c, batch, "1024 rows");
  expect_status_ok(gpu);
}

// A row's result depends on its own inputs only: reversing the batch
// reverses the output, and a second call repeats the first.
TEST(CudaSamplingTest, DeterministicAndIndependentOfRowOrder) {
  PAGODA_REQUIRE_GPU();
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  const int64_t vocab = 32000, num_rows = 14;
  std::vector<float> logits = normal(static_cast<size_t>(num_rows * vocab), 0.0f, 3.0f);
  const auto mix = row_mix(vocab, logits, 0);
  SamplingBatch forward, backward;
  forward.max_top_logprobs = backward.max_top_logprobs = 20;
  for (const auto& [row, lists] : mix) add_row(forward, row, lists);
  std::vector<float> reversed(logits.size());
  for (int64_t r = 0; r < num_rows; ++r) {
    const auto& [row, lists] = mix[static_cast<size_t>(num_rows - 1 - r)];
    add_row(backward, row, lists);
    std::copy(logits.begin() + (num_rows - 1 - r) * vocab, logits.begin() + (num_rows - r) * vocab,
              reversed.begin() + r * vocab);
  }
  const SampleOutput a = run_sample(gpu, logits, num_rows, vocab, forward);
  const SampleOutput again = run_sample(gpu, logits, num_rows, vocab, forward);
  const SampleOutput b = run_sample(gpu, reversed, num_rows, vocab, backward);
  EXPECT_EQ(a.token_ids, again.token_ids);
  EXPECT_EQ(a.top_ids, again.top_ids);
  for (int64_t r = 0; r < num_rows; ++r) {
    EXPECT_EQ(a.token_ids[static_cast<size_t>(r)], b.token_ids[static_cast<size_t>(num_rows - 1 - r)]) << "row " << r;
  }
  expect_status_ok(gpu);
}

void run_masked(int64_t vocab, int repeats) {
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  for (int rep = 0; rep < repeats; ++rep) {
    SCOPED_TRACE("masked V=" + std::to_string(vocab) + " repeat " + std::to_string(rep));
    const int64_t num_rows = 14 * 3;
    std::vector<float> logits = normal(static_cast<size_t>(num_rows * vocab), 0.0f, 3.0f);
    SamplingBatch batch;
    batch.max_top_logprobs = 20;
    while (static_cast<int64_t>(batch.rows.size()) < num_rows) {
      for (auto& [row, lists] : row_mix(vocab, logits, static_cast<int64_t>(batch.rows.size())))
        add_row(batch, row, lists);
    }
    add_random_masks(batch, logits, vocab);
    const SampleOutput c = run_sample(cpu_backend(), logits, num_rows, vocab, batch);
    const SampleOutput g = run_sample(gpu, logits, num_rows, vocab, batch);
    expect_allowed(c, batch);
    expect_allowed(g, batch);
    expect_same_output(g, c, batch, "masked gpu vs cpu");
    expect_status_ok(gpu);
  }
}

TEST(CudaSamplingTest, MatchesCpuWithAllowedTokenMasks) {
  PAGODA_REQUIRE_GPU();
  run_masked(1000, 4);
  run_masked(1001, 2);  // the last mask word is partial
  run_masked(32000, 2);
  run_masked(151936, 1);
}

// 1024 masked and unmasked rows in one call: the kernel runs in several
// scratch chunks, each reading masks of the whole batch's upload.
TEST(CudaSamplingTest, MasksAcrossScratchChunks) {
  PAGODA_REQUIRE_GPU();
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  const int64_t vocab = 65536, num_rows = 1024;
  std::vector<float> logits = normal(static_cast<size_t>(num_rows * vocab), 0.0f, 2.0f);
  SamplingBatch batch;
  batch.max_top_logprobs = 4;
  while (static_cast<int64_t>(batch.rows.size()) < num_rows) {
    const int64_t first = static_cast<int64_t>(batch.rows.size());
    for (auto& [row, lists] : row_mix(vocab, logits, first)) {
      if (static_cast<int64_t>(batch.rows.size()) == num_rows) break;
      row.num_top_logprobs = std::min(row.num_top_logprobs, 4);
      add_row(batch, row, lists);
    }
  }
  add_random_masks(batch, logits, vocab);
  const SampleOutput c = run_sample(cpu_backend(), logits, num_rows, vocab, batch);
  const SampleOutput g = run_sample(gpu, logits, num_rows, vocab, batch);
  expect_allowed(g, batch);
  expect_same_output(g, c, batch, "1024 masked rows");
  expect_status_ok(gpu);
}

// One batch per (vocab, rows, G) sampled on the GPU with
// PAGODA_SAMPLE_GROUPS = G ("" for the automatic choice): equal to the CPU.
// `want_split` checks that the launch really splits the rows.
void run_split(int64_t vocab, int64_t num_rows, const char* groups, bool want_split, bool masks) {
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  const std::string what = "V=" + std::to_string(vocab) + " rows=" + std::to_string(num_rows) +
                           " G=" + (*groups != 0 ? groups : "auto") + (masks ? " masked" : "");
  SCOPED_TRACE(what);
  ScopedGroups env(*groups != 0 ? groups : nullptr);
  if (want_split) {
    EXPECT_GT(cuda::sample_groups(static_cast<int>(num_rows), vocab), 1)
        << "the rows are not split";
  }
  std::vector<float> logits = normal(static_cast<size_t>(num_rows * vocab), 0.0f, 3.0f);
  const SamplingBatch batch = mixed_batch(logits, num_rows, vocab, masks);
  const SampleOutput c = run_sample(cpu_backend(), logits, num_rows, vocab, batch);
  const SampleOutput g = run_sample(gpu, logits, num_rows, vocab, batch);
  if (masks && vocab >= 512) expect_allowed(g, batch);
  expect_same_output(g, c, batch, what);
  expect_status_ok(gpu);
}

TEST(CudaSamplingTest, SplitRowsMatchCpuOnTinyAndOddVocabularies) {
  PAGODA_REQUIRE_GPU();
  run_split(1, 1, "2", false, false);  // one token: one chunk whatever G asks
  run_split(31, 3, "2", false, false);
  run_split(33, 2, "2", true, false);  // chunks of 32 and 1 tokens
  run_split(100, 5, "3", true, false);
  run_split(1000, 5, "7", true, false);
  run_split(1001, 1, "64", true, false);
  run_split(4097, 2, "5", true, true);
}

TEST(CudaSamplingTest, SplitRowsMatchCpuOverVocabulariesAndRows) {
  PAGODA_REQUIRE_GPU();
  run_split(32000, 1, "", true, false);
  run_split(32000, 8, "", true, true);
  run_split(50257, 3, "13", true, true);
  run_split(128256, 2, "", true, false);
  run_split(151936, 1, "", true, true);
  run_split(151936, 8, "", true, false);
  run_split(151936, 14, "64", true, false);  // G capped by what fits at once
  run_split(200000, 3, "", true, true);
  run_split(65536, 64, "", false, false);   // G = 2 where 128 CTAs fit at once
  run_split(32000, 300, "", false, false);  // one CTA per row
  run_split(32000, 9, "1", false, true);    // the unsplit kernel on few rows
}

// The split kernel on tied logits (exact ties broken towards the lower id
// across chunk boundaries) at several G.
TEST(CudaSamplingTest, SplitRowsMatchCpuOnTiedLogits) {
  PAGODA_REQUIRE_GPU();
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  const int64_t vocab = 20000, num_rows = 14;
  for (const char* groups : {"2", "5", "16", "40"}) {
    SCOPED_TRACE(std::string("G=") + groups);
    ScopedGroups env(groups);
    std::vector<float> logits = normal(static_cast<size_t>(num_rows * vocab), 0.0f, 3.0f);
    for (float& x : logits) x = std::round(x * 2.0f) / 2.0f;
    const SamplingBatch batch = mixed_batch(logits, num_rows, vocab, false);
    const SampleOutput c = run_sample(cpu_backend(), logits, num_rows, vocab, batch);
    const SampleOutput g = run_sample(gpu, logits, num_rows, vocab, batch);
    expect_same_output(g, c, batch, "tied");
    expect_status_ok(gpu);
  }
}

// Same inputs and G: the same bits every run (cross-CTA sums in chunk
// order), and the same tokens as one CTA per row.
TEST(CudaSamplingTest, SplitRowsAreDeterministic) {
  PAGODA_REQUIRE_GPU();
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  const int64_t vocab = 151936, num_rows = 6;
  std::vector<float> logits = normal(static_cast<size_t>(num_rows * vocab), 0.0f, 3.0f);
  const SamplingBatch batch = mixed_batch(logits, num_rows, vocab, true);
  SampleOutput first, one_cta;
  {
    ScopedGroups env("");
    ASSERT_GT(cuda::sample_groups(static_cast<int>(num_rows), vocab), 1);
    first = run_sample(gpu, logits, num_rows, vocab, batch);
    for (int rep = 0; rep < 5; ++rep) {
      const SampleOutput again = run_sample(gpu, logits, num_rows, vocab, batch);
      EXPECT_EQ(again.token_ids, first.token_ids);
      EXPECT_EQ(again.ranks, first.ranks);
      EXPECT_EQ(again.top_ids, first.top_ids);
      EXPECT_EQ(
          std::memcmp(again.logprobs.data(), first.logprobs.data(), first.logprobs.size() * 4), 0);
      EXPECT_EQ(std::memcmp(again.top_logprobs.data(), first.top_logprobs.data(),
                            first.top_logprobs.size() * 4),
                0);
    }
  }
  {
    ScopedGroups env("1");
    ASSERT_EQ(cuda::sample_groups(static_cast<int>(num_rows), vocab), 1);
    one_cta = run_sample(gpu, logits, num_rows, vocab, batch);
  }
  EXPECT_EQ(first.token_ids, one_cta.token_ids);
  EXPECT_EQ(first.top_ids, one_cta.top_ids);
  expect_status_ok(gpu);
}

// sample_groups(): split at small batches with large vocabularies, one CTA
// per row at large batches or small vocabularies, PAGODA_SAMPLE_GROUPS obeyed
// within what fits.
TEST(CudaSamplingTest, SampleGroupsPolicy) {
  PAGODA_REQUIRE_GPU();
  (void)cuda_backend(DType::kBF16);  // selects the device
  ScopedGroups env(nullptr);
  ScopedKernel fewer(nullptr);
  EXPECT_GT(cuda::sample_groups(1, 151936), 8);
  EXPECT_GT(cuda::sample_groups(8, 151936), 1);
  EXPECT_EQ(cuda::sample_groups(300, 151936), 1);
  EXPECT_EQ(cuda::sample_groups(1, 4096), 1);  // one chunk of kMinChunk
  EXPECT_LE(cuda::sample_groups(1, 1 << 24), cuda::kMaxSampleGroups);
  // Narrowing rows: one CTA per row (the candidate path) where the split
  // would give at most 4 CTAs per row; a split still where it gives more.
  {
    const int g64 = cuda::sample_groups(64, 151936);
    EXPECT_EQ(cuda::sample_groups(64, 151936, true), g64 <= 4 ? 1 : g64);
    EXPECT_EQ(cuda::sample_groups(8, 151936, true), cuda::sample_groups(8, 151936));
    EXPECT_EQ(cuda::sample_groups(1, 151936, true), cuda::sample_groups(1, 151936));
    ScopedKernel old("old");
    EXPECT_EQ(cuda::sample_groups(64, 151936, true), g64);
  }
  {
    ScopedGroups forced("1");
    EXPECT_EQ(cuda::sample_groups(1, 151936), 1);
  }
  {
    ScopedGroups forced("3");
    EXPECT_EQ(cuda::sample_groups(2, 1000), 3);
    EXPECT_EQ(cuda::sample_groups(2, 33), 2);  // chunks of >= 32 tokens
  }
}

// Large batches (the serving shape: one CTA per row, issue 22): rows 1..512
// at vocabularies 32k..256k (odd sizes), the row mix (greedy rows beside
// sampled ones; temperature, top_k, top_p, min_p alone and combined;
// penalties, bias, bans, top-K), plus rows of the decode default (T 0.8,
// top_p 0.9, own seeds) interleaved with greedy rows; logits with scattered
// -inf, or quantised into exact ties. Equal to the CPU, and the automatic
// split equal to one CTA per row.
void run_wide(int64_t vocab, int64_t num_rows, bool ties) {
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  const std::string what = "V=" + std::to_string(vocab) + " rows=" + std::to_string(num_rows) +
                           (ties ? " ties" : " -inf");
  SCOPED_TRACE(what);
  std::vector<float> logits = normal(static_cast<size_t>(num_rows * vocab), 0.0f, 3.0f);
  if (ties) {
    for (float& x : logits) x = std::round(x * 2.0f) / 2.0f;
  } else {  // ~1% of the tokens of every row impossible (never all of a row)
    for (int32_t i : uniform_ints(logits.size() / 100, 0, static_cast<int32_t>(logits.size() - 1))) {
      if (static_cast<int64_t>(i) % vocab != 0) logits[static_cast<size_t>(i)] = -INFINITY;
    }
  }
  SamplingBatch batch = mixed_batch(logits, num_rows, vocab, false);
  for (size_t r = 1; r < batch.rows.size(); r += 3) {  // the decode default beside greedy rows
    SamplingRow row;
    row.temperature = r % 2 == 0 ? 0.0f : 0.8f;
    row.top_p = 0.9f;
    row.seed = static_cast<uint64_t>(rng()());
    row.step = static_cast<uint64_t>(r);
    row.num_top_logprobs = batch.rows[r].num_top_logprobs;
    batch.rows[r] = row;
  }
  const SampleOutput c = run_sample(cpu_backend(), logits, num_rows, vocab, batch);
  SampleOutput g, one;
  {
    ScopedGroups env(nullptr);
    g = run_sample(gpu, logits, num_rows, vocab, batch);
  }
  {
    ScopedGroups env("1");
    one = run_sample(gpu, logits, num_rows, vocab, batch);
  }
  expect_same_output(g, c, batch, what);
  EXPECT_EQ(one.token_ids, g.token_ids);
  EXPECT_EQ(one.top_ids, g.top_ids);
  expect_status_ok(gpu);
}

TEST(CudaSamplingTest, WideBatchesMatchCpu) {
  PAGODA_REQUIRE_GPU();
  run_wide(32003, 1, false);
  run_wide(128257, 7, true);
  run_wide(151936, 64, false);
  run_wide(65537, 100, true);
  run_wide(151936, 256, false);
  run_wide(151936, 256, true);
  run_wide(99991, 300, false);
  run_wide(256000, 33, false);
  run_wide(32011, 512, false);
  run_wide(50021, 512, true);
}

// Two samplings outstanding on slots 0 and 1 (pipelined steps): each
// finish_sample returns its own batch's result, equal to the CPU's, and
// copy_sampled_tokens reads the ids of the latest one into an ids array.
TEST(CudaSamplingTest, TwoSlotsOutstandingAndSampledTokensOnTheDevice) {
  PAGODA_REQUIRE_GPU();
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  const int64_t vocab = 32000, num_rows = 14;
  std::vector<float> logits0 = normal(static_cast<size_t>(num_rows * vocab), 0.0f, 3.0f);
  std::vector<float> logits1 = normal(static_cast<size_t>(num_rows * vocab), 0.0f, 3.0f);
  SamplingBatch b0, b1;
  b0.max_top_logprobs = b1.max_top_logprobs = 20;
  for (auto& [row, lists] : row_mix(vocab, logits0, 0)) add_row(b0, row, lists);
  for (auto& [row, lists] : row_mix(vocab, logits1, 3)) add_row(b1, row, lists);
  DevTensor t0(gpu, DType::kF32, {num_rows, vocab}, logits0), t1(gpu, DType::kF32, {num_rows, vocab}, logits1);
  gpu.sample_async(t0.t(), b0, 0);
  gpu.sample_async(t1.t(), b1, 1);
  // ids[rows[i]] = the latest sampling's (b1's) token of row src[i]; the
  // other ids and out-of-range entries stay as they were.
  const std::vector<int32_t> rows = {0, 3, 5, 7, 1}, src = {13, 0, 4, 99, -1};
  DevTensor d_rows(gpu, {5}, rows), d_src(gpu, {5}, src), ids(gpu, {8}, std::vector<int32_t>(8, -7));
  Tensor ids_t = ids.t();
  gpu.copy_sampled_tokens(d_rows.t(), d_src.t(), ids_t);
  SampleOutput g1, g0;
  gpu.finish_sample(1, g1);  // out of order is allowed: each slot has its own buffers
  gpu.finish_sample(0, g0);
  expect_same_output(g0, run_sample(cpu_backend(), logits0, num_rows, vocab, b0), b0, "slot 0");
  expect_same_output(g1, run_sample(cpu_backend(), logits1, num_rows, vocab, b1), b1, "slot 1");
  std::vector<int32_t> want(8, -7);
  want[0] = g1.token_ids[13];
  want[3] = g1.token_ids[0];
  want[5] = g1.token_ids[4];
  EXPECT_EQ(ids.download_i32(), want);
  expect_status_ok(gpu);
}

}  // namespace
}  // namespace pagoda::gpu_test
