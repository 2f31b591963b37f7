// ReferenceCheck and near_tie_tokens: the device contract of
// engine_harness.h (exact on cpu; on cuda up to the bf16 tolerances of
// namespace tol), in one place.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>

#include "core/philox.h"
#include "engine_harness.h"

namespace pagoda::test {

// Greedy: a flip needs x_chosen - x_t <= 2 eps. Seeded: y = x / T moves by
// at most e = eps / T. The filters (top_k, then top_p over the top_k set,
// cut where the mass strictly above a token reaches top_p) are bounded
// per token: "maybe" kept when the filter keeps it for some perturbation,
// "surely" kept when for every one; a token t may win the race only if it
// is maybe kept and its score y_t - log E_t (E_t = -log philox_uniform) is
// within 2 e of every other surely kept token's.
std::vector<char> near_tie_tokens(std::span<const float> x, const SamplingParams& params,
                                  uint64_t seed, uint64_t step, double eps, int32_t chosen) {
  const size_t v = x.size();
  std::vector<char> out(v, 0);
  auto finite = [&x](size_t t) { return std::isfinite(x[t]); };
  if (chosen < 0 || static_cast<size_t>(chosen) >= v) return out;
  const auto w = static_cast<size_t>(chosen);
  if (params.is_greedy()) {
    for (size_t t = 0; t < v; ++t)
      out[t] = t != w && finite(t) && static_cast<double>(x[w]) - x[t] <= 2 * eps;
    return out;
  }
  const double temp = params.effective_temperature();
  const double e = eps / temp;
  const double ninf = -std::numeric_limits<double>::infinity();
  std::vector<double> y(v), p(v, 0.0);
  double m = ninf;
  for (size_t t = 0; t < v; ++t) {
    y[t] = finite(t) ? static_cast<double>(x[t]) / temp : ninf;
    m = std::max(m, y[t]);
  }
  double z = 0.0;
  for (size_t t = 0; t < v; ++t) z += finite(t) ? std::exp(y[t] - m) : 0.0;
  for (size_t t = 0; t < v; ++t) p[t] = finite(t) ? std::exp(y[t] - m) / z : 0.0;
  std::vector<size_t> order(v);
  for (size_t t = 0; t < v; ++t) order[t] = t;
  std::stable_sort(order.begin(), order.end(), [&y](size_t a, size_t b) { return y[a] > y[b]; });
  std::vector<double> sorted(v);
  for (size_t i = 0; i < v; ++i) sorted[i] = y[order[i]];
  auto count_greater = [&sorted](double c) {  // entries with y > c
    return static_cast<size_t>(
        std::partition_point(sorted.begin(), sorted.end(), [c](double s) { return s > c; }) -
        sorted.begin());
  };
  auto count_at_least = [&sorted](double c) {  // entries with y >= c
    return static_cast<size_t>(
        std::partition_point(sorted.begin(), sorted.end(), [c](double s) { return s >= c; }) -
        sorted.begin());
  };
  const int32_t top_k = std::max(0, params.top_k.value_or(0));
  const bool use_k = top_k > 0 && static_cast<size_t>(top_k) < v;
  std::vector<char> maybe(v, 0), surely(v, 0);
  for (size_t t = 0; t < v; ++t) {
    if (!finite(t)) continue;
    maybe[t] = !use_k || count_greater(y[t] + 2 * e) < static_cast<size_t>(top_k);
    surely[t] = !use_k || count_at_least(y[t] - 2 * e) - 1 < static_cast<size_t>(top_k);
  }
  const double top_p = params.top_p.value_or(1.0f);
  if (top_p < 1.0) {
    // Prefix sums of p over the top_k-kept sets, in descending order of y.
    std::vector<double> sure_mass(v + 1, 0.0), maybe_mass(v + 1, 0.0);
    for (size_t i = 0; i < v; ++i) {
      sure_mass[i + 1] = sure_mass[i] + (surely[order[i]] ? p[order[i]] : 0.0);
      maybe_mass[i + 1] = maybe_mass[i] + (maybe[order[i]] ? p[order[i]] : 0.0);
    }
    const double lo = std::exp(-e), hi = std::exp(e);
    std::vector<char> maybe_p(v, 0), surely_p(v, 0);
    for (size_t t = 0; t < v; ++t) {
      if (!maybe[t]) continue;
      // Kept iff the kept mass strictly above t, over the kept mass, < top_p.
      const size_t above = count_greater(y[t] + 2 * e);  // surely above t
      const double a_lo = lo * sure_mass[above];
      const double b_hi = hi * (maybe_mass[v] - maybe_mass[above]);
      maybe_p[t] = a_lo / (a_lo + b_hi) < top_p;
      const size_t near = count_at_least(y[t] - 2 * e);  // maybe above t (and t)
      const double a_hi = hi * (maybe_mass[near] - p[t]);
      const double b_lo = lo * p[t];
      surely_p[t] = surely[t] && a_hi / (a_hi + b_lo) < top_p;
    }
    for (size_t t = 0; t < v; ++t) {
      maybe[t] = maybe[t] && maybe_p[t];
      surely[t] = surely[t] && surely_p[t];
    }
  }
  std::vector<double> race(v, ninf);
  double best = ninf, second = ninf;
  size_t best_at = v;
  for (size_t t = 0; t < v; ++t) {
    if (!maybe[t]) continue;
    const double u = philox_uniform(seed, step, t);
    race[t] = y[t] - std::log(-std::log(u));
    if (!surely[t]) continue;
    if (race[t] > best) {
      second = best;
      best = race[t];
      best_at = t;
    } else if (race[t] > second) {
      second = race[t];
    }
  }
  for (size_t t = 0; t < v; ++t) {
    const double bound = t == best_at ? second : best;
    out[t] = t != w && maybe[t] && race[t] >= bound - 2 * e;
  }
  return out;
}

// ---- ReferenceCheck ------------------------------------------------------

namespace {

std::string ids_text(std::span<const int32_t> ids) {
  std::ostringstream s;
  s << "[";
  for (size_t i = 0; i < ids.size(); ++i) s << (i ? " " : "") << ids[i];
  s << "]";
  return s.str();
}

// Indices of lp in descending order (NaN last, lower id first on ties).
std::vector<int32_t> descending(std::span<const double> lp) {
  std::vector<int32_t> order(lp.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int32_t>(i);
  auto key = [&lp](int32_t a) {
    const double x = lp[static_cast<size_t>(a)];
    return std::isnan(x) ? -std::numeric_limits<double>::infinity() : x;
  };
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return key(a) > key(b); });
  return order;
}

}  // namespace

ReferenceCheck::ReferenceCheck(ReferenceModel* ref, std::string name)
    : ref_(ref), name_(std::move(name)) {
  if (name_.empty()) {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    if (info) name_ = std::string(info->test_suite_name()) + "." + info->name();
  }
}

ReferenceCheck::~ReferenceCheck() {
  if (!on_cuda()) return;
  std::printf("[   cuda   ] %s:", name_.c_str());
  if (num_compared_ > 0) {
    std::printf(
        " %zu/%zu reference tokens matched (%zu pinned before any near-tie), %zu "
        "divergence(s) at near-ties;",
        num_agreed_, num_compared_, num_pinned_, num_near_tie_divergences_);
  }
  if (num_logprobs_ > 0) {
    std::printf(" %zu logprobs, max |error| %.4f (tolerance %.2f);", num_logprobs_,
                max_logprob_error_, tol::kLogprob);
  }
  if (num_selection_checks_ > 0)
    std::printf(" %zu best_of left-out candidates checked;", num_selection_checks_);
  if (num_beam_hypotheses_ > 0) {
    std::printf(" %zu beam hypotheses, %zu/%zu tokens as in the golden;", num_beam_hypotheses_,
                num_beam_tokens_agreed_, num_beam_tokens_);
  }
  std::printf("\n");
  std::fflush(stdout);
  EXPECT_GE(static_cast<double>(num_agreed_),
            tol::kMinAgreedFraction * static_cast<double>(num_compared_))
      << name_ << ": too few tokens agree with the reference (" << num_agreed_ << " of "
      << num_compared_ << "): the comparison would say little";
}

ReferenceCheck::Comparison ReferenceCheck::compare(
    std::span<const int32_t> got, std::span<const int32_t> want,
    const std::function<bool(size_t, int32_t)>& near_tie, bool report, const std::string& what) {
  size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i]) ++i;
  Comparison c{i, i == got.size() && i == want.size(), false};
  if (c.ok) return c;
  if (!on_cuda()) {
    if (report) {
      EXPECT_EQ(std::vector<int32_t>(got.begin(), got.end()),
                std::vector<int32_t>(want.begin(), want.end()))
          << what;
    }
    return c;
  }
  if (i < got.size() && i < want.size() && near_tie(i, got[i])) {
    c.ok = true;
    c.diverged = true;
    return c;
  }
  if (report) {
    ADD_FAILURE() << what << ": the engine's tokens differ from the reference at position " << i
                  << (i < got.size() && i < want.size()
                          ? " where the reference's choice is not a near-tie with the engine's"
                          : " by their length alone")
                  << " (tolerance " << tol::kLogprob
                  << " per logprob)\n  engine:    " << ids_text(got)
                  << "\n  reference: " << ids_text(want);
  }
  return c;
}

bool ReferenceCheck::near_tie_at(const RefSample& want, size_t step, int32_t token) {
  if (ref_ == nullptr || step >= want.tokens.size()) return false;
  std::vector<int32_t> context = want.prompt;
  context.insert(context.end(), want.tokens.begin(),
                 want.tokens.begin() + static_cast<std::ptrdiff_t>(step));
  const std::vector<float> x = ref_->sampler_input(want, context, step);
  const std::vector<char> ties =
      near_tie_tokens(x, want.params, want.seed, step, tol::kLogprob, want.tokens[step]);
  return token >= 0 && static_cast<size_t>(token) < ties.size() &&
         ties[static_cast<size_t>(token)] != 0;
}

bool ReferenceCheck::follows(std::span<const int32_t> got, const RefSample& want, size_t from,
                             bool report, const std::string& what) {
  auto fail = [&](size_t at, const std::string& why) {
    if (report) {
      ADD_FAILURE() << what << ": after a near-tie at position " << from << ", engine token " << at
                    << " " << why << " (tolerance " << tol::kLogprob
                    << " per logprob)\n  engine:    " << ids_text(got)
                    << "\n  reference: " << ids_text(want.tokens);
    }
    return false;
  };
  auto stops_at = [&](size_t j) {
    return want.stops_on(got[j]) && static_cast<int64_t>(j) + 1 >= want.params.min_tokens;
  };
  if (ref_ == nullptr || from >= got.size()) return fail(from, "cannot be judged");
  if (static_cast<int64_t>(got.size()) > want.max_tokens)
    return fail(got.size(), "exceeds max_tokens");
  std::vector<int32_t> context = want.prompt;
  context.insert(context.end(), got.begin(), got.begin() + static_cast<std::ptrdiff_t>(from) + 1);
  for (size_t j = from + 1; j < got.size(); ++j) {
    if (stops_at(j - 1)) return fail(j, "comes after a stop token");
    const std::vector<float> x = ref_->sampler_input(want, context, j);
    const int32_t pick = ref_->choose(x, want.params, want.seed, j);
    if (got[j] != pick) {
      const std::vector<char> ties =
          near_tie_tokens(x, want.params, want.seed, j, tol::kLogprob, pick);
      if (got[j] < 0 || static_cast<size_t>(got[j]) >= ties.size() ||
          ties[static_cast<size_t>(got[j])] == 0) {
        return fail(j, "is neither the reference's pick on the engine's prefix (" +
                           std::to_string(pick) + ") nor a near-tie of it");
      }
    }
    context.push_back(got[j]);
  }
  if (static_cast<int64_t>(got.size()) < want.max_tokens && !stops_at(got.size() - 1))
    return fail(got.size() - 1, "ends the output early without a stop token");
  return true;
}

void ReferenceCheck::tally(const Comparison& c, size_t num_reference) {
  num_compared_ += num_reference;
  num_agreed_ += std::min(c.agreed, num_reference);
  num_near_tie_divergences_ += c.diverged ? 1 : 0;
}

size_t ReferenceCheck::expect_tokens(std::span<const int32_t> got, const RefSample& want,
                                     const std::string& what) {
  Comparison c = compare(
      got, want.tokens, [&](size_t i, int32_t t) { return near_tie_at(want, i, t); }, true, what);
  if (c.diverged && !follows(got, want, c.agreed, true, what)) c.ok = false;
  tally(c, want.tokens.size());
  num_pinned_ += std::min(want.first_near_tie, want.tokens.size());
  return c.agreed;
}

size_t ReferenceCheck::expect_greedy_tokens(std::span<const int32_t> got,
                                            std::span<const int32_t> want,
                                            const std::vector<std::vector<double>>& rows,
                                            const std::string& what, double ref_tol) {
  auto near_tie = [&](size_t i, int32_t t) {
    if (i >= rows.size() || t < 0 || static_cast<size_t>(t) >= rows[i].size()) return false;
    const std::vector<double>& lp = rows[i];
    double lowest = std::numeric_limits<double>::infinity();
    for (double x : lp)
      if (!std::isnan(x)) lowest = std::min(lowest, x);
    const double lt = std::isnan(lp[static_cast<size_t>(t)]) ? lowest : lp[static_cast<size_t>(t)];
    return lp[static_cast<size_t>(want[i])] - lt <= 2 * (tol::kLogprob + ref_tol);
  };
  const Comparison c = compare(got, want, near_tie, true, what);
  tally(c, want.size());
  return c.agreed;
}

void ReferenceCheck::expect_logprob(const TokenLogprob& got, int32_t token,
                                    std::span<const double> lp, size_t num_top,
                                    const std::string& where, double ref_tol) {
  EXPECT_EQ(got.token_id, token) << where;
  ASSERT_TRUE(token >= 0 && static_cast<size_t>(token) < lp.size()) << where;
  const std::vector<int32_t> order = descending(lp);
  const double want = lp[static_cast<size_t>(token)];
  if (!on_cuda()) {
    if (!std::isnan(want)) {
      EXPECT_NEAR(got.logprob, want, ref_tol) << where;
    }
    EXPECT_EQ(got.rank, rank_of(lp, token)) << where;
    ASSERT_EQ(got.top.size(), num_top) << where;
    for (size_t j = 0; j < num_top; ++j) {
      EXPECT_EQ(got.top[j].token_id, order[j]) << where << " top " << j;
      EXPECT_NEAR(got.top[j].logprob, lp[static_cast<size_t>(order[j])], ref_tol)
          << where << " top " << j;
    }
    return;
  }
  // cuda: every value within `t` of the reference; the rank and the j-th top
  // entry up to near-ties (the j-th largest value moves by at most `t`).
  const double t = tol::kLogprob + ref_tol;
  double lowest = std::numeric_limits<double>::infinity();
  size_t num_unknown = 0;
  for (double x : lp) {
    if (std::isnan(x))
      ++num_unknown;
    else
      lowest = std::min(lowest, x);
  }
  auto note = [this](double err) {
    ++num_logprobs_;
    max_logprob_error_ = std::max(max_logprob_error_, err);
  };
  if (!std::isnan(want)) {
    note(std::abs(got.logprob - want));
    EXPECT_NEAR(got.logprob, want, t) << where;
    int32_t rank_lo = 1, rank_hi = 1;
    for (size_t u = 0; u < lp.size(); ++u) {
      if (std::isnan(lp[u]) || u == static_cast<size_t>(token)) continue;
      rank_lo += lp[u] > want + 2 * t;
      rank_hi += lp[u] >= want - 2 * t;
    }
    if (want - 2 * t <= lowest) rank_hi += static_cast<int32_t>(num_unknown);
    EXPECT_TRUE(got.rank >= rank_lo && got.rank <= rank_hi)
        << where << ": rank " << got.rank << ", the reference allows [" << rank_lo << ", "
        << rank_hi << "] up to near-ties";
  }
  ASSERT_EQ(got.top.size(), num_top) << where;
  for (size_t j = 0; j < num_top; ++j) {
    const TopLogprob& e = got.top[j];
    for (size_t k = 0; k < j; ++k)
      EXPECT_NE(got.top[k].token_id, e.token_id) << where << " top " << j << ": repeated id";
    const double jth = lp[static_cast<size_t>(order[j])];
    if (!std::isnan(jth)) {
      note(std::abs(e.logprob - jth));
      EXPECT_NEAR(e.logprob, jth, t) << where << " top " << j << " (the reference's j-th largest)";
    }
    ASSERT_TRUE(e.token_id >= 0 && static_cast<size_t>(e.token_id) < lp.size())
        << where << " top " << j << ": id " << e.token_id;
    const double own = lp[static_cast<size_t>(e.token_id)];
    if (std::isnan(own)) {
      EXPECT_LE(e.logprob, lowest + t) << where << " top " << j << ": id " << e.token_id
                                       << " is not among the listed reference entries";
    } else {
      note(std::abs(e.logprob - own));
      EXPECT_NEAR(e.logprob, own, t) << where << " top " << j << " id " << e.token_id;
    }
  }
}

void ReferenceCheck::expect_best_of(std::span<const std::vector<int32_t>> got,
                                    std::span<const RefSample> candidates,
                                    const std::string& what) {
  if (!on_cuda()) {
    std::vector<size_t> order(candidates.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return candidates[a].cumulative > candidates[b].cumulative;
    });
    ASSERT_LE(got.size(), candidates.size()) << what;
    for (size_t j = 0; j < got.size(); ++j)
      EXPECT_EQ(got[j], candidates[order[j]].tokens) << what << ": best " << j;
    return;
  }
  ASSERT_NE(ref_, nullptr);
  std::vector<char> used(candidates.size(), 0);
  std::vector<double> cum(got.size()), slack(got.size());
  for (size_t j = 0; j < got.size(); ++j) {
    size_t best_k = candidates.size();
    Comparison best{};
    for (size_t k = 0; k < candidates.size(); ++k) {
      if (used[k]) continue;
      const RefSample& cand = candidates[k];
      Comparison c = compare(
          got[j], cand.tokens, [&](size_t i, int32_t t) { return near_tie_at(cand, i, t); }, false,
          what);
      if (c.diverged && !follows(got[j], cand, c.agreed, false, what)) c.ok = false;
      if (c.ok && (best_k == candidates.size() || c.agreed > best.agreed)) {
        best_k = k;
        best = c;
      }
    }
    if (best_k == candidates.size()) {
      ADD_FAILURE() << what << ": returned sample " << j << " " << ids_text(got[j])
                    << " is none of the reference's samples, even up to near-ties";
      continue;
    }
    used[best_k] = 1;
    tally(best, candidates[best_k].tokens.size());
    num_pinned_ += std::min(candidates[best_k].first_near_tie, candidates[best_k].tokens.size());
    cum[j] = ref_->cumulative_logprob(candidates[best_k].prompt, got[j]);
    slack[j] = static_cast<double>(got[j].size()) * tol::kLogprob;
  }
  // The engine sorted by its own sums, each within slack of the reference's.
  for (size_t j = 0; j + 1 < got.size(); ++j) {
    EXPECT_GE(cum[j] + slack[j], cum[j + 1] - slack[j + 1])
        << what << ": returned samples " << j << " and " << j + 1 << " out of order";
  }
  // A candidate left out that the engine must have drawn exactly scores no
  // higher than the lowest returned one.
  if (got.empty()) return;
  const size_t last = got.size() - 1;
  for (size_t k = 0; k < candidates.size(); ++k) {
    const RefSample& cand = candidates[k];
    if (used[k] || cand.first_near_tie < cand.tokens.size()) continue;
    ++num_selection_checks_;
    EXPECT_LE(cand.cumulative - static_cast<double>(cand.tokens.size()) * tol::kLogprob,
              cum[last] + slack[last])
        << what << ": candidate " << k << " (cumulative " << cand.cumulative
        << ") beats a returned sample (" << cum[last] << ")";
  }
}

void ReferenceCheck::expect_beams(std::span<const int32_t> prompt,
                                  const std::vector<std::vector<int32_t>>& got,
                                  const std::vector<std::vector<int32_t>>& want, int32_t beam_width,
                                  double length_penalty, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  if (!on_cuda()) {
    for (size_t k = 0; k < got.size(); ++k)
      EXPECT_EQ(got[k], want[k]) << what << " hypothesis " << k;
    return;
  }
  ASSERT_NE(ref_, nullptr);
  const auto v = static_cast<size_t>(ref_->vocab_size());
  std::vector<double> score(got.size()), slack(got.size());
  for (size_t k = 0; k < got.size(); ++k) {
    const std::vector<int32_t>& h = got[k];
    const std::string where = what + " hypothesis " + std::to_string(k) + " " + ids_text(h);
    size_t same = 0;
    while (same < h.size() && same < want[k].size() && h[same] == want[k][same]) ++same;
    num_beam_tokens_ += want[k].size();
    num_beam_tokens_agreed_ += same;
    ASSERT_FALSE(h.empty()) << where;
    for (size_t j = 0; j < k; ++j) EXPECT_NE(got[j], h) << where << ": repeats hypothesis " << j;
    std::vector<int32_t> all(prompt.begin(), prompt.end());
    all.insert(all.end(), h.begin(), h.end());
    const std::vector<float> rows = ref_->logits(all);
    ASSERT_EQ(rows.size(), all.size() * v) << where;
    double sum = 0.0;
    for (size_t i = 0; i < h.size(); ++i) {
      const std::vector<double> lp =
          log_softmax(std::span<const float>(rows.data() + (prompt.size() - 1 + i) * v, v));
      const double lt = lp[static_cast<size_t>(h[i])];
      sum += lt;
      // Beam search extends each beam only by its top 2 * beam_width tokens.
      int32_t rank_lo = 1;
      for (double x : lp) rank_lo += x > lt + tol::kNearTie;
      EXPECT_LE(rank_lo, 2 * beam_width)
          << where << ": token " << i << " is not among its beam's top " << 2 * beam_width
          << " even up to near-ties";
    }
    const double norm = std::pow(static_cast<double>(h.size()), length_penalty);
    score[k] = sum / norm;
    slack[k] = static_cast<double>(h.size()) * tol::kLogprob / norm;
    ++num_beam_hypotheses_;
  }
  // Best first by the engine's scores, each within slack of the reference's.
  for (size_t k = 0; k + 1 < got.size(); ++k) {
    EXPECT_GE(score[k] + slack[k], score[k + 1] - slack[k + 1])
        << what << ": hypotheses " << k << " and " << k + 1 << " out of order (reference scores "
        << score[k] << ", " << score[k + 1] << ")";
  }
}

}  // namespace pagoda::test
