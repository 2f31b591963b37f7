// BeamSearch against (1) Hugging Face transformers' results on a toy model
// (tests/data/sample/beam_search_hf.json, see make_beam_golden.py) and
// (2) brute-force enumeration of every sequence over a tiny vocabulary,
// which beam search must reproduce exactly when the beam is wide enough to
// keep everything and early stopping is "never" (an exact bound).
#include "sample/beam_search.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

namespace pagoda {
namespace {

using Ids = std::vector<int32_t>;
using LogprobFn = std::function<std::vector<float>(const Ids& prefix)>;

// Runs a search to the end, serving each live beam its top
// num_candidates_per_beam() tokens (lower id first on ties), like the engine.
std::vector<BeamHypothesis> run_search(BeamSearch& search, const LogprobFn& model) {
  for (int guard = 0; guard < 1000 && !search.done(); ++guard) {
    std::vector<std::vector<BeamCandidate>> cands;
    for (const Beam& beam : search.beams()) {
      std::vector<float> lp = model(beam.tokens);
      if (lp.empty()) return {};
      std::vector<BeamCandidate> c;
      for (size_t t = 0; t < lp.size(); ++t) c.push_back({static_cast<int32_t>(t), lp[t]});
      std::stable_sort(c.begin(), c.end(), [](auto& a, auto& b) { return a.logprob > b.logprob; });
      if (static_cast<int32_t>(c.size()) > search.num_candidates_per_beam())
        c.resize(search.num_candidates_per_beam());
      cands.push_back(std::move(c));
    }
    std::vector<BeamChoice> choices = search.step(cands);
    EXPECT_EQ(choices.size(), search.beams().size());
    for (size_t i = 0; i < choices.size(); ++i)
      EXPECT_EQ(search.beams()[i].tokens.back(), choices[i].token);
  }
  EXPECT_TRUE(search.done());
  return search.results();
}

EarlyStopping parse_early_stopping(const nlohmann::json& v) {
  if (v.is_string()) return EarlyStopping::kNever;
  return v.get<bool>() ? EarlyStopping::kTrue : EarlyStopping::kFalse;
}

TEST(BeamSearch, MatchesTransformersOnToyModel) {
  std::ifstream in(std::string(PAGODA_SOURCE_DIR) + "/tests/data/sample/beam_search_hf.json");
  ASSERT_TRUE(in.good()) << "missing tests/data/sample/beam_search_hf.json";
  nlohmann::json golden = nlohmann::json::parse(in);
  int case_index = 0;
  for (const nlohmann::json& c : golden["cases"]) {
    SCOPED_TRACE(::testing::Message()
                 << "case " << case_index++ << " width " << c["beam_width"] << " early_stopping "
                 << c["early_stopping"] << " length_penalty " << c["length_penalty"]);
    std::map<Ids, std::vector<float>> rows;
    for (const auto& r : c["rows"])
      rows[r["prefix"].get<Ids>()] = r["logprobs"].get<std::vector<float>>();
    BeamSearchConfig config;
    config.beam_width = c["beam_width"];
    config.num_return = c["num_return"];
    config.length_penalty = c["length_penalty"];
    config.early_stopping = parse_early_stopping(c["early_stopping"]);
    config.max_new_tokens = c["max_new_tokens"];
    config.eos_token_ids = c["eos_token_ids"].get<Ids>();
    BeamSearch search(config);
    auto model = [&](const Ids& prefix) {
      auto it = rows.find(prefix);
      EXPECT_NE(it, rows.end()) << "beam left the transformers search tree";
      return it == rows.end() ? std::vector<float>{} : it->second;
    };
    std::vector<BeamHypothesis> got = run_search(search, model);
    const auto& want = c["expected"];
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].tokens, want[i]["tokens"].get<Ids>()) << "hypothesis " << i;
      EXPECT_NEAR(got[i].score, want[i]["score"].get<double>(), 1e-5) << "hypothesis " << i;
    }
  }
  EXPECT_GE(case_index, 10);
}

// A fixed toy model: log-softmax of pseudo-random logits of the prefix.
std::vector<float> toy_logprobs(const Ids& prefix, int32_t vocab) {
  uint64_t h = 0x243F6A8885A308D3ull;
  for (int32_t t : prefix) h = (h ^ static_cast<uint64_t>(t + 1)) * 0x100000001B3ull;
  std::vector<double> logits(vocab);
  double m = -1e30;
  for (int32_t t = 0; t < vocab; ++t) {
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 29;
    logits[t] = static_cast<double>(h % 10007) / 10007.0 * 4.0;
    m = std::max(m, logits[t]);
  }
  double sum = 0;
  for (double x : logits) sum += std::exp(x - m);
  std::vector<float> lp(vocab);
  for (int32_t t = 0; t < vocab; ++t) lp[t] = static_cast<float>(logits[t] - m - std::log(sum));
  return lp;
}

struct Scored {
  Ids tokens;
  double score;
};

// Every sequence a search can return: ended by EOS at any length, or cut at
// max_len. Scored like HF: sum of logprobs / length^length_penalty.
void enumerate(const Ids& prefix, double sum, int32_t vocab, int32_t eos, int32_t max_len, float lp,
               std::vector<Scored>& out) {
  std::vector<float> next = toy_logprobs(prefix, vocab);
  for (int32_t t = 0; t < vocab; ++t) {
    Ids seq = prefix;
    seq.push_back(t);
    // Sum in float like the search (cumulative float adds).
    float s = static_cast<float>(sum) + next[t];
    if (t == eos || static_cast<int32_t>(seq.size()) == max_len) {
      out.push_back({seq, s / std::pow(static_cast<double>(seq.size()), static_cast<double>(lp))});
    } else {
      enumerate(seq, s, vocab, eos, max_len, lp, out);
    }
  }
}

TEST(BeamSearch, WideBeamWithNeverStoppingEqualsBruteForce) {
  const int32_t vocab = 3, eos = 2, max_len = 4;
  for (float lp : {1.0f, 0.0f, 2.0f, -0.5f}) {
    SCOPED_TRACE(::testing::Message() << "length_penalty " << lp);
    std::vector<Scored> all;
    enumerate({}, 0.0, vocab, eos, max_len, lp, all);
    std::stable_sort(all.begin(), all.end(),
                     [](const Scored& a, const Scored& b) { return a.score > b.score; });
    // Wide enough that every continuation is kept at every step: at most
    // 2^3 live beams x 3 tokens = 24 continuations, all within the top width.
    BeamSearchConfig config;
    config.beam_width = 24;
    config.num_return = 5;
    config.length_penalty = lp;
    config.early_stopping = EarlyStopping::kNever;
    config.max_new_tokens = max_len;
    config.eos_token_ids = {eos};
    BeamSearch search(config);
    std::vector<BeamHypothesis> got =
        run_search(search, [&](const Ids& prefix) { return toy_logprobs(prefix, vocab); });
    ASSERT_EQ(got.size(), 5u);
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].tokens, all[i].tokens) << "rank " << i;
      EXPECT_NEAR(got[i].score, all[i].score, 1e-5) << "rank " << i;
    }
  }
}

// With a narrow beam the result is the brute-force best only when the toy
// model makes greedy choices optimal; here we check the structural
// contract instead: hypotheses are sorted, scored by the formula, end in
// EOS or at max length, and early_stopping=true stops no later than false.
TEST(BeamSearch, NarrowBeamContracts) {
  const int32_t vocab = 6, eos = 0, max_len = 7;
  auto model = [&](const Ids& prefix) { return toy_logprobs(prefix, vocab); };
  int32_t steps[2] = {0, 0};
  for (EarlyStopping es : {EarlyStopping::kTrue, EarlyStopping::kFalse}) {
    BeamSearchConfig config{.beam_width = 2,
                            .num_return = 2,
                            .length_penalty = 1.0f,
                            .early_stopping = es,
                            .max_new_tokens = max_len,
                            .eos_token_ids = {eos}};
    BeamSearch search(config);
    int32_t n = 0;
    std::vector<BeamHypothesis> got;
    while (!search.done()) {
      std::vector<std::vector<BeamCandidate>> cands;
      for (const Beam& b : search.beams()) {
        std::vector<float> lp = model(b.tokens);
        std::vector<BeamCandidate> c;
        for (int32_t t = 0; t < vocab; ++t) c.push_back({t, lp[t]});
        cands.push_back(c);
      }
      search.step(cands);
      ++n;
    }
    steps[es == EarlyStopping::kTrue ? 0 : 1] = n;
    got = search.results();
    ASSERT_FALSE(got.empty());
    for (size_t i = 0; i < got.size(); ++i) {
      const BeamHypothesis& h = got[i];
      if (i > 0) {
        EXPECT_GE(got[i - 1].score, h.score);
      }
      EXPECT_TRUE(h.tokens.back() == eos || static_cast<int32_t>(h.tokens.size()) == max_len);
      EXPECT_EQ(std::count(h.tokens.begin(), h.tokens.end() - 1, eos), 0);
      double sum = 0;
      Ids prefix;
      for (int32_t t : h.tokens) {
        sum += model(prefix)[t];
        prefix.push_back(t);
      }
      EXPECT_NEAR(h.sum_logprobs, sum, 1e-5);
      EXPECT_NEAR(h.score, h.sum_logprobs / h.tokens.size(), 1e-6);
    }
  }
  EXPECT_LE(steps[0], steps[1]);
}

TEST(BeamSearch, CandidatesPerBeamFollowTheEosCount) {
  BeamSearchConfig config;
  config.beam_width = 3;
  config.eos_token_ids = {1};
  EXPECT_EQ(BeamSearch(config).num_candidates_per_beam(), 6);
  config.eos_token_ids = {1, 2, 3};
  EXPECT_EQ(BeamSearch(config).num_candidates_per_beam(), 12);
  EXPECT_EQ(BeamSearch(config).beams().size(), 1u);
}

}  // namespace
}  // namespace pagoda
