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
// banned argmax (the processed row), at G = 1, 7 and the automatic split;
// and top_k / top_p rows for the candidate path (one CTA per row), with
// adversarial rows whose candidates overflow or whose cut guess fails (the
// path must fall back to the full-row passes); and plain sampled rows for
// the fused race (the race decided in the pass of the sums; the path counts
// must show it, and the race pass only where a row forces it). Expectations
// as in sampling_test.cpp.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cuda/sampling_kernels.h"
#include "sampling_test_util.h"
#include "test_util.h"

namespace pagoda::gpu_test {
namespace {

int32_t argmax_of(const std::vector<float>& logits, int64_t vocab, int64_t row) {
  const float* x = logits.data() + row * vocab;
  return static_cast<int32_t>(std::max_element(x, x + vocab) - x);
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

// Narrowing rows (top_k / top_p, the candidate path at G = 1): 16 settings
// cycling over the rows, on five kinds of row data (row / 16 % 5): N(0, 3);
// quantised to exact ties; all equal (every token a candidate); ~1% -inf;
// all -inf but five tokens. Settings include a tiny and a huge temperature
// (the cut guess sees one bin, or every token in bin 0), top_k near and over
// the candidate buffer (4096), top_k = V - 1 with top_p, top_p near 1,
// min_p, penalties and bias (a processed row: rank by a pass), masks,
// targets and top-K logprobs.
std::vector<SamplingRow> narrowing_mix(int64_t vocab) {
  const int32_t v = static_cast<int32_t>(vocab);
  std::vector<SamplingRow> rows;
  auto add = [&](float t, int32_t k, float p, float min_p) {
    SamplingRow r;
    r.temperature = t;
    r.top_k = k;
    r.top_p = p;
    r.min_p = min_p;
    r.seed = static_cast<uint64_t>(rng()());
    r.step = static_cast<uint64_t>(uniform_ints(1, 0, 1000)[0]);
    rows.push_back(r);
  };
  add(0.8f, 50, 1.0f, 0.0f);
  add(0.8f, 0, 0.9f, 0.0f);
  add(1.0f, 1, 1.0f, 0.0f);
  add(0.7f, 40, 0.8f, 0.02f);
  add(1.2f, 0, 0.7f, 0.05f);
  add(1e-4f, 5, 1.0f, 0.0f);
  add(1e4f, 0, 0.9f, 0.0f);
  add(1e4f, 100, 1.0f, 0.0f);
  add(1.0f, std::min(v - 1, 4000), 1.0f, 0.0f);
  add(1.0f, std::min(v - 1, 5000), 0.95f, 0.0f);
  add(1.0f, v - 1, 0.95f, 0.0f);
  add(1.0f, 0, 0.999999f, 0.0f);
  add(0.9f, 0, 0.9f, 0.0f);   // + penalties and bias below
  add(0.8f, 20, 1.0f, 0.0f);  // + target and top-K below
  add(1e-4f, 0, 0.3f, 0.0f);
  add(0.5f, 3000, 0.95f, 0.1f);
  rows[13].target_token = uniform_ints(1, 0, v - 1)[0];
  rows[13].num_top_logprobs = 5;
  return rows;
}

void run_narrowing(int64_t vocab, int64_t num_rows, const char* groups) {
  const std::string what = "V=" + std::to_string(vocab) + " rows=" + std::to_string(num_rows) +
                           " G=" + (*groups != 0 ? groups : "auto");
  SCOPED_TRACE(what);
  ScopedGroups env(*groups != 0 ? groups : nullptr);
  std::vector<float> logits = normal(static_cast<size_t>(num_rows * vocab), 0.0f, 3.0f);
  SamplingBatch batch;
  batch.max_top_logprobs = 5;
  for (int64_t r = 0; r < num_rows; ++r) {
    float* x = logits.data() + r * vocab;
    switch ((r / 16) % 5) {
      case 1:
        for (int64_t t = 0; t < vocab; ++t) x[t] = std::round(x[t] * 2.0f) / 2.0f;
        break;
      case 2:
        std::fill(x, x + vocab, 1.5f);
        break;
      case 3:
        for (int32_t t :
             uniform_ints(static_cast<size_t>(vocab / 100), 1, static_cast<int32_t>(vocab - 1)))
          x[t] = -INFINITY;
        break;
      case 4: {
        const std::vector<int32_t> keep = distinct_tokens(5, vocab);
        for (int64_t t = 0; t < vocab; ++t) {
          if (std::find(keep.begin(), keep.end(), static_cast<int32_t>(t)) == keep.end())
            x[t] = -INFINITY;
        }
        break;
      }
      default:
        break;
    }
    const std::vector<SamplingRow> mix = narrowing_mix(vocab);
    SamplingRow row = mix[static_cast<size_t>(r % 16)];
    RowLists lists;
    if (r % 16 == 12) {
      lists = penalties(40, vocab);
      row.repetition_penalty = 1.3f;
      row.presence_penalty = 0.5f;
      row.frequency_penalty = 0.3f;
      for (int32_t t : distinct_tokens(3, vocab)) {
        if (std::find(lists.pen_tokens.begin(), lists.pen_tokens.end(), t) !=
            lists.pen_tokens.end())
          continue;
        lists.bias_tokens.push_back(t);
        lists.bias_values.push_back(4.0f);
      }
    }
    add_row(batch, row, lists);
  }
  if (num_rows >= 3) {  // not on the rows of five finite tokens (a mask could leave none)
    add_random_masks(batch, logits, vocab);
    for (int64_t r = 0; r < num_rows; ++r) {
      if ((r / 16) % 5 == 4) batch.mask_index[static_cast<size_t>(r)] = -1;
    }
  }
  expect_both_paths_match_cpu(logits, num_rows, vocab, batch, what);
}

TEST(CudaSamplingTest, CandidatePathMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  for (int64_t vocab : {1000, 32000, 151936, 200064}) {
    for (int64_t rows : {1, 3, 64, 256}) run_narrowing(vocab, rows, "1");
    run_narrowing(vocab, 80, "");
  }
}

// Plain sampled rows (no top_k / top_p: the fused race, decided in the pass
// of the sums): 9 settings cycling over the rows - T 0.8; min_p 0.1; min_p
// 0.02 with a target and top-K; top_k = V (no narrowing); T 1e4 (every q
// near 1); bias and penalties (scratch); a 1%-allowed mask (on the fly);
// min_p 1 (the max token at min_p's edge: the race pass must decide);
// min_p 1e-30 (not fused) - on N(0, 3) rows, rows quantised to exact ties,
// and rows ~1% -inf; every row fused except the last two settings.
void run_plain(int64_t vocab, int64_t num_rows, const char* groups) {
  const std::string what = "V=" + std::to_string(vocab) + " rows=" + std::to_string(num_rows) +
                           " G=" + (*groups != 0 ? groups : "auto") + " plain";
  SCOPED_TRACE(what);
  ScopedGroups env(*groups != 0 ? groups : nullptr);
  std::vector<float> logits = normal(static_cast<size_t>(num_rows * vocab), 0.0f, 3.0f);
  SamplingBatch batch;
  batch.max_top_logprobs = 2;
  batch.mask_words = static_cast<int32_t>((vocab + 31) / 32);
  uint64_t fused = 0, race_pass = 0;
  for (int64_t r = 0; r < num_rows; ++r) {
    float* x = logits.data() + r * vocab;
    if (r % 3 == 1) {
      for (int64_t t = 0; t < vocab; ++t) x[t] = std::round(x[t] * 2.0f) / 2.0f;
    } else if (r % 3 == 2) {
      for (int32_t t : uniform_ints(static_cast<size_t>(vocab / 100), 1,
                                    static_cast<int32_t>(vocab - 1)))
        x[t] = -INFINITY;
    }
    SamplingRow row;
    row.seed = static_cast<uint64_t>(rng()());
    row.step = static_cast<uint64_t>(uniform_ints(1, 0, 1000)[0]);
    RowLists lists;
    int32_t mask = -1;
    const int setting = static_cast<int>(r % 9);
    switch (setting) {
      case 0:
        row.temperature = 0.8f;
        break;
      case 1:
        row.min_p = 0.1f;
        break;
      case 2:
        row.temperature = 1.3f;
        row.min_p = 0.02f;
        row.num_top_logprobs = 2;
        row.target_token = uniform_ints(1, 0, static_cast<int32_t>(vocab - 1))[0];
        break;
      case 3:
        row.temperature = 0.5f;
        row.top_k = static_cast<int32_t>(vocab);
        break;
      case 4:
        row.temperature = 1e4f;
        break;
      case 5:
        row.temperature = 0.9f;
        lists = penalties(20, vocab);
        row.repetition_penalty = 1.2f;
        row.frequency_penalty = 0.3f;
        break;
      case 6: {
        row.temperature = 0.8f;
        std::vector<int32_t> allowed;
        for (int64_t t = 0; t < vocab; t += 100) allowed.push_back(static_cast<int32_t>(t));
        const std::vector<uint32_t> words = pack_mask(allowed, vocab);
        mask = static_cast<int32_t>(batch.allowed_words.size() / words.size());
        batch.allowed_words.insert(batch.allowed_words.end(), words.begin(), words.end());
        break;
      }
      case 7:
        row.min_p = 1.0f;
        break;
      default:
        row.temperature = 0.7f;
        row.min_p = 1e-30f;
        break;
    }
    add_row(batch, row, lists);
    batch.mask_index.push_back(mask);
    if (setting < 7) ++fused;
    if (setting == 7) ++race_pass;
  }
  const cuda::SamplePathCounts counts =
      expect_both_paths_match_cpu(logits, num_rows, vocab, batch, what);
  EXPECT_EQ(counts.fused_races, fused) << what;
  EXPECT_EQ(counts.race_passes, race_pass) << what;
}

TEST(CudaSamplingTest, FusedRaceMatchesCpu) {
  PAGODA_REQUIRE_GPU();
  for (int64_t vocab : {1000, 151936}) {
    for (int64_t rows : {1, 3, 64, 256}) run_plain(vocab, rows, "");
    run_plain(vocab, 9, "7");
    run_plain(vocab, 9, "1");
  }
}

}  // namespace
}  // namespace pagoda::gpu_test
