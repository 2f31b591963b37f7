// PenaltyCounts kept incrementally against a from-scratch recount (the
// ordered-map count that sampling rows used to do every step) over random
// token streams, with forks (n > 1 / beam: a copy that continues on its own)
// and preemptions (a recount from the tokens, then more tokens).
#include "sample/penalty_counts.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

namespace pagoda {
namespace {

using Ids = std::vector<int32_t>;

struct Expected {
  Ids tokens;
  Ids counts;
  std::vector<uint8_t> in_prompt;
};

Expected recount(const Ids& prompt, const Ids& outputs, bool flag_prompt) {
  struct Entry {
    int32_t count = 0;
    bool in_prompt = false;
  };
  std::map<int32_t, Entry> m;
  for (int32_t t : outputs) ++m[t].count;
  if (flag_prompt) {
    for (int32_t t : prompt) m[t].in_prompt = true;
  }
  Expected e;
  for (const auto& [t, entry] : m) {
    e.tokens.push_back(t);
    e.counts.push_back(entry.count);
    e.in_prompt.push_back(entry.in_prompt ? 1 : 0);
  }
  return e;
}

void expect_counts(const PenaltyCounts& c, const Ids& prompt, const Ids& outputs, bool flag_prompt) {
  const Expected e = recount(prompt, outputs, flag_prompt);
  ASSERT_EQ(Ids(c.tokens().begin(), c.tokens().end()), e.tokens);
  ASSERT_EQ(Ids(c.output_counts().begin(), c.output_counts().end()), e.counts);
  ASSERT_EQ(std::vector<uint8_t>(c.in_prompt().begin(), c.in_prompt().end()), e.in_prompt);
  ASSERT_EQ(c.num_outputs(), static_cast<int64_t>(outputs.size()));
}

TEST(PenaltyCounts, EmptyPromptAndOutput) {
  PenaltyCounts c;
  c.rebuild({}, {}, true);
  expect_counts(c, {}, {}, true);
  c.add(3);
  expect_counts(c, {}, {3}, true);
}

TEST(PenaltyCounts, PromptListedOnlyWithFlag) {
  const Ids prompt = {9, 4, 4, 7};
  for (bool flag : {false, true}) {
    PenaltyCounts c;
    c.rebuild(prompt, {}, flag);
    expect_counts(c, prompt, {}, flag);
    c.add(4);
    c.add(1);
    c.add(4);
    expect_counts(c, prompt, {4, 1, 4}, flag);
  }
}

TEST(PenaltyCounts, RandomStreamsWithForksAndPreemptions) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 200; ++trial) {
    const bool flag = trial % 2 == 0;
    // Small vocabularies repeat tokens often; large ones add new ids.
    const int32_t vocab = trial % 3 == 0 ? 8 : (trial % 3 == 1 ? 64 : 5000);
    std::uniform_int_distribution<int32_t> token(0, vocab - 1);
    Ids prompt(static_cast<size_t>(rng() % 40));
    for (int32_t& t : prompt) t = token(rng);

    struct Seq {
      Ids outputs;
      PenaltyCounts counts;
    };
    std::vector<Seq> seqs(1);
    seqs[0].counts.rebuild(prompt, {}, flag);
    const int steps = 1 + static_cast<int>(rng() % 300);
    for (int step = 0; step < steps; ++step) {
      const uint32_t event = rng() % 100;
      if (event < 3 && seqs.size() < 4) {
        // Fork: a new sequence continues from a copy of another.
        const Seq parent = seqs[rng() % seqs.size()];
        seqs.push_back(parent);
      } else if (event < 6) {
        // Preemption: the sequence is recounted from its tokens.
        Seq& s = seqs[rng() % seqs.size()];
        s.counts.rebuild(prompt, s.outputs, flag);
      }
      for (Seq& s : seqs) {
        const int32_t t = token(rng);
        s.outputs.push_back(t);
        s.counts.add(t);
      }
    }
    for (const Seq& s : seqs) expect_counts(s.counts, prompt, s.outputs, flag);
    // A recount from the tokens gives the same lists as the increments.
    for (const Seq& s : seqs) {
      PenaltyCounts fresh;
      fresh.rebuild(prompt, s.outputs, flag);
      expect_counts(fresh, prompt, s.outputs, flag);
    }
  }
}

}  // namespace
}  // namespace pagoda
