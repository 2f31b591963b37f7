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
#include "test_util.h"

namespace pagoda::gpu_test {
namespace {

struct RowLists {
  std::vector<int32_t> pen_tokens, pen_counts;
  std::vector<uint8_t> pen_prompt;
  std::vector<int32_t> bias_tokens;
  std::vector<float> bias_values;
};

void add_row(SamplingBatch& b, const SamplingRow& row, const RowLists& l) {
  if (b.penalty_offsets.empty()) b.penalty_offsets.push_back(0);
  if (b.bias_offsets.empty()) b.bias_offsets.push_back(0);
  b.rows.push_back(row);
  b.penalty_tokens.insert(b.penalty_tokens.end(), l.pen_tokens.begin(), l.pen_tokens.end());
  b.penalty_output_counts.insert(b.penalty_output_counts.end(), l.pen_counts.begin(), l.pen_counts.end());
  b.penalty_in_prompt.insert(b.penalty_in_prompt.end(), l.pen_prompt.begin(), l.pen_prompt.end());
  b.penalty_offsets.push_back(static_cast<int32_t>(b.penalty_tokens.size()));
  b.bias_tokens.insert(b.bias_tokens.end(), l.bias_tokens.begin(), l.bias_tokens.end());
  b.bias_values.insert(b.bias_values.end(), l.bias_values.begin(), l.bias_values.end());
  b.bias_offsets.push_back(static_cast<int32_t>(b.bias_tokens.size()));
}

// `n` distinct token ids below `vocab`.
std::vector<int32_t> distinct_tokens(int n, int64_t vocab) {
  std::vector<int32_t> ids;
  std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(vocab - 1));
  while (static_cast<int>(ids.size()) < n) {
    const int32_t t = d(rng());
    if (std::find(ids.begin(), ids.end(), t) == ids.end()) ids.push_back(t);
  }
  return ids;
}

RowLists penalties(int n, int64_t vocab) {
  RowLists l;
  l.pen_tokens = distinct_tokens(n, vocab);
  for (int i = 0; i < n; ++i) {
    const int32_t c = uniform_ints(1, 0, 4)[0];
    l.pen_counts.push_back(c);
    l.pen_prompt.push_back(c == 0 ? 1 : static_cast<uint8_t>(uniform_ints(1, 0, 1)[0]));
  }
  return l;
}

// The row settings exercised in every batch (one row each).
std::vector<std::pair<SamplingRow, RowLists>> row_mix(int64_t vocab, const std::vector<float>& logits, int64_t first_row) {
  std::vector<std::pair<SamplingRow, RowLists>> rows;
  auto seeded = [&](SamplingRow r) {
    r.seed = static_cast<uint64_t>(rng()());
    r.step = static_cast<uint64_t>(uniform_ints(1, 0, 1000)[0]);
    return r;
  };
  const int64_t last_row = static_cast<int64_t>(logits.size()) / vocab - 1;
  auto argmax_of = [&](int64_t row) {
    const float* x = logits.data() + std::min(row, last_row) * vocab;
    return static_cast<int32_t>(std::max_element(x, x + vocab) - x);
  };
  SamplingRow greedy;
  greedy.temperature = 0.0f;
  rows.push_back({greedy, {}});
  RowLists ban;  // ban the argmax of its row, favour two others
  ban.bias_tokens = {argmax_of(first_row + 1)};
  ban.bias_values = {-INFINITY};
  for (int32_t t : distinct_tokens(2, vocab)) {
    if (t == ban.bias_tokens[0]) continue;
    ban.bias_tokens.push_back(t);
    ban.bias_values.push_back(2.5f);
  }
  rows.push_back({greedy, ban});
  SamplingRow r;
  r.temperature = 0.8f;
  rows.push_back({seeded(r), {}});
  r = SamplingRow{};
  r.top_k = 50;
  rows.push_back({seeded(r), {}});
  r = SamplingRow{};
  r.temperature = 0.7f;
  r.top_p = 0.9f;
  rows.push_back({seeded(r), {}});
  r = SamplingRow{};
  r.temperature = 1.2f;
  r.min_p = 0.05f;
  rows.push_back({seeded(r), {}});
  r = SamplingRow{};
  r.top_k = 40;
  r.top_p = 0.8f;
  r.min_p = 0.02f;
  rows.push_back({seeded(r), {}});
  r = SamplingRow{};
  r.repetition_penalty = 1.3f;
  r.presence_penalty = 0.5f;
  r.frequency_penalty = 0.3f;
  rows.push_back({seeded(r), penalties(60, vocab)});
  SamplingRow gp = greedy;
  gp.repetition_penalty = 1.5f;
  gp.frequency_penalty = 0.2f;
  RowLists both = penalties(30, vocab);
  both.bias_tokens = {argmax_of(first_row + 8)};
  both.bias_values = {-1.0f};
  rows.push_back({gp, both});
  r = SamplingRow{};
  r.top_k = 1;
  rows.push_back({seeded(r), {}});
  r = SamplingRow{};
  r.top_p = 0.01f;
  r.num_top_logprobs = 5;
  rows.push_back({seeded(r), {}});
  r = SamplingRow{};
  r.temperature = 0.9f;
  r.top_k = 200;
  r.num_top_logprobs = 20;
  r.target_token = static_cast<int32_t>(uniform_ints(1, 0, static_cast<int32_t>(vocab - 1))[0]);
  rows.push_back({seeded(r), {}});
  r = SamplingRow{};
  r.top_k = static_cast<int32_t>(vocab - 1);
  r.top_p = 0.999f;
  r.target_token = argmax_of(first_row + 12);
  rows.push_back({seeded(r), {}});
  r = SamplingRow{};
  r.top_k = static_cast<int32_t>(vocab + 5);  // >= V: off
  r.min_p = 0.3f;
  r.num_top_logprobs = 3;
  rows.push_back({seeded(r), {}});
  return rows;
}

SampleOutput run_sample(Backend& be, const std::vector<float>& logits, int64_t num_rows,
                        int64_t vocab, const SamplingBatch& batch) {
  DevTensor t(be, DType::kF32, {num_rows, vocab}, logits);
  SampleOutput out;
  be.sample(t.t(), batch, out);
  return out;
}

// A logprob of the GPU within 1e-5 of the CPU's; NaN (none reported) and
// -inf (a masked or -inf logit) must match exactly.
void expect_logprob(float g, float c) {
  if (std::isnan(c) || std::isinf(c)) {
    EXPECT_TRUE(std::isnan(c) ? std::isnan(g) : g == c) << g << " vs " << c;
  } else {
    EXPECT_NEAR(g, c, 1e-5);
  }
}

void expect_same_output(const SampleOutput& g, const SampleOutput& c, const SamplingBatch& b,
                        const std::string& what) {
  ASSERT_EQ(g.token_ids.size(), c.token_ids.size()) << what;
  const size_t width = static_cast<size_t>(b.max_top_logprobs);
  for (size_t r = 0; r < c.token_ids.size(); ++r) {
    const SamplingRow& row = b.rows[r];
    SCOPED_TRACE(what + " row " + std::to_string(r) + " T=" + std::to_string(row.temperature) +
                 " top_k=" + std::to_string(row.top_k) + " top_p=" + std::to_string(row.top_p) +
                 " min_p=" + std::to_string(row.min_p));
    EXPECT_EQ(g.token_ids[r], c.token_ids[r]);
    expect_logprob(g.logprobs[r], c.logprobs[r]);
    EXPECT_EQ(g.ranks[r], c.ranks[r]);
    expect_logprob(g.target_logprobs[r], c.target_logprobs[r]);
    EXPECT_EQ(g.target_ranks[r], c.target_ranks[r]);
    for (size_t k = 0; k < width; ++k) {
      const size_t i = r * width + k;
      EXPECT_EQ(g.top_ids[i], c.top_ids[i]) << "top-K entry " << k;
      SCOPED_TRACE("top-K entry " + std::to_string(k));
      expect_logprob(g.top_logprobs[i], c.top_logprobs[i]);
    }
  }
}

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

// The packed mask allowing `ids` (SamplingBatch::allowed_words' layout).
std::vector<uint32_t> pack_mask(const std::vector<int32_t>& ids, int64_t vocab) {
  std::vector<uint32_t> words(static_cast<size_t>((vocab + 31) / 32), 0u);
  for (int32_t t : ids) words[static_cast<size_t>(t) >> 5] |= 1u << (t & 31);
  return words;
}

// Masks about half of `batch`'s rows, each mask one of: a single token (rows
// without bias bans), a few random tokens, every token but the row's 100
// largest logits (so greedy, top-k and top-p must pick elsewhere), or the
// previous masked row's mask (shared; rows without bias bans, so that a ban
// never meets a single-token mask). Never allows the row's argmax, so every
// masked row's answer changes.
void add_random_masks(SamplingBatch& batch, const std::vector<float>& logits, int64_t vocab) {
  const size_t num_rows = batch.rows.size();
  batch.mask_words = static_cast<int32_t>((vocab + 31) / 32);
  batch.mask_index.assign(num_rows, -1);
  int32_t num_masks = 0;
  for (size_t r = 0; r < num_rows; ++r) {
    const int kind = uniform_ints(1, 0, 4)[0];
    if (kind == 0) continue;  // unmasked
    const float* x = logits.data() + static_cast<int64_t>(r) * vocab;
    std::vector<int32_t> order(static_cast<size_t>(vocab));
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + 100, order.end(),
                      [&](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
    const bool bans = batch.bias_offsets[r + 1] > batch.bias_offsets[r];
    if (kind == 4 && num_masks > 0 && !bans) {
      batch.mask_index[r] = num_masks - 1;  // shared (may allow this row's argmax: still a mask)
      continue;
    }
    std::vector<int32_t> allowed;
    if (kind == 1 && !bans) {
      allowed = {order[static_cast<size_t>(uniform_ints(1, 1, 99)[0])]};
    } else if (kind == 3) {
      allowed.assign(order.begin() + 100, order.end());
    } else {
      for (int32_t t : distinct_tokens(uniform_ints(1, 3, 40)[0], vocab))
        if (t != order[0]) allowed.push_back(t);
    }
    const std::vector<uint32_t> words = pack_mask(allowed, vocab);
    batch.allowed_words.insert(batch.allowed_words.end(), words.begin(), words.end());
    batch.mask_index[r] = num_masks++;
  }
}

// Every sampled token of a masked row is one its mask allows.
void expect_allowed(const SampleOutput& out, const SamplingBatch& batch) {
  for (size_t r = 0; r < batch.rows.size(); ++r) {
    if (batch.mask_index[r] < 0) continue;
    const uint32_t* words = batch.allowed_words.data() +
                            static_cast<size_t>(batch.mask_index[r]) * static_cast<size_t>(batch.mask_words);
    EXPECT_TRUE(mask_allows(words, out.token_ids[r])) << "row " << r << " sampled " << out.token_ids[r];
  }
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

// PAGODA_SAMPLE_GROUPS set for the scope (nullptr: unset), restored after.
class ScopedGroups {
 public:
  explicit ScopedGroups(const char* value) {
    const char* old = std::getenv(kName);
    had_ = old != nullptr;
    if (had_) old_ = old;
    set(value);
  }
  ~ScopedGroups() { set(had_ ? old_.c_str() : nullptr); }
  ScopedGroups(const ScopedGroups&) = delete;
  ScopedGroups& operator=(const ScopedGroups&) = delete;

 private:
  static constexpr const char* kName = "PAGODA_SAMPLE_GROUPS";
  static void set(const char* value) {
    if (value == nullptr) {
      unsetenv(kName);
    } else {
      setenv(kName, value, 1);
    }
  }
  bool had_ = false;
  std::string old_;
};

// Row settings without token lists, valid for any vocabulary (even 1).
std::vector<SamplingRow> small_vocab_mix(int64_t vocab) {
  std::vector<SamplingRow> rows;
  auto seeded = [&](SamplingRow r) {
    r.seed = static_cast<uint64_t>(rng()());
    r.step = static_cast<uint64_t>(uniform_ints(1, 0, 1000)[0]);
    r.target_token = uniform_ints(1, 0, static_cast<int32_t>(vocab - 1))[0];
    return r;
  };
  const int32_t v = static_cast<int32_t>(vocab);
  SamplingRow r;
  r.temperature = 0.0f;
  r.num_top_logprobs = 5;
  rows.push_back(seeded(r));
  r = SamplingRow{};
  r.temperature = 0.8f;
  rows.push_back(seeded(r));
  r = SamplingRow{};
  r.top_k = std::max(1, v / 2);
  r.top_p = 0.9f;
  r.num_top_logprobs = 20;
  rows.push_back(seeded(r));
  r = SamplingRow{};
  r.top_k = std::max(1, v - 1);
  r.min_p = 0.1f;
  rows.push_back(seeded(r));
  r = SamplingRow{};
  r.temperature = 1.3f;
  r.top_p = 0.5f;
  r.num_top_logprobs = 1;
  rows.push_back(seeded(r));
  return rows;
}

// `num_rows` rows cycling through the settings mixes (row_mix's lists need
// a vocabulary of a few hundred tokens), every fourth repeat masked.
SamplingBatch mixed_batch(const std::vector<float>& logits, int64_t num_rows, int64_t vocab,
                          bool masks) {
  SamplingBatch batch;
  batch.max_top_logprobs = 20;
  while (static_cast<int64_t>(batch.rows.size()) < num_rows) {
    const int64_t first = static_cast<int64_t>(batch.rows.size());
    if (vocab < 512) {
      for (const SamplingRow& row : small_vocab_mix(vocab)) {
        if (static_cast<int64_t>(batch.rows.size()) == num_rows) break;
        add_row(batch, row, {});
      }
      continue;
    }
    for (auto& [row, lists] : row_mix(vocab, logits, first)) {
      if (static_cast<int64_t>(batch.rows.size()) == num_rows) break;
      add_row(batch, row, lists);
    }
  }
  if (masks && vocab >= 512) add_random_masks(batch, logits, vocab);
  return batch;
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
  EXPECT_GT(cuda::sample_groups(1, 151936), 8);
  EXPECT_GT(cuda::sample_groups(8, 151936), 1);
  EXPECT_EQ(cuda::sample_groups(300, 151936), 1);
  EXPECT_EQ(cuda::sample_groups(1, 4096), 1);  // one chunk of kMinChunk
  EXPECT_LE(cuda::sample_groups(1, 1 << 24), cuda::kMaxSampleGroups);
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
