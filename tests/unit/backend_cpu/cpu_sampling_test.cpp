// sample() against sampling_batch.h: hand-made boundary cases, an
// independent double-precision re-implementation of the spec over random
// rows, seeded determinism, and the empirical distribution of the race.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <set>

#include "backend/cpu/cpu_backend.h"
#include "core/philox.h"
#include "test_util.h"

namespace pagoda {
namespace {

using test::f32;
using test::Rng;

constexpr float kInf = std::numeric_limits<float>::infinity();

// One row with optional penalty / bias lists, for building batches.
struct RowSpec {
  std::vector<float> logits;
  SamplingRow row;
  std::vector<int32_t> pen_tokens, pen_counts;
  std::vector<uint8_t> pen_prompt;
  std::vector<int32_t> bias_tokens;
  std::vector<float> bias_values;
  std::vector<int32_t> allowed;  // the row's mask; empty: unmasked
};

std::vector<uint32_t> pack_mask(const std::vector<int32_t>& ids, int64_t v) {
  std::vector<uint32_t> words(static_cast<size_t>((v + 31) / 32), 0u);
  for (int32_t t : ids) words[static_cast<size_t>(t) >> 5] |= 1u << (t & 31);
  return words;
}

SampleOutput run(const std::vector<RowSpec>& specs, int32_t max_top = 0) {
  CpuBackend be;
  const int64_t v = static_cast<int64_t>(specs[0].logits.size());
  std::vector<float> logits;
  SamplingBatch b;
  b.max_top_logprobs = max_top;
  b.penalty_offsets = {0};
  b.bias_offsets = {0};
  for (const RowSpec& s : specs) {
    logits.insert(logits.end(), s.logits.begin(), s.logits.end());
    b.rows.push_back(s.row);
    b.penalty_tokens.insert(b.penalty_tokens.end(), s.pen_tokens.begin(), s.pen_tokens.end());
    b.penalty_output_counts.insert(b.penalty_output_counts.end(), s.pen_counts.begin(),
                                   s.pen_counts.end());
    b.penalty_in_prompt.insert(b.penalty_in_prompt.end(), s.pen_prompt.begin(), s.pen_prompt.end());
    b.penalty_offsets.push_back(static_cast<int32_t>(b.penalty_tokens.size()));
    b.bias_tokens.insert(b.bias_tokens.end(), s.bias_tokens.begin(), s.bias_tokens.end());
    b.bias_values.insert(b.bias_values.end(), s.bias_values.begin(), s.bias_values.end());
    b.bias_offsets.push_back(static_cast<int32_t>(b.bias_tokens.size()));
    b.mask_index.push_back(-1);
    if (!s.allowed.empty()) {
      b.mask_index.back() = static_cast<int32_t>(b.allowed_words.size() / ((v + 31) / 32));
      const std::vector<uint32_t> words = pack_mask(s.allowed, v);
      b.allowed_words.insert(b.allowed_words.end(), words.begin(), words.end());
      b.mask_words = static_cast<int32_t>(words.size());
    }
  }
  if (b.allowed_words.empty()) b.mask_index.clear();
  SampleOutput out;
  be.sample(f32(logits, {static_cast<int64_t>(specs.size()), v}), b, out);
  return out;
}

RowSpec greedy_row(std::vector<float> logits) {
  RowSpec s;
  s.logits = std::move(logits);
  s.row.temperature = 0.0f;
  return s;
}

// Tokens drawn for `n` consecutive steps of one seeded row.
std::map<int, int> histogram(RowSpec spec, int n) {
  std::vector<RowSpec> rows;
  for (int i = 0; i < n; ++i) {
    spec.row.step = static_cast<uint64_t>(i);
    rows.push_back(spec);
  }
  SampleOutput out = run(rows);
  std::map<int, int> h;
  for (int32_t t : out.token_ids) ++h[t];
  return h;
}

std::set<int> support(const std::map<int, int>& h) {
  std::set<int> s;
  for (auto& [t, c] : h) s.insert(t);
  return s;
}

std::vector<float> log_probs(std::vector<double> p) {
  std::vector<float> x;
  for (double q : p) x.push_back(static_cast<float>(std::log(q)));
  return x;
}

TEST(CpuSampling, GreedyTiesPickLowestId) {
  EXPECT_EQ(run({greedy_row({1, 3, 3, 2})}).token_ids[0], 1);
  EXPECT_EQ(run({greedy_row({5, 5, 5})}).token_ids[0], 0);
  EXPECT_EQ(run({greedy_row({-kInf, -2, 7, 7})}).token_ids[0], 2);
  RowSpec tiny = greedy_row({1, 3, 3, 2});
  tiny.row.temperature = 0.9e-5f;  // below 1e-5: still greedy
  EXPECT_EQ(run({tiny}).token_ids[0], 1);
}

TEST(CpuSampling, RawLogprobsRanksTopKAndTargets) {
  Rng rng(200);
  for (int iter = 0; iter < 50; ++iter) {
    const int v = rng.randint(1, 700);
    // Distinct values on a 1e-3 grid plus exact duplicates.
    std::vector<float> x(static_cast<size_t>(v));
    for (auto& e : x) e = static_cast<float>(rng.randint(-4000, 4000)) * 1e-3f;
    for (int i = 0; i < v / 5; ++i) x[rng.randint(0, v - 1)] = x[rng.randint(0, v - 1)];
    RowSpec s = greedy_row(x);
    s.row.temperature = rng.pick(std::vector<float>{0.0f, 0.7f, 3.0f});
    s.bias_tokens = {static_cast<int32_t>(rng.randint(0, v - 1))};
    s.bias_values = {2.0f};  // processing never changes the reported logprobs
    const int width = rng.randint(0, 25);
    s.row.num_top_logprobs = rng.randint(0, width);
    s.row.target_token = rng.randint(-1, v - 1);
    SampleOutput out = run({s}, width);

    double m = *std::max_element(x.begin(), x.end()), sum = 0;
    for (float e : x) sum += std::exp(e - m);
    auto lp = [&](int t) { return x[t] - m - std::log(sum); };
    auto rank = [&](int t) {
      return 1 +
             static_cast<int>(std::count_if(x.begin(), x.end(), [&](float e) { return e > x[t]; }));
    };
    const int tok = out.token_ids[0];
    ASSERT_TRUE(tok >= 0 && tok < v);
    EXPECT_NEAR(out.logprobs[0], lp(tok), 1e-5);
    EXPECT_EQ(out.ranks[0], rank(tok));
    std::vector<int> order(static_cast<size_t>(v));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return x[a] > x[b]; });
    const int n = std::min(s.row.num_top_logprobs, v);
    for (int k = 0; k < width; ++k) {
      if (k < n) {
        EXPECT_EQ(out.top_ids[k], order[k]) << "k=" << k;
        EXPECT_NEAR(out.top_logprobs[k], lp(order[k]), 1e-5);
      } else {
        EXPECT_EQ(out.top_ids[k], -1);
        EXPECT_TRUE(std::isnan(out.top_logprobs[k]));
      }
    }
    if (s.row.target_token >= 0) {
      EXPECT_NEAR(out.target_logprobs[0], lp(s.row.target_token), 1e-5);
      EXPECT_EQ(out.target_ranks[0], rank(s.row.target_token));
    } else {
      EXPECT_TRUE(std::isnan(out.target_logprobs[0]));
      EXPECT_EQ(out.target_ranks[0], 0);
    }
  }
}

TEST(CpuSampling, BiasBansAndBoosts) {
  RowSpec s = greedy_row({1, 5, 3, 0});
  s.bias_tokens = {1};
  s.bias_values = {-kInf};
  EXPECT_EQ(run({s}).token_ids[0], 2);
  s.bias_tokens = {1, 3};
  s.bias_values = {-kInf, 4.5f};
  EXPECT_EQ(run({s}).token_ids[0], 3);
  // A banned token is never sampled either.
  RowSpec t;
  t.logits = {0, 0, 0, 0};
  t.row.seed = 5;
  t.bias_tokens = {0, 2};
  t.bias_values = {-kInf, -kInf};
  EXPECT_EQ(support(histogram(t, 400)), (std::set<int>{1, 3}));
}

TEST(CpuSampling, MaskAllowsOnlyItsTokensAndLogprobsStayRaw) {
  // Greedy: the best allowed token, reported with its raw logprob and rank.
  RowSpec s = greedy_row({1, 5, 3, 0, 4});
  s.allowed = {0, 2, 3};
  s.row.num_top_logprobs = 2;
  const SampleOutput out = run({s}, 2);
  EXPECT_EQ(out.token_ids[0], 2);
  EXPECT_EQ(out.ranks[0], 3);
  double z = 0;
  for (float e : s.logits) z += std::exp(e);
  EXPECT_NEAR(out.logprobs[0], 3 - std::log(z), 1e-5);
  EXPECT_EQ(out.top_ids[0], 1);  // top logprobs are raw: token 1 is disallowed yet listed
  EXPECT_EQ(out.top_ids[1], 4);
  // Bias applies after the mask: a boost cannot bring back a disallowed token.
  s.bias_tokens = {1, 3};
  s.bias_values = {50.0f, 10.0f};
  EXPECT_EQ(run({s}).token_ids[0], 3);
  // Random draws stay inside the mask, with top-k / top-p / min_p over the
  // allowed tokens only.
  RowSpec t;
  t.logits = {3, 0, 0, 2, 0, 0, 1, 0};
  t.row.seed = 9;
  t.allowed = {1, 2, 5, 7};
  EXPECT_EQ(support(histogram(t, 400)), (std::set<int>{1, 2, 5, 7}));
  t.row.top_k = 1;  // ties among the allowed: the lowest allowed id
  EXPECT_EQ(support(histogram(t, 50)), (std::set<int>{1}));
  t.row.top_k = 0;
  t.logits[5] = 2.0f;
  t.row.top_p = 0.5f;
  EXPECT_EQ(support(histogram(t, 100)), (std::set<int>{5}));
  // Masked and unmasked rows side by side; a mask past word 0.
  RowSpec wide = greedy_row(std::vector<float>(70, 0.0f));
  wide.logits[3] = 9;
  wide.logits[66] = 1;
  RowSpec masked = wide;
  masked.allowed = {40, 66, 69};
  const SampleOutput both = run({wide, masked, wide});
  EXPECT_EQ(both.token_ids, (std::vector<int32_t>{3, 66, 3}));
}

TEST(CpuSampling, PenaltiesFollowTheFormula) {
  // Repetition divides positive logits and multiplies negative ones, only for
  // tokens seen in the output or prompt.
  RowSpec s = greedy_row({4.0f, 3.0f, -1.0f, 2.5f});
  s.row.repetition_penalty = 2.0f;
  s.pen_tokens = {0, 3};
  s.pen_counts = {1, 0};
  s.pen_prompt = {0, 0};                // token 3 listed but unseen: untouched
  EXPECT_EQ(run({s}).token_ids[0], 1);  // 4/2 = 2 < 3
  s.pen_tokens = {0, 1, 3};             // 3 only in the prompt: 2.5 / 2
  s.pen_counts = {1, 1, 0};
  s.pen_prompt = {0, 0, 1};
  EXPECT_EQ(run({s}).token_ids[0], 0);  // 2, 1.5, -1, 1.25
  RowSpec n = greedy_row({-1.0f, -1.5f});
  n.row.repetition_penalty = 2.0f;
  n.pen_tokens = {0};
  n.pen_counts = {0};
  n.pen_prompt = {1};
  EXPECT_EQ(run({n}).token_ids[0], 1);  // -2 < -1.5
  // Frequency: minus 0.4 * count; presence: minus 1 when count > 0.
  RowSpec f = greedy_row({3.0f, 2.0f, 1.0f});
  f.row.frequency_penalty = 0.4f;
  f.pen_tokens = {0};
  f.pen_counts = {3};
  f.pen_prompt = {0};
  EXPECT_EQ(run({f}).token_ids[0], 1);  // 3 - 1.2 = 1.8 < 2
  f.pen_counts = {2};
  EXPECT_EQ(run({f}).token_ids[0], 0);  // 2.2
  f.row.presence_penalty = 0.5f;
  EXPECT_EQ(run({f}).token_ids[0], 1);  // 1.7
  f.pen_counts = {0};
  f.pen_prompt = {1};  // prompt presence alone: no frequency/presence penalty
  EXPECT_EQ(run({f}).token_ids[0], 0);
}

TEST(CpuSampling, TopKKeepsLowerIdsOnBoundaryTies) {
  RowSpec s;
  s.logits = {5, 4, 4, 4, 1};
  s.row.seed = 11;
  s.row.temperature = 3.0f;
  s.row.top_k = 2;
  EXPECT_EQ(support(histogram(s, 2000)), (std::set<int>{0, 1}));
  s.row.top_k = 4;
  EXPECT_EQ(support(histogram(s, 2000)), (std::set<int>{0, 1, 2, 3}));
  s.row.top_k = 5;  // == V: off
  EXPECT_EQ(support(histogram(s, 4000)), (std::set<int>{0, 1, 2, 3, 4}));
  s.row.top_k = 1;
  EXPECT_EQ(support(histogram(s, 200)), (std::set<int>{0}));
}

TEST(CpuSampling, TopPShortestPrefixReachingP) {
  RowSpec s;
  s.logits = log_probs({0.05, 0.5, 0.15, 0.3});
  s.row.seed = 12;
  auto kept = [&](float top_p) {
    s.row.top_p = top_p;
    return support(histogram(s, 3000));
  };
  EXPECT_EQ(kept(0.01f), (std::set<int>{1}));
  EXPECT_EQ(kept(0.49f), (std::set<int>{1}));
  EXPECT_EQ(kept(0.51f), (std::set<int>{1, 3}));
  EXPECT_EQ(kept(0.79f), (std::set<int>{1, 3}));
  EXPECT_EQ(kept(0.81f), (std::set<int>{1, 3, 2}));
  EXPECT_EQ(kept(0.96f), (std::set<int>{0, 1, 2, 3}));
  // Ties: lower id first.
  s.logits = log_probs({0.2, 0.4, 0.4});
  EXPECT_EQ(kept(0.3f), (std::set<int>{1}));
  // top_p applies to the renormalised set left by top_k: {0.5, 0.3} -> 0.625, 0.375.
  s.logits = log_probs({0.05, 0.5, 0.15, 0.3});
  s.row.top_k = 2;
  EXPECT_EQ(kept(0.6f), (std::set<int>{1}));
  EXPECT_EQ(kept(0.65f), (std::set<int>{1, 3}));
}

TEST(CpuSampling, MinPDropsBelowFractionOfMax) {
  RowSpec s;
  s.logits = log_probs({0.05, 0.5, 0.15, 0.3});
  s.row.seed = 13;
  s.row.min_p = 0.25f;  // threshold 0.125
  EXPECT_EQ(support(histogram(s, 3000)), (std::set<int>{1, 2, 3}));
  s.row.min_p = 0.5f;  // 0.25
  EXPECT_EQ(support(histogram(s, 3000)), (std::set<int>{1, 3}));
  s.row.min_p = 0.9f;
  EXPECT_EQ(support(histogram(s, 300)), (std::set<int>{1}));
}

// Pearson chi-square of observed counts against probabilities p.
double chi_square(const std::map<int, int>& h, const std::vector<double>& p, int n) {
  double chi = 0;
  for (size_t t = 0; t < p.size(); ++t) {
    if (p[t] == 0) {
      EXPECT_EQ(h.count(static_cast<int>(t)), 0u) << "token " << t << " has probability 0";
      continue;
    }
    const double want = p[t] * n;
    const double got = h.count(static_cast<int>(t)) ? h.at(static_cast<int>(t)) : 0;
    chi += (got - want) * (got - want) / want;
  }
  return chi;
}

TEST(CpuSampling, ExponentialRaceMatchesRenormalisedDistribution) {
  const std::vector<float> x = {0.3f, -1.2f, 2.0f, 0.9f, -0.4f, 1.4f};
  const double temp = 0.8;
  std::vector<double> p(x.size());
  for (size_t i = 0; i < x.size(); ++i) p[i] = std::exp(x[i] / temp);
  const int n = 20000;
  RowSpec s;
  s.logits = x;
  s.row.temperature = static_cast<float>(temp);
  s.row.seed = 99;
  {
    std::vector<double> q = p;
    double z = std::accumulate(q.begin(), q.end(), 0.0);
    for (double& e : q) e /= z;
    // 5 degrees of freedom: P(chi2 > 30) ~ 1.5e-5.
    EXPECT_LT(chi_square(histogram(s, n), q, n), 30.0);
  }
  {
    s.row.top_k = 3;  // keeps 2, 5, 3
    std::vector<double> q(p.size(), 0.0);
    q[2] = p[2], q[5] = p[5], q[3] = p[3];
    double z = q[2] + q[5] + q[3];
    for (double& e : q) e /= z;
    EXPECT_LT(chi_square(histogram(s, n), q, n), 25.0);  // 2 dof
  }
}

TEST(CpuSampling, SeededDrawsIndependentOfRowOrderAndBatch) {
  Rng rng(300);
  std::vector<RowSpec> rows;
  for (int r = 0; r < 12; ++r) {
    RowSpec s;
    s.logits = rng.floats(300, -2, 2);
    s.row.seed = static_cast<uint64_t>(rng.randint(0, 1 << 30));
    s.row.step = static_cast<uint64_t>(rng.randint(0, 100));
    s.row.temperature = rng.uniform(0.3f, 1.5f);
    s.row.top_k = rng.pick(std::vector<int>{0, 5, 50});
    s.row.top_p = rng.pick(std::vector<float>{1.0f, 0.9f});
    rows.push_back(s);
  }
  const SampleOutput all = run(rows);
  std::vector<RowSpec> reversed(rows.rbegin(), rows.rend());
  const SampleOutput rev = run(reversed);
  for (size_t r = 0; r < rows.size(); ++r) {
    EXPECT_EQ(all.token_ids[r], rev.token_ids[rows.size() - 1 - r]);
    EXPECT_EQ(all.token_ids[r], run({rows[r]}).token_ids[0]);
  }
  // Another step draws other noise: over 12 rows some token changes.
  int changed = 0;
  for (auto& s : rows) ++s.row.step;
  const SampleOutput next = run(rows);
  for (size_t r = 0; r < rows.size(); ++r) changed += next.token_ids[r] != all.token_ids[r];
  EXPECT_GT(changed, 0);
}

// ---- independent reference of the whole pipeline ----------------------------

// The spec in double precision; returns -1 when a decision is within `tol`
// of a boundary (then f32 and f64 may legitimately disagree).
int reference_sample(const RowSpec& s) {
  const double tol = 1e-4;
  const int v = static_cast<int>(s.logits.size());
  std::vector<double> x(s.logits.begin(), s.logits.end());
  if (!s.allowed.empty()) {
    for (int t = 0; t < v; ++t)
      if (std::find(s.allowed.begin(), s.allowed.end(), t) == s.allowed.end()) x[t] = -kInf;
  }
  for (size_t i = 0; i < s.bias_tokens.size(); ++i) x[s.bias_tokens[i]] += s.bias_values[i];
  const SamplingRow& r = s.row;
  for (size_t i = 0; i < s.pen_tokens.size(); ++i) {
    double& e = x[s.pen_tokens[i]];
    const int c = s.pen_counts[i];
    if (r.repetition_penalty != 1.0f && (c > 0 || s.pen_prompt[i]))
      e = e > 0 ? e / r.repetition_penalty : e * r.repetition_penalty;
    e -= static_cast<double>(r.frequency_penalty) * c + (c > 0 ? r.presence_penalty : 0.0f);
  }
  std::vector<int> order(static_cast<size_t>(v));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return x[a] > x[b]; });
  if (r.temperature < 1e-5f) return v > 1 && x[order[0]] - x[order[1]] < tol ? -1 : order[0];

  std::vector<double> p(static_cast<size_t>(v));
  const double m = x[order[0]];
  double z = 0;
  for (int i = 0; i < v; ++i) z += (p[i] = std::exp((x[i] - m) / r.temperature));
  for (double& e : p) e /= z;
  std::vector<int> kept;  // in descending order
  for (int t : order) {
    if (r.min_p > 0 && std::abs(p[t] - r.min_p * p[order[0]]) < tol * p[order[0]]) return -1;
    if (!(r.min_p > 0 && p[t] < r.min_p * p[order[0]])) kept.push_back(t);
  }
  if (r.top_k > 0 && r.top_k < static_cast<int>(kept.size())) {
    if (x[kept[r.top_k - 1]] - x[kept[r.top_k]] < tol) return -1;
    kept.resize(static_cast<size_t>(r.top_k));
  }
  if (r.top_p < 1.0f) {
    double total = 0, cum = 0;
    for (int t : kept) total += p[t];
    size_t n = 0;
    while (n < kept.size()) {
      cum += p[kept[n++]] / total;
      if (std::abs(cum - r.top_p) < tol) return -1;
      if (cum >= r.top_p) break;
    }
    kept.resize(n);
  }
  int best = -1;
  double best_score = -1, second = -1;
  for (int t : kept) {
    const double score =
        p[t] /
        -std::log(static_cast<double>(philox_uniform(r.seed, r.step, static_cast<uint64_t>(t))));
    if (score > best_score)
      second = best_score, best_score = score, best = t;
    else
      second = std::max(second, score);
  }
  return second > 0 && best_score - second < tol * best_score ? -1 : best;
}

TEST(CpuSampling, MatchesIndependentReferenceOnRandomRows) {
  Rng rng(400);
  int compared = 0, masked = 0;
  const int total = 3000;
  for (int iter = 0; iter < total; ++iter) {
    RowSpec s;
    const int v = rng.randint(2, 40);
    s.logits = rng.floats(static_cast<size_t>(v), -3, 3);
    SamplingRow& r = s.row;
    r.temperature = rng.pick(std::vector<float>{0.0f, 0.5f, 1.0f, 1.7f});
    r.top_k = rng.pick(std::vector<int>{0, 0, 1, 3, 10, 100});
    r.top_p = rng.pick(std::vector<float>{1.0f, 1.0f, 0.5f, 0.9f});
    r.min_p = rng.pick(std::vector<float>{0.0f, 0.0f, 0.05f, 0.3f});
    r.repetition_penalty = rng.pick(std::vector<float>{1.0f, 1.3f, 0.8f});
    r.frequency_penalty = rng.pick(std::vector<float>{0.0f, 0.5f, -0.3f});
    r.presence_penalty = rng.pick(std::vector<float>{0.0f, 0.7f});
    r.seed = static_cast<uint64_t>(rng.randint(0, 1000000));
    r.step = static_cast<uint64_t>(rng.randint(0, 50));
    std::set<int> listed;
    for (int i = rng.randint(0, 6); i > 0; --i) listed.insert(rng.randint(0, v - 1));
    for (int t : listed) {
      s.pen_tokens.push_back(t);
      s.pen_counts.push_back(rng.randint(0, 3));
      s.pen_prompt.push_back(static_cast<uint8_t>(rng.randint(0, 1)));
    }
    if (v > 4 && rng.randint(0, 2) == 0) {  // a mask of at least 3 tokens, so bans leave one
      for (int t = 0; t < v; ++t)
        if (rng.randint(0, 2) == 0) s.allowed.push_back(t);
      while (s.allowed.size() < 3) s.allowed.push_back(static_cast<int32_t>(s.allowed.size()));
      std::sort(s.allowed.begin(), s.allowed.end());
      s.allowed.erase(std::unique(s.allowed.begin(), s.allowed.end()), s.allowed.end());
      if (s.allowed.size() < 3) s.allowed = {0, 1, 2};
    }
    for (int i = rng.randint(0, 2); i > 0; --i) {
      s.bias_tokens.push_back(rng.randint(0, v - 1));
      // -inf bans only where at least one token stays free.
      s.bias_values.push_back(v > 2 && rng.randint(0, 4) == 0 ? -kInf : rng.uniform(-3, 3));
    }
    const int want = reference_sample(s);
    if (want < 0) continue;
    ++compared;
    ASSERT_EQ(run({s}).token_ids[0], want) << "iteration " << iter;
    if (!s.allowed.empty()) ++masked;
  }
  EXPECT_GT(compared, total * 9 / 10);
  EXPECT_GT(masked, total / 5);
}

}  // namespace
}  // namespace pagoda
