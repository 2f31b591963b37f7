// split_group: the per-step token-budget rule for one request group.
#include "sched/group_chunks.h"

#include <gtest/gtest.h>

namespace pagoda {
namespace {

using Ids = std::vector<int32_t>;

TEST(SplitGroup, LoneSequenceChunksByBudgetAndCap) {
  Ids r = {20};
  GroupChunks g = split_group(r, 7, 0);
  EXPECT_EQ(g.num_new_tokens, Ids{7});
  EXPECT_FALSE(g.samples);
  g = split_group(r, 64, 0);
  EXPECT_EQ(g.num_new_tokens, Ids{20});
  EXPECT_TRUE(g.samples);
  g = split_group(r, 64, 8);
  EXPECT_EQ(g.num_new_tokens, Ids{8});
  EXPECT_FALSE(g.samples);
  Ids decode = {1};
  g = split_group(decode, 1, 0);
  EXPECT_EQ(g.total, 1);
  EXPECT_TRUE(g.samples);
  g = split_group(decode, 0, 0);
  EXPECT_EQ(g.total, 0);
}

TEST(SplitGroup, GroupSamplesOnlyInLockstep) {
  Ids beams = {1, 1, 1};
  GroupChunks g = split_group(beams, 3, 0);
  EXPECT_EQ(g.num_new_tokens, (Ids{1, 1, 1}));
  EXPECT_TRUE(g.samples);
  g = split_group(beams, 2, 0);  // not all fit: nobody may sample
  EXPECT_EQ(g.total, 0);
  EXPECT_FALSE(g.samples);
  // Recomputing a preempted group: chunks stop one short of the end.
  Ids recompute = {5, 5};
  g = split_group(recompute, 7, 0);
  EXPECT_EQ(g.num_new_tokens, (Ids{4, 3}));
  EXPECT_FALSE(g.samples);
  Ids rest = {1, 2};
  g = split_group(rest, 7, 0);
  EXPECT_EQ(g.num_new_tokens, (Ids{1, 2}));
  EXPECT_TRUE(g.samples);
  // A member with nothing to compute blocks sampling for the group.
  Ids waiting = {0, 1};
  g = split_group(waiting, 7, 0);
  EXPECT_EQ(g.total, 0);
}

}  // namespace
}  // namespace pagoda
