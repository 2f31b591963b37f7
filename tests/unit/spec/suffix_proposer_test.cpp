#include "spec/suffix_proposer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <random>

namespace pagoda {
namespace {

using Tokens = std::vector<int32_t>;

SpeculativeConfig suffix_config(int32_t depth, int32_t cached) {
  SpeculativeConfig c;
  c.method = SpecMethod::kSuffix;
  c.num_speculative_tokens = depth;
  c.suffix_max_tree_depth = depth;
  c.suffix_max_cached_requests = cached;
  return c;
}

Tokens propose_one(SuffixProposer& p, int64_t seq, const Tokens& tokens, int32_t num_prompt,
                   int32_t max_draft) {
  DraftInput in{seq, tokens, num_prompt, max_draft};
  std::vector<std::vector<int32_t>> drafts;
  EXPECT_TRUE(p.propose(std::span<const DraftInput>(&in, 1), drafts).ok());
  return drafts.empty() ? Tokens{} : drafts[0];
}

TEST(SuffixProposer, CopiesARepetitionInThePrompt) {
  SuffixProposer p(suffix_config(24, 0));
  // The output started repeating the prompt's first line.
  const Tokens t = {10, 11, 12, 13, 14, 15, 1, 2, 10, 11, 12};
  EXPECT_EQ(propose_one(p, 1, t, 8, 3), (Tokens{13, 14, 15}));
  // A larger max_draft changes nothing: match length 3 allows 3 (factor 1).
  EXPECT_EQ(propose_one(p, 1, t, 8, 8), (Tokens{13, 14, 15}));
}

TEST(SuffixProposer, LearnsAPatternFromAnEndedSequence) {
  SuffixProposer p(suffix_config(24, 4));
  const Tokens first = {1, 2, 3, 40, 41, 42, 43, 44, 45};  // prompt 3, output 6
  EXPECT_TRUE(propose_one(p, 1, first, 3, 4).empty());
  p.on_sequence_end(1, first, 3);
  EXPECT_EQ(p.num_sequence_trees(), 0u);
  // Another request writing 40, 41, 42 continues as the first one's output.
  const Tokens second = {7, 8, 40, 41, 42};
  EXPECT_EQ(propose_one(p, 2, second, 2, 3), (Tokens{43, 44, 45}));
  // Only outputs are cached: the first prompt [1,2,3] teaches nothing.
  const Tokens third = {9, 1, 2};
  EXPECT_TRUE(propose_one(p, 3, third, 3, 3).empty());
}

TEST(SuffixProposer, NoGlobalTreeWhenCachingIsOff) {
  SuffixProposer p(suffix_config(24, 0));
  const Tokens first = {1, 40, 41, 42, 43};
  EXPECT_TRUE(propose_one(p, 1, first, 1, 4).empty());
  p.on_sequence_end(1, first, 1);
  EXPECT_EQ(p.global_tree().num_nodes(), 1u);
  EXPECT_TRUE(propose_one(p, 2, {7, 40, 41, 42}, 1, 3).empty());
}

TEST(SuffixProposer, EvictionKeepsTheGlobalTreeBounded) {
  std::mt19937 rng(1);
  SuffixProposer p(suffix_config(8, 3));
  std::vector<Tokens> ended;
  for (int64_t id = 0; id < 50; ++id) {
    Tokens t(40);
    for (int32_t& x : t) x = static_cast<int32_t>(rng() % 1000000);
    EXPECT_TRUE(propose_one(p, id, t, 10, 4).size() <= 4u);
    p.on_sequence_end(id, t, 10);
    ended.push_back(t);
    // Only the last 3 outputs (30 tokens each) are held.
    const size_t held = std::min<size_t>(ended.size(), 3);
    EXPECT_EQ(p.global_tree().count({}), static_cast<int64_t>(held * 30));
    EXPECT_LE(p.global_tree().num_nodes(), 1 + 2 * held * 30);
    EXPECT_FALSE(p.global_tree().contains(id - 3));
  }
  // The newest output still drafts; the evicted ones do not.
  const Tokens& last = ended.back();
  const Tokens probe_new = {last[20], last[21], last[22]};
  EXPECT_EQ(propose_one(p, 100, probe_new, 0, 2), (Tokens{last[23], last[24]}));
  const Tokens& old = ended.front();
  EXPECT_TRUE(propose_one(p, 101, {old[20], old[21], old[22]}, 0, 2).empty());
}

TEST(SuffixProposer, GlobalDraftWinsOnlyWithAHigherScore) {
  SuffixProposer p(suffix_config(24, 4));
  // Ended outputs: after [5,6] came 7,8 three times.
  const Tokens done = {0, 5, 6, 7, 8, 5, 6, 7, 8, 5, 6, 7, 8};
  p.on_sequence_end(1, done, 1);
  // This request's own text says [5,6] -> 9, 3 once (and ends once): its
  // draft scores 1/2 + 1/2; the global tree's [5,6] -> 7, 8 scores 2.
  const Tokens t = {5, 6, 9, 3, 5, 6};
  EXPECT_EQ(propose_one(p, 2, t, 6, 2), (Tokens{7, 8}));
}

TEST(SuffixProposer, ExtendsItsTreeOnlyByNewTokens) {
  // After [1,2,3,4] then [1,2,3,4,1,2], [1,2] occurs twice and is followed
  // by 3 once: probability 1/2. Inserting the old tokens again would make
  // it 2/3 and pass a 0.6 threshold.
  for (const double min_prob : {0.5, 0.6}) {
    SpeculativeConfig c = suffix_config(24, 0);
    c.suffix_min_token_prob = min_prob;
    SuffixProposer p(c);
    EXPECT_TRUE(propose_one(p, 1, {1, 2, 3, 4}, 4, 4).empty());
    const Tokens draft = propose_one(p, 1, {1, 2, 3, 4, 1, 2}, 4, 2);
    EXPECT_EQ(draft, min_prob == 0.5 ? (Tokens{3, 4}) : Tokens{}) << min_prob;
  }
}

// 64 sequences whose 4k-token prompts repeat themselves (every suffix
// matches deep in the sequence's own tree), then decode steps of one token:
// a step costs O(max_depth^2) per sequence whatever its length (about 1 ms
// per step here in Release); rebuilding or rescanning a sequence per step
// would take 10x the bound.
TEST(SuffixProposer, DecodeStepsStayCheapOnLongSequences) {
  std::mt19937 rng(3);
  SuffixProposer p(suffix_config(24, 100));
  std::vector<Tokens> seqs(64);
  for (Tokens& s : seqs) {
    for (int i = 0; i < 2048; ++i) s.push_back(static_cast<int32_t>(rng() % 32000));
    s.insert(s.end(), s.begin(), s.end());
  }
  std::vector<std::vector<int32_t>> drafts;
  auto step = [&] {
    std::vector<DraftInput> inputs;
    for (size_t s = 0; s < seqs.size(); ++s) {
      inputs.push_back({static_cast<int64_t>(s), seqs[s], 4096, 8});
    }
    ASSERT_TRUE(p.propose(inputs, drafts).ok());
  };
  step();  // builds the trees
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 64; ++i) {
    for (size_t s = 0; s < seqs.size(); ++s) {
      // Follow the draft's first token, as a fully accepting target would.
      seqs[s].push_back(drafts[s].empty() ? 0 : drafts[s][0]);
    }
    step();
  }
  const double ms_per_step =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / 64;
  std::printf("suffix propose: %.3f ms per step of 64 sequences\n", ms_per_step);
  for (const auto& d : drafts) EXPECT_EQ(d.size(), 8u);
  EXPECT_LT(ms_per_step, 10.0);
}

}  // namespace
}  // namespace pagoda
