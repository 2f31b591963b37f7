// Helpers of the CUDA sampling tests (sampling_test*.cpp): batches of mixed
// row settings, token lists and masks, the GPU-vs-CPU comparison, and
// scoped environment variables (PAGODA_SAMPLE_GROUPS, PAGODA_SAMPLE_KERNEL).
#pragma once

#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "backend/cuda/sampling_kernels.h"
#include "test_util.h"

namespace pagoda::gpu_test {

struct RowLists {
  std::vector<int32_t> pen_tokens, pen_counts;
  std::vector<uint8_t> pen_prompt;
  std::vector<int32_t> bias_tokens;
  std::vector<float> bias_values;
};

inline void add_row(SamplingBatch& b, const SamplingRow& row, const RowLists& l) {
  if (b.penalty_offsets.empty()) b.penalty_offsets.push_back(0);
  if (b.bias_offsets.empty()) b.bias_offsets.push_back(0);
  b.rows.push_back(row);
  b.penalty_tokens.insert(b.penalty_tokens.end(), l.pen_tokens.begin(), l.pen_tokens.end());
  b.penalty_output_counts.insert(b.penalty_output_counts.end(), l.pen_counts.begin(),
                                 l.pen_counts.end());
  b.penalty_in_prompt.insert(b.penalty_in_prompt.end(), l.pen_prompt.begin(), l.pen_prompt.end());
  b.penalty_offsets.push_back(static_cast<int32_t>(b.penalty_tokens.size()));
  b.bias_tokens.insert(b.bias_tokens.end(), l.bias_tokens.begin(), l.bias_tokens.end());
  b.bias_values.insert(b.bias_values.end(), l.bias_values.begin(), l.bias_values.end());
  b.bias_offsets.push_back(static_cast<int32_t>(b.bias_tokens.size()));
}

// `n` distinct token ids below `vocab`.
inline std::vector<int32_t> distinct_tokens(int n, int64_t vocab) {
  std::vector<int32_t> ids;
  std::uniform_int_distribution<int32_t> d(0, static_cast<int32_t>(vocab - 1));
  while (static_cast<int>(ids.size()) < n) {
    const int32_t t = d(rng());
    if (std::find(ids.begin(), ids.end(), t) == ids.end()) ids.push_back(t);
  }
  return ids;
}

inline RowLists penalties(int n, int64_t vocab) {
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
inline std::vector<std::pair<SamplingRow, RowLists>> row_mix(int64_t vocab,
                                                             const std::vector<float>& logits,
                                                             int64_t first_row) {
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

inline SampleOutput run_sample(Backend& be, const std::vector<float>& logits, int64_t num_rows,
                               int64_t vocab, const SamplingBatch& batch) {
  DevTensor t(be, DType::kF32, {num_rows, vocab}, logits);
  SampleOutput out;
  be.sample(t.t(), batch, out);
  return out;
}

// A logprob of the GPU within 1e-5 of the CPU's; NaN (none reported) and
// -inf (a masked or -inf logit) must match exactly.
inline void expect_logprob(float g, float c) {
  if (std::isnan(c) || std::isinf(c)) {
    EXPECT_TRUE(std::isnan(c) ? std::isnan(g) : g == c) << g << " vs " << c;
  } else {
    EXPECT_NEAR(g, c, 1e-5);
  }
}

inline void expect_same_output(const SampleOutput& g, const SampleOutput& c, const SamplingBatch& b,
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

// The packed mask allowing `ids` (SamplingBatch::allowed_words' layout).
inline std::vector<uint32_t> pack_mask(const std::vector<int32_t>& ids, int64_t vocab) {
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
inline void add_random_masks(SamplingBatch& batch, const std::vector<float>& logits,
                             int64_t vocab) {
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
inline void expect_allowed(const SampleOutput& out, const SamplingBatch& batch) {
  for (size_t r = 0; r < batch.rows.size(); ++r) {
    if (batch.mask_index[r] < 0) continue;
    const uint32_t* words = batch.allowed_words.data() + static_cast<size_t>(batch.mask_index[r]) *
                                                             static_cast<size_t>(batch.mask_words);
    EXPECT_TRUE(mask_allows(words, out.token_ids[r]))
        << "row " << r << " sampled " << out.token_ids[r];
  }
}

// Environment variable `name` set to `value` for the scope (nullptr: unset),
// restored after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    set(value);
  }
  ~ScopedEnv() { set(had_ ? old_.c_str() : nullptr); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void set(const char* value) {
    if (value == nullptr) {
      unsetenv(name_);
    } else {
      setenv(name_, value, 1);
    }
  }
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// PAGODA_SAMPLE_GROUPS for the scope.
struct ScopedGroups : ScopedEnv {
  explicit ScopedGroups(const char* value) : ScopedEnv("PAGODA_SAMPLE_GROUPS", value) {}
};

// PAGODA_SAMPLE_KERNEL for the scope (nullptr: unset, the fewer passes).
struct ScopedKernel : ScopedEnv {
  explicit ScopedKernel(const char* value) : ScopedEnv("PAGODA_SAMPLE_KERNEL", value) {}
};

// The batch on the GPU with the fewer passes and with the old ones: each
// equal to the CPU, and to each other in every token, rank and top-K id.
// Returns the path counts of the fewer-pass run (sampling_kernels.h);
// the old run must read no mask on the fly.
inline cuda::SamplePathCounts expect_both_paths_match_cpu(const std::vector<float>& logits,
                                                          int64_t num_rows, int64_t vocab,
                                                          const SamplingBatch& batch,
                                                          const std::string& what) {
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  const SampleOutput c = run_sample(cpu_backend(), logits, num_rows, vocab, batch);
  SampleOutput fewer, old;
  cuda::SamplePathCounts counts, old_counts;
  EXPECT_EQ(cuda::take_sample_path_counts(counts), cudaSuccess);  // zeroed
  {
    ScopedKernel env(nullptr);
    EXPECT_TRUE(cuda::sample_fewer_passes());
    fewer = run_sample(gpu, logits, num_rows, vocab, batch);
    EXPECT_EQ(cuda::take_sample_path_counts(counts), cudaSuccess);
  }
  {
    ScopedKernel env("old");
    EXPECT_FALSE(cuda::sample_fewer_passes());
    old = run_sample(gpu, logits, num_rows, vocab, batch);
    EXPECT_EQ(cuda::take_sample_path_counts(old_counts), cudaSuccess);
  }
  EXPECT_EQ(old_counts.mask_on_the_fly, 0u) << what;
  EXPECT_EQ(old_counts.candidates + old_counts.candidate_misses, 0u) << what;
  expect_same_output(fewer, c, batch, what + " fewer passes");
  expect_same_output(old, c, batch, what + " old passes");
  EXPECT_EQ(fewer.token_ids, old.token_ids) << what;
  EXPECT_EQ(fewer.ranks, old.ranks) << what;
  EXPECT_EQ(fewer.target_ranks, old.target_ranks) << what;
  EXPECT_EQ(fewer.top_ids, old.top_ids) << what;
  expect_status_ok(gpu);
  return counts;
}

// Row settings without token lists, valid for any vocabulary (even 1).
inline std::vector<SamplingRow> small_vocab_mix(int64_t vocab) {
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
inline SamplingBatch mixed_batch(const std::vector<float>& logits, int64_t num_rows, int64_t vocab,
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

}  // namespace pagoda::gpu_test
