#include "spec/suffix_tree.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

namespace pagoda {
namespace {

using Tokens = std::vector<int32_t>;

// Occurrences of every substring of length <= max_depth over seqs.
std::map<Tokens, int64_t> substring_counts(const std::vector<Tokens>& seqs, int32_t max_depth) {
  std::map<Tokens, int64_t> counts;
  for (const Tokens& s : seqs) {
    for (size_t i = 0; i < s.size(); ++i) {
      for (size_t n = 1; n <= static_cast<size_t>(max_depth) && i + n <= s.size(); ++n) {
        counts[Tokens(s.begin() + static_cast<std::ptrdiff_t>(i),
                      s.begin() + static_cast<std::ptrdiff_t>(i + n))] += 1;
      }
    }
  }
  return counts;
}

// Every held substring has its count, nothing else is a path, and the
// compressed tree holds at most two nodes per held token plus the root.
void expect_counts(const SuffixTree& tree, const std::vector<Tokens>& seqs, int32_t vocab) {
  const auto counts = substring_counts(seqs, tree.max_depth());
  int64_t total = 0;
  for (const Tokens& s : seqs) total += static_cast<int64_t>(s.size());
  EXPECT_EQ(tree.count({}), total);
  for (const auto& [path, n] : counts) {
    ASSERT_EQ(tree.count(path), n);
    // One token more that occurs nowhere.
    if (static_cast<int32_t>(path.size()) < tree.max_depth()) {
      for (int32_t t = 0; t < vocab; ++t) {
        Tokens longer = path;
        longer.push_back(t);
        if (!counts.count(longer)) {
          ASSERT_EQ(tree.count(longer), 0);
        }
      }
    }
  }
  EXPECT_LE(tree.num_nodes(), static_cast<size_t>(2 * total + 1));
}

// SuffixTree::speculate's rule evaluated on the substring counts.
SuffixDraft reference_speculate(const std::map<Tokens, int64_t>& counts, int32_t max_depth,
                                int32_t vocab, const Tokens& context, int32_t max_tokens,
                                double factor, double min_prob) {
  auto count = [&](const Tokens& p) {
    auto it = counts.find(p);
    return it == counts.end() ? int64_t{0} : it->second;
  };
  SuffixDraft best;
  const int64_t longest = std::min<int64_t>(static_cast<int64_t>(context.size()), max_depth) - 1;
  for (int64_t m = 1; m <= longest; ++m) {
    Tokens path(context.end() - m, context.end());
    if (count(path) == 0) break;
    SuffixDraft d;
    d.match_len = static_cast<int32_t>(m);
    const int64_t cap = std::min<int64_t>(max_tokens, static_cast<int64_t>(m * factor + 1e-6));
    double prob = 1;
    while (static_cast<int64_t>(d.tokens.size()) < cap &&
           static_cast<int32_t>(path.size()) < max_depth) {
      int32_t pick = -1;
      int64_t pick_count = 0;
      for (int32_t t = 0; t < vocab; ++t) {
        Tokens next = path;
        next.push_back(t);
        if (count(next) > pick_count) pick = t, pick_count = count(next);
      }
      if (pick < 0) break;
      prob *= static_cast<double>(pick_count) / static_cast<double>(count(path));
      if (prob < min_prob) break;
      path.push_back(pick);
      d.tokens.push_back(pick);
      d.score += prob;
    }
    if (d.score >= best.score) best = d;
  }
  return best;
}

TEST(SuffixTree, CountsMatchBruteForceThroughInsertsAndRemovals) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 40; ++trial) {
    const int32_t depth = 1 + static_cast<int32_t>(rng() % 8);
    const int32_t vocab = 2 + static_cast<int32_t>(rng() % 3);
    SuffixTree tree(depth);
    std::map<int64_t, Tokens> held;
    int64_t next_id = 0;
    for (int op = 0; op < 80; ++op) {
      const uint32_t r = rng() % 4;
      if (r == 0 && !held.empty()) {
        auto it = held.begin();
        std::advance(it, rng() % held.size());
        tree.remove(it->first);
        held.erase(it);
      } else {
        // Grow a random held sequence or start one, by a few tokens.
        int64_t id = next_id;
        if (r == 1 || held.empty()) {
          ++next_id;
        } else {
          auto it = held.begin();
          std::advance(it, rng() % held.size());
          id = it->first;
        }
        Tokens add(1 + rng() % 5);
        for (int32_t& t : add) t = static_cast<int32_t>(rng() % vocab);
        tree.extend(id, add);
        held[id].insert(held[id].end(), add.begin(), add.end());
      }
      std::vector<Tokens> seqs;
      for (const auto& [id, s] : held) seqs.push_back(s);
      expect_counts(tree, seqs, vocab);
      if (HasFatalFailure()) return;
      const auto counts = substring_counts(seqs, depth);
      for (int probe = 0; probe < 4; ++probe) {
        Tokens context(1 + rng() % 8);
        for (int32_t& t : context) t = static_cast<int32_t>(rng() % vocab);
        const double factor = 0.5 * static_cast<double>(1 + rng() % 6);
        const double min_prob = 0.1 * static_cast<double>(rng() % 6);
        const SuffixDraft got = tree.speculate(context, 6, factor, min_prob);
        const SuffixDraft want =
            reference_speculate(counts, depth, vocab, context, 6, factor, min_prob);
        ASSERT_EQ(got.tokens, want.tokens);
        ASSERT_NEAR(got.score, want.score, 1e-9);
        ASSERT_EQ(got.match_len, want.match_len);
      }
    }
  }
}

TEST(SuffixTree, IncrementalEqualsFromScratch) {
  std::mt19937 rng(5);
  Tokens seq(300);
  for (int32_t& t : seq) t = static_cast<int32_t>(rng() % 4);
  SuffixTree whole(7);
  whole.extend(0, seq);
  SuffixTree pieces(7);
  for (size_t i = 0; i < seq.size();) {
    const size_t n = std::min<size_t>(1 + rng() % 9, seq.size() - i);
    pieces.extend(0, std::span<const int32_t>(seq).subspan(i, n));
    i += n;
  }
  EXPECT_EQ(whole.num_nodes(), pieces.num_nodes());
  EXPECT_LE(whole.num_nodes(), 2 * seq.size() + 1);
  for (const auto& [path, n] : substring_counts({seq}, 7)) {
    ASSERT_EQ(pieces.count(path), n);
    ASSERT_EQ(whole.count(path), n);
  }
  for (size_t end = 2; end < seq.size(); end += 13) {
    const auto context = std::span<const int32_t>(seq).first(end).last(std::min<size_t>(end, 7));
    const SuffixDraft a = whole.speculate(context, 5, 2.0, 0.1);
    const SuffixDraft b = pieces.speculate(context, 5, 2.0, 0.1);
    EXPECT_EQ(a.tokens, b.tokens);
    EXPECT_EQ(a.score, b.score);
  }
}

TEST(SuffixTree, RemovingEverythingFreesEveryNode) {
  SuffixTree tree(4);
  tree.extend(1, Tokens{1, 2, 3, 1, 2, 4});
  tree.extend(2, Tokens{2, 3, 1});
  tree.remove(1);
  tree.remove(2);
  EXPECT_EQ(tree.num_nodes(), 1u);
  EXPECT_EQ(tree.count({}), 0);
  tree.remove(3);  // unknown: no-op
  EXPECT_EQ(tree.num_nodes(), 1u);
}

TEST(SuffixTree, FollowsTheMostFrequentContinuation) {
  SuffixTree tree(8);
  // After [1,2]: 3 twice, 4 once.
  tree.extend(0, Tokens{1, 2, 3, 9, 1, 2, 3, 9, 1, 2, 4});
  const SuffixDraft d = tree.speculate(Tokens{7, 1, 2}, 4, 4.0, 0.1);
  EXPECT_EQ(d.tokens, (Tokens{3, 9, 1, 2}));
  EXPECT_EQ(d.match_len, 2);
  // [1,2] occurs 3 times, [1,2,3] twice: 2/3, and every later step 1.
  EXPECT_NEAR(d.score, 4 * 2.0 / 3.0, 1e-9);
}

TEST(SuffixTree, ProbabilityThresholdCutsThePath) {
  SuffixTree tree(8);
  // [5] is followed by 6, 7, 8, 9 once each (and ends once): 1/5 each.
  tree.extend(0, Tokens{5, 6, 5, 7, 5, 8, 5, 9, 5});
  EXPECT_EQ(tree.speculate(Tokens{5}, 4, 8.0, 0.1).tokens.size(), 0u)
      << "a context of one token allows no match (vLLM matches at most |context| - 1)";
  // 6 (the smaller of the tied tokens) at 1/5, then the path stays certain.
  const SuffixDraft d = tree.speculate(Tokens{0, 5}, 4, 8.0, 0.1);
  EXPECT_EQ(d.tokens, (Tokens{6, 5, 7, 5}));
  EXPECT_NEAR(d.score, 4 * 0.2, 1e-9);
  EXPECT_TRUE(tree.speculate(Tokens{0, 5}, 4, 8.0, 0.25).tokens.empty());
}

TEST(SuffixTree, SpecFactorCapsAShortMatch) {
  SuffixTree tree(16);
  tree.extend(0, Tokens{1, 2, 3, 4, 5, 6, 7, 8});
  // Context [.., 1]: match length 1 allows floor(1 * 2.0) = 2 tokens.
  EXPECT_EQ(tree.speculate(Tokens{0, 1}, 8, 2.0, 0.1).tokens, (Tokens{2, 3}));
  // Context [.., 1, 2]: match length 2 allows 4 (then max_tokens caps at 3).
  EXPECT_EQ(tree.speculate(Tokens{0, 1, 2}, 8, 2.0, 0.1).tokens, (Tokens{3, 4, 5, 6}));
  EXPECT_EQ(tree.speculate(Tokens{0, 1, 2}, 3, 2.0, 0.1).tokens, (Tokens{3, 4, 5}));
  // Factor 0.5 with match length 1: floor(0.5) = 0 tokens.
  EXPECT_TRUE(tree.speculate(Tokens{0, 1}, 8, 0.5, 0.1).tokens.empty());
}

TEST(SuffixTree, DepthLimitsMatchPlusDraft) {
  SuffixTree tree(4);
  tree.extend(0, Tokens{1, 2, 3, 4, 5, 6});
  // Matching [1,2] leaves 2 levels to draft, matching [2] leaves 3: the
  // shorter match drafts more and scores higher.
  const SuffixDraft d = tree.speculate(Tokens{0, 1, 2}, 8, 8.0, 0.1);
  EXPECT_EQ(d.tokens, (Tokens{3, 4, 5}));
  EXPECT_EQ(d.match_len, 1);
}

}  // namespace
}  // namespace pagoda
