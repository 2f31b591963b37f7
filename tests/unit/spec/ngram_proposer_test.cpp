#include "spec/ngram_proposer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>

namespace pagoda {
namespace {

using Tokens = std::vector<int32_t>;

SpeculativeConfig ngram_config(int32_t min_n, int32_t max_n) {
  SpeculativeConfig c;
  c.method = SpecMethod::kNgram;
  c.num_speculative_tokens = 4;
  c.prompt_lookup_min = min_n;
  c.prompt_lookup_max = max_n;
  return c;
}

// One propose() call for one sequence.
Tokens propose_one(NgramProposer& p, int64_t seq, const Tokens& tokens, int32_t max_draft) {
  DraftInput in{seq, tokens, static_cast<int32_t>(tokens.size()), max_draft};
  std::vector<std::vector<int32_t>> drafts;
  EXPECT_TRUE(p.propose(std::span<const DraftInput>(&in, 1), drafts).ok());
  EXPECT_EQ(drafts.size(), 1u);
  return drafts.empty() ? Tokens{} : drafts[0];
}

// vLLM's docstring example: [1,2,3,4,2,3], min 2, max 3, k 4: [4,2,3] has no
// earlier match, [2,3] matches at the start, and only 3 tokens follow it.
TEST(NgramProposer, VllmDocExampleCapsAtSequenceEnd) {
  NgramProposer p(ngram_config(2, 3));
  EXPECT_EQ(propose_one(p, 1, {1, 2, 3, 4, 2, 3}, 4), (Tokens{4, 2, 3}));
}

// The expectations of vLLM's own ngram tests (tests/v1/spec_decode/test_ngram.py).
TEST(NgramProposer, AgreesWithVllmsTestCases) {
  struct Case {
    Tokens tokens;
    int32_t min_n, max_n, k;
    Tokens want;
  };
  const std::vector<Case> cases = {
      {{1, 2, 3, 4, 1, 2, 3, 5, 6}, 2, 2, 2, {}},
      {{1, 2, 3, 4, 1, 2, 3}, 2, 2, 3, {4, 1, 2}},
      {{1, 2, 3, 4, 1, 2, 3}, 2, 2, 2, {4, 1}},
      {{1, 2, 3, 4, 1, 2, 3}, 1, 1, 3, {4, 1, 2}},
      {{1, 2, 3, 4, 1, 2, 3}, 1, 1, 2, {4, 1}},
      {{1, 3, 6, 2, 3, 4, 1, 2, 3}, 2, 2, 3, {4, 1, 2}},
      {{1, 3, 6, 2, 3, 4, 1, 2, 3}, 1, 1, 2, {6, 2}},
      {{1, 2, 3, 4, 5}, 2, 2, 2, {}},
      {{1, 2, 3, 4, 1, 2, 3}, 4, 4, 2, {}},
      {{1, 2, 3, 4, 1, 2, 3}, 3, 4, 2, {4, 1}},
      {{2, 3, 4, 5, 1, 2, 3, 4, 1, 2, 3, 4}, 3, 4, 2, {1, 2}},
      {{3, 4, 5, 2, 3, 4, 1, 2, 3, 4}, 2, 4, 2, {1, 2}},
      {{1, 2, 3, 100, 1, 2, 3, 200, 1, 2, 3, 300, 1, 2, 3}, 3, 3, 2, {100, 1}},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    NgramProposer p(ngram_config(c.min_n, c.max_n));
    EXPECT_EQ(propose_one(p, 1, c.tokens, c.k), c.want) << "case " << i;
    EXPECT_EQ(ngram_draft_reference(c.tokens, c.min_n, c.max_n, c.k), c.want) << "case " << i;
  }
}

TEST(NgramProposer, TakesTheEarliestOccurrenceOfTheLongestMatch) {
  NgramProposer p(ngram_config(1, 3));
  // [5,6] occurs at 0 (then 7) and at 3 (then 8); the earliest wins.
  EXPECT_EQ(propose_one(p, 1, {5, 6, 7, 5, 6, 8, 9, 5, 6}, 2), (Tokens{7, 5}));
  // [9,5,6] (n = 3) beats the earlier [5,6] (n = 2).
  NgramProposer q(ngram_config(1, 3));
  EXPECT_EQ(propose_one(q, 2, {5, 6, 7, 9, 5, 6, 8, 1, 9, 5, 6}, 2), (Tokens{8, 1}));
}

TEST(NgramProposer, MaxNLimitsTheMatchAndMinNRefusesShortOnes) {
  // Suffix [1,2,3]: with max_n = 2 only [2,3] is matched, whose earliest
  // occurrence (position 0) is not the one [1,2,3] matches (position 4).
  const Tokens t = {2, 3, 7, 1, 2, 3, 8, 1, 2, 3};
  NgramProposer two(ngram_config(1, 2));
  EXPECT_EQ(propose_one(two, 1, t, 1), (Tokens{7}));
  NgramProposer three(ngram_config(1, 3));
  EXPECT_EQ(propose_one(three, 1, t, 1), (Tokens{8}));
  // Only a 1-gram matches [.., 4, 9]: min_n = 2 drafts nothing.
  NgramProposer min2(ngram_config(2, 3));
  EXPECT_TRUE(propose_one(min2, 1, {9, 5, 4, 9}, 3).empty());
  NgramProposer min1(ngram_config(1, 3));
  EXPECT_EQ(propose_one(min1, 1, {9, 5, 4, 9}, 3), (Tokens{5, 4, 9}));
}

TEST(NgramProposer, NoMatchNoDraft) {
  NgramProposer p(ngram_config(1, 5));
  EXPECT_TRUE(propose_one(p, 1, {1, 2, 3, 4, 5}, 4).empty());
  EXPECT_TRUE(propose_one(p, 2, {7}, 4).empty());
}

TEST(NgramProposer, MaxDraftCapsTheContinuation) {
  NgramProposer p(ngram_config(2, 2));
  const Tokens t = {1, 2, 3, 4, 5, 6, 7, 1, 2};
  EXPECT_EQ(propose_one(p, 1, t, 1), (Tokens{3}));
  EXPECT_EQ(propose_one(p, 1, t, 3), (Tokens{3, 4, 5}));
  EXPECT_EQ(propose_one(p, 1, t, 10), (Tokens{3, 4, 5, 6, 7, 1, 2}));
}

TEST(NgramProposer, OverlappingMatchInARun) {
  // [7,7,7,7]: the last 3 tokens match at 0, followed by the final 7.
  NgramProposer p(ngram_config(1, 3));
  EXPECT_EQ(propose_one(p, 1, {7, 7, 7, 7}, 4), (Tokens{7}));
}

// Grows sequences token by token (the index is incremental) in a batch and
// compares every step with the brute-force rule.
TEST(NgramProposer, MatchesBruteForceOnRandomSequences) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    const int32_t min_n = 1 + static_cast<int32_t>(rng() % 3);
    const int32_t max_n = min_n + static_cast<int32_t>(rng() % 4);
    const int32_t vocab = 2 + static_cast<int32_t>(rng() % 4);
    NgramProposer p(ngram_config(min_n, max_n));
    std::vector<Tokens> seqs(3);
    for (int step = 0; step < 120; ++step) {
      std::vector<DraftInput> inputs;
      for (size_t s = 0; s < seqs.size(); ++s) {
        const int grow = 1 + static_cast<int>(rng() % 3);
        for (int g = 0; g < grow; ++g) seqs[s].push_back(static_cast<int32_t>(rng() % vocab));
        inputs.push_back(
            {static_cast<int64_t>(s), seqs[s], 2, 1 + static_cast<int32_t>(rng() % 6)});
      }
      std::vector<std::vector<int32_t>> drafts;
      ASSERT_TRUE(p.propose(inputs, drafts).ok());
      for (size_t s = 0; s < seqs.size(); ++s) {
        ASSERT_EQ(drafts[s], ngram_draft_reference(seqs[s], min_n, max_n, inputs[s].max_draft))
            << "trial " << trial << " step " << step << " seq " << s;
      }
    }
  }
}

// A 3-gram ending at the next token needs the last 2 tokens earlier.
TEST(NgramProposer, MayDraftAfterNextTokenNeedsTheLastMinNMinusOneTokensEarlier) {
  NgramProposer p(ngram_config(3, 3));
  auto may = [&p](int64_t seq, const Tokens& t) {
    return p.may_draft_after_next_token({seq, t, 1, 4});
  };
  EXPECT_TRUE(may(1, {7, 8, 9, 7, 8}));   // [7, 8] at the start: a 9 next drafts
  EXPECT_FALSE(may(2, {7, 8, 9, 8}));     // [9, 8] never occurred before
  EXPECT_TRUE(may(3, {7, 8, 7, 8}));      // [7, 8, 7] earlier: a 7 next drafts
  EXPECT_FALSE(may(5, {7, 7}));           // [7, 7] only as the last tokens themselves
  EXPECT_FALSE(may(4, {}));
  NgramProposer unigram(ngram_config(1, 2));
  EXPECT_TRUE(unigram.may_draft_after_next_token({5, Tokens{3}, 1, 4}));  // a 3 next
}

// Sequences grown token by token, asked in turn whether a draft may follow
// the next token and for their drafts (one index serves both): equal to
// trying every token of the vocabulary with the brute-force rule.
TEST(NgramProposer, MayDraftAfterNextTokenMatchesBruteForceOnRandomSequences) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    const int32_t min_n = 1 + static_cast<int32_t>(rng() % 4);
    const int32_t max_n = min_n + static_cast<int32_t>(rng() % 3);
    const int32_t vocab = 2 + static_cast<int32_t>(rng() % 5);
    NgramProposer p(ngram_config(min_n, max_n));
    Tokens seq;
    int num_true = 0;
    for (int step = 0; step < 80; ++step) {
      seq.push_back(static_cast<int32_t>(rng() % vocab));
      const bool may = p.may_draft_after_next_token({0, seq, 1, 4});
      ASSERT_EQ(may, ngram_may_draft_reference(seq, min_n, max_n, vocab))
          << "trial " << trial << " step " << step;
      num_true += may;
      if (step % 3 == 0) {
        ASSERT_EQ(propose_one(p, 0, seq, 3), ngram_draft_reference(seq, min_n, max_n, 3));
      }
    }
    EXPECT_GT(num_true, 0) << "trial " << trial;
  }
}

TEST(NgramProposer, SequenceEndDropsItsIndex) {
  NgramProposer p(ngram_config(1, 2));
  const Tokens t = {1, 2, 1};
  EXPECT_EQ(propose_one(p, 4, t, 1), (Tokens{2}));
  EXPECT_EQ(p.num_indexed_sequences(), 1u);
  p.on_sequence_end(4, t, 1);
  EXPECT_EQ(p.num_indexed_sequences(), 0u);
}

// 64 sequences of 4k tokens, then 64 decode steps of one token each: the
// steps must cost O(new tokens * max_n): an O(length * max_n^2) search (some
// 16M comparisons per step here) takes well over the bound, while the
// incremental index needs some 50x less than it.
TEST(NgramProposer, DecodeStepsStayCheapOnLongSequences) {
  std::mt19937 rng(3);
  NgramProposer p(ngram_config(2, 8));
  std::vector<Tokens> seqs(64);
  for (Tokens& s : seqs) {
    for (int i = 0; i < 4096; ++i) s.push_back(static_cast<int32_t>(rng() % 32000));
  }
  std::vector<std::vector<int32_t>> drafts;
  auto step = [&] {
    std::vector<DraftInput> inputs;
    for (size_t s = 0; s < seqs.size(); ++s) {
      inputs.push_back({static_cast<int64_t>(s), seqs[s], 4096, 4});
    }
    ASSERT_TRUE(p.propose(inputs, drafts).ok());
  };
  step();  // indexes the prompts
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 64; ++i) {
    for (Tokens& s : seqs) s.push_back(static_cast<int32_t>(rng() % 32000));
    step();
  }
  const double ms_per_step =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 64;
  EXPECT_LT(ms_per_step, 2.0);
}

}  // namespace
}  // namespace pagoda
