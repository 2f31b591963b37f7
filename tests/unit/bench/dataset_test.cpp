// Dataset generators: exact lengths and ranges of random prompts, the shared
// prefix, ShareGPT-like length means, and the ShareGPT file filter.
#include "bench/dataset.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

namespace pagoda::bench {
namespace {

TokenPool pool_of(int32_t n) {
  TokenPool p;
  for (int32_t i = 0; i < n; ++i) p.push_back(1000 + i);
  return p;
}

TEST(RandomDataset, ExactLengthsWithoutRange) {
  RandomSpec spec{50, 37, 11, 0.0, 0, 3};
  auto rs = make_random_requests(spec, pool_of(100));
  ASSERT_TRUE(rs.ok());
  ASSERT_EQ(rs->size(), 50u);
  for (const auto& r : *rs) {
    EXPECT_EQ(r.prompt_ids.size(), 37u);
    EXPECT_EQ(r.prompt_len, 37);
    EXPECT_EQ(r.output_len, 11);
    for (int32_t id : r.prompt_ids) ASSERT_TRUE(id >= 1000 && id < 1100);
  }
}

TEST(RandomDataset, RangeRatioCoversFloorToCeilUniformly) {
  // L = 10, r = 0.25: inputs in [floor(7.5), ceil(12.5)] = [7, 13]; outputs
  // L = 4: [3, 5].
  RandomSpec spec{7000, 10, 4, 0.25, 0, 11};
  auto rs = make_random_requests(spec, pool_of(50));
  ASSERT_TRUE(rs.ok());
  std::map<int64_t, int> in_counts, out_counts;
  for (const auto& r : *rs) {
    ++in_counts[r.prompt_len];
    ++out_counts[r.output_len];
    ASSERT_EQ(static_cast<int64_t>(r.prompt_ids.size()), r.prompt_len);
  }
  ASSERT_EQ(in_counts.size(), 7u);
  EXPECT_EQ(in_counts.begin()->first, 7);
  EXPECT_EQ(in_counts.rbegin()->first, 13);
  for (auto [len, n] : in_counts) EXPECT_NEAR(n, 1000, 150) << "input length " << len;
  ASSERT_EQ(out_counts.size(), 3u);
  EXPECT_EQ(out_counts.begin()->first, 3);
  EXPECT_EQ(out_counts.rbegin()->first, 5);
}

TEST(RandomDataset, OutputAtLeastOneAndBadRatiosRejected) {
  auto rs = make_random_requests({200, 20, 1, 0.9, 0, 0}, pool_of(10));
  ASSERT_TRUE(rs.ok());
  for (const auto& r : *rs) EXPECT_GE(r.output_len, 1);
  EXPECT_FALSE(make_random_requests({1, 5, 5, 1.0, 0, 0}, pool_of(10)).ok());
  EXPECT_FALSE(make_random_requests({1, 5, 5, -0.1, 0, 0}, pool_of(10)).ok());
  EXPECT_FALSE(make_random_requests({1, 5, 5, 0.0, 0, 0}, TokenPool{}).ok());
  EXPECT_FALSE(make_random_requests({1, 0, 5, 0.0, 0, 0}, pool_of(10)).ok());
}

TEST(PrefixDataset, SharedPrefixThenUniqueSuffix) {
  auto rs = make_random_requests({20, 16, 8, 0.0, 64, 5}, pool_of(1000));
  ASSERT_TRUE(rs.ok());
  const auto& first = (*rs)[0].prompt_ids;
  for (const auto& r : *rs) {
    ASSERT_EQ(r.prompt_len, 80);
    EXPECT_TRUE(std::equal(first.begin(), first.begin() + 64, r.prompt_ids.begin()));
  }
  EXPECT_FALSE(std::equal(first.begin() + 64, first.end(), (*rs)[1].prompt_ids.begin() + 64));
}

TEST(ShareGptLike, LogNormalMeansAndBounds) {
  auto rs = make_sharegpt_like_requests(20000, 0, 9, pool_of(100));
  ASSERT_TRUE(rs.ok());
  double sum_in = 0, sum_out = 0;
  int64_t min_in = 1 << 30, max_in = 0;
  for (const auto& r : *rs) {
    sum_in += static_cast<double>(r.prompt_len);
    sum_out += static_cast<double>(r.output_len);
    min_in = std::min(min_in, r.prompt_len);
    max_in = std::max(max_in, r.prompt_len);
    ASSERT_EQ(static_cast<int64_t>(r.prompt_ids.size()), r.prompt_len);
    ASSERT_TRUE(r.output_len >= 4 && r.output_len <= 1024);
  }
  // Clamping at 1024 trims the input tail by ~1%.
  EXPECT_NEAR(sum_in / 20000.0, 220.0, 10.0);
  EXPECT_NEAR(sum_out / 20000.0, 190.0, 6.0);
  EXPECT_GE(min_in, 4);
  EXPECT_LE(max_in, 1024);
  auto fixed = make_sharegpt_like_requests(10, 33, 9, pool_of(100));
  for (const auto& r : *fixed) EXPECT_EQ(r.output_len, 33);
}

Result<int64_t> count_words(const std::string& s) {
  std::istringstream in(s);
  int64_t n = 0;
  for (std::string w; in >> w;) ++n;
  return n;
}

const std::string kMini = std::string(PAGODA_SOURCE_DIR) + "/tests/data/bench/sharegpt_mini.json";

TEST(ShareGptFile, FiltersAndCyclesValidConversations) {
  // Valid (>= 2 turns, prompt and output >= 4 words): a, b, f, h.
  auto rs = load_sharegpt_requests(kMini, 10, 0, 1, count_words);
  ASSERT_TRUE(rs.ok()) << rs.error().message;
  ASSERT_EQ(rs->size(), 10u);
  std::map<int64_t, int64_t> prompt_to_output;
  for (const auto& r : *rs) {
    EXPECT_TRUE(r.prompt_ids.empty());
    EXPECT_EQ(r.prompt_len, *count_words(r.prompt_text));
    prompt_to_output[r.prompt_len] = r.output_len;
  }
  // prompt words -> answer words of a (12, 29), b (9, 16), f (12, 36), h (11, 17).
  EXPECT_EQ(prompt_to_output.size(), 3u);  // a and f share 12 prompt words
  EXPECT_EQ(prompt_to_output[9], 16);
  EXPECT_EQ(prompt_to_output[11], 17);
  for (int i = 0; i < 4; ++i) EXPECT_EQ((*rs)[i].prompt_text, (*rs)[i + 4].prompt_text) << "cycled";
}

TEST(ShareGptFile, FixedOutputLengthAndEstimates) {
  auto rs = load_sharegpt_requests(
      kMini, 4, 7, 1, [](const std::string& s) -> Result<int64_t> { return estimate_tokens(s); });
  ASSERT_TRUE(rs.ok());
  for (const auto& r : *rs) {
    EXPECT_EQ(r.output_len, 7);
    EXPECT_EQ(r.prompt_len, static_cast<int64_t>((r.prompt_text.size() + 3) / 4));
  }
  EXPECT_EQ(estimate_tokens(""), 1);
  EXPECT_EQ(estimate_tokens("abcde"), 2);
}

TEST(ShareGptFile, ErrorsNameTheFile) {
  auto missing = load_sharegpt_requests("/nonexistent/x.json", 1, 0, 0, count_words);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("/nonexistent/x.json"), std::string::npos);
  std::string bad = testing::TempDir() + "/bench_not_json.json";
  std::ofstream(bad) << "[{\"conversations\": ";
  auto not_json = load_sharegpt_requests(bad, 1, 0, 0, count_words);
  ASSERT_FALSE(not_json.ok());
  EXPECT_NE(not_json.error().message.find("not valid JSON"), std::string::npos);
  std::ofstream(bad) << "{\"conversations\": []}";
  EXPECT_FALSE(load_sharegpt_requests(bad, 1, 0, 0, count_words).ok());
}

}  // namespace
}  // namespace pagoda::bench
