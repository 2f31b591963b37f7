// The reference sampler: sampling_batch.h's semantics, step by step.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <vector>

#include "backend/cpu/cpu_ops.h"
#include "core/philox.h"
#include "core/thread_pool.h"

namespace pagoda::cpu {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr float kGreedyTemperature = 1e-5f;

// lp[i] = log_softmax(x)[i]: max in f32, sum of exp in f64, lp rounded to f32.
void log_softmax(const float* x, int64_t v, float* lp) {
  float m = kNegInf;
  for (int64_t i = 0; i < v; ++i) m = std::max(m, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < v; ++i) sum += std::exp(static_cast<double>(x[i]) - m);
  const double lse = m + std::log(sum);
  for (int64_t i = 0; i < v; ++i) lp[i] = static_cast<float>(static_cast<double>(x[i]) - lse);
}

// 1 + number of tokens with a strictly larger logprob.
int32_t rank_of(const float* lp, int64_t v, int32_t token) {
  int32_t rank = 1;
  for (int64_t i = 0; i < v; ++i) rank += lp[i] > lp[token] ? 1 : 0;
  return rank;
}

// Step 0: -inf on every token the row's mask does not allow.
void apply_mask(const SamplingBatch& b, size_t r, float* x, int64_t v) {
  if (b.mask_index.empty() || b.mask_index[r] < 0) return;
  const uint32_t* words =
      b.allowed_words.data() + static_cast<size_t>(b.mask_index[r]) * static_cast<size_t>(b.mask_words);
  for (int64_t t = 0; t < v; ++t)
    if (!mask_allows(words, t)) x[t] = kNegInf;
}

// Steps 0 to 2: mask, logit bias, then repetition / frequency / presence penalties.
void process_logits(const SamplingBatch& b, size_t r, float* x, int64_t v) {
  apply_mask(b, r, x, v);
  if (!b.bias_offsets.empty()) {
    for (int32_t i = b.bias_offsets[r]; i < b.bias_offsets[r + 1]; ++i)
      x[b.bias_tokens[static_cast<size_t>(i)]] += b.bias_values[static_cast<size_t>(i)];
  }
  if (b.penalty_offsets.empty()) return;
  const SamplingRow& row = b.rows[r];
  for (int32_t i = b.penalty_offsets[r]; i < b.penalty_offsets[r + 1]; ++i) {
    const size_t j = static_cast<size_t>(i);
    const int32_t c = b.penalty_output_counts[j];
    float& xt = x[b.penalty_tokens[j]];
    if (row.repetition_penalty != 1.0f && (c > 0 || b.penalty_in_prompt[j] != 0))
      xt = xt > 0.0f ? xt / row.repetition_penalty : xt * row.repetition_penalty;
    xt -= row.frequency_penalty * static_cast<float>(c) +
          row.presence_penalty * (c > 0 ? 1.0f : 0.0f);
  }
}

// First index of the maximum (lowest id on ties).
int32_t argmax(const float* x, int64_t v) {
  int64_t best = 0;
  for (int64_t i = 1; i < v; ++i)
    if (x[i] > x[best]) best = i;
  return static_cast<int32_t>(best);
}

// Step 4: temperature, min_p, top_k, top_p, exponential race. x is the
// processed row (scaled in place); p is scratch [V].
int32_t draw(const SamplingRow& row, float* x, float* p, int64_t v) {
  for (int64_t i = 0; i < v; ++i) x[i] /= row.temperature;
  const float m = *std::max_element(x, x + v);
  double sum = 0.0;
  for (int64_t i = 0; i < v; ++i) {
    p[i] = std::exp(x[i] - m);
    sum += p[i];
  }
  for (int64_t i = 0; i < v; ++i) p[i] = static_cast<float>(p[i] / sum);

  std::vector<int32_t> kept;
  kept.reserve(static_cast<size_t>(v));
  const float p_max = *std::max_element(p, p + v);
  for (int32_t i = 0; i < v; ++i)
    if (!(row.min_p > 0.0f && p[i] < row.min_p * p_max)) kept.push_back(i);

  if (row.top_k > 0 && row.top_k<v&& static_cast<int64_t>(kept.size())> row.top_k) {
    auto by_x = [&](int32_t a, int32_t b) { return x[a] > x[b] || (x[a] == x[b] && a < b); };
    std::nth_element(kept.begin(), kept.begin() + row.top_k, kept.end(), by_x);
    kept.resize(static_cast<size_t>(row.top_k));
  }
  if (row.top_p < 1.0f) {
    auto by_p = [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); };
    std::sort(kept.begin(), kept.end(), by_p);
    double total = 0.0;
    for (int32_t t : kept) total += p[t];
    double cum = 0.0;
    size_t n = 0;
    while (n < kept.size()) {
      cum += p[kept[n++]] / total;
      if (cum >= row.top_p) break;
    }
    kept.resize(n);
  }

  int32_t best = -1;
  float best_score = -1.0f;
  for (int32_t t : kept) {
    const float e = -std::log(philox_uniform(row.seed, row.step, static_cast<uint64_t>(t)));
    const float score = p[t] / e;
    if (score > best_score || (score == best_score && t < best)) {
      best = t;
      best_score = score;
    }
  }
  return best >= 0 ? best : argmax(x, v);
}

// Top `n` tokens by raw logprob (lower id first on ties) into ids/lps [width];
// entries past n hold -1 / NaN.
void top_logprobs(const float* lp, int64_t v, int32_t n, int32_t width, int32_t* ids, float* lps) {
  if (width <= 0) return;
  n = static_cast<int32_t>(std::min<int64_t>({n, width, v}));
  std::vector<int32_t> order(static_cast<size_t>(v));
  for (int32_t i = 0; i < v; ++i) order[static_cast<size_t>(i)] = i;
  auto by_lp = [&](int32_t a, int32_t b) { return lp[a] > lp[b] || (lp[a] == lp[b] && a < b); };
  std::partial_sort(order.begin(), order.begin() + std::max(n, 0), order.end(), by_lp);
  for (int32_t k = 0; k < width; ++k) {
    ids[k] = k < n ? order[static_cast<size_t>(k)] : -1;
    lps[k] = k < n ? lp[ids[k]] : kNaN;
  }
}

}  // namespace

void sample(const Tensor& logits, const SamplingBatch& batch, SampleOutput& out) {
  assert(logits.dtype == DType::kF32);
  const int64_t num_rows = logits.dim(0);
  const int64_t v = logits.dim(1);
  const int32_t width = batch.max_top_logprobs;
  assert(static_cast<int64_t>(batch.rows.size()) == num_rows);
  out.token_ids.assign(static_cast<size_t>(num_rows), 0);
  out.logprobs.assign(static_cast<size_t>(num_rows), 0.0f);
  out.ranks.assign(static_cast<size_t>(num_rows), 0);
  out.top_ids.assign(static_cast<size_t>(num_rows * width), -1);
  out.top_logprobs.assign(static_cast<size_t>(num_rows * width), kNaN);
  out.target_logprobs.assign(static_cast<size_t>(num_rows), kNaN);
  out.target_ranks.assign(static_cast<size_t>(num_rows), 0);

  parallel_for(num_rows, 1, [&](int64_t lo, int64_t hi) {
    std::vector<float> lp(static_cast<size_t>(v)), x(static_cast<size_t>(v)),
        p(static_cast<size_t>(v));
    for (int64_t r = lo; r < hi; ++r) {
      const size_t ri = static_cast<size_t>(r);
      const SamplingRow& row = batch.rows[ri];
      const float* in = logits.ptr<float>() + r * v;
      log_softmax(in, v, lp.data());
      std::copy(in, in + v, x.begin());
      process_logits(batch, ri, x.data(), v);
      const int32_t token = row.temperature < kGreedyTemperature ? argmax(x.data(), v)
                                                                 : draw(row, x.data(), p.data(), v);
      out.token_ids[ri] = token;
      out.logprobs[ri] = lp[static_cast<size_t>(token)];
      out.ranks[ri] = rank_of(lp.data(), v, token);
      top_logprobs(lp.data(), v, row.num_top_logprobs, width, out.top_ids.data() + r * width,
                   out.top_logprobs.data() + r * width);
      if (row.target_token >= 0 && row.target_token < v) {
        out.target_logprobs[ri] = lp[static_cast<size_t>(row.target_token)];
        out.target_ranks[ri] = rank_of(lp.data(), v, row.target_token);
      }
    }
  });
}

}  // namespace pagoda::cpu
