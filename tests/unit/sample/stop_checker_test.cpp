// StopChecker: stop strings across token boundaries, hold-back, stop text
// inclusion, stop tokens, min_tokens, ignore_eos, max_tokens; and a
// randomized comparison with a direct token-by-token reference.
#include "sample/stop_checker.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace pagoda {
namespace {

constexpr int32_t kEos = 2;
const std::vector<int32_t> kEosIds = {kEos};

struct Fed {
  std::vector<std::string> deltas;  // what each append emitted
  StopUpdate last;
};

// Feeds (token, text) pairs until a finishing update.
Fed feed(StopChecker& c, const std::vector<std::pair<int32_t, std::string>>& tokens) {
  Fed f;
  for (const auto& [t, text] : tokens) {
    f.last = c.append(t, text);
    f.deltas.push_back(f.last.text);
    if (f.last.finished()) break;
  }
  return f;
}

SamplingParams with_stop(std::vector<std::string> stop) {
  SamplingParams p;
  p.stop = std::move(stop);
  return p;
}

TEST(StopChecker, StopStringAcrossTokensIsHeldBackAndNeverLeaks) {
  StopChecker c(with_stop({"</end>"}), kEosIds, 100);
  Fed f = feed(c, {{10, "Hello </"}, {11, "en"}, {12, "d> tail"}});
  EXPECT_EQ(f.deltas, (std::vector<std::string>{"Hello ", "", ""}));
  EXPECT_EQ(f.last.finish, StopFinish::kStop);
  EXPECT_EQ(f.last.stop_string, "</end>");
  EXPECT_EQ(c.emitted_text(), "Hello ");
  EXPECT_TRUE(c.finished());
}

TEST(StopChecker, HeldTextIsReleasedWhenItStopsMatching) {
  StopChecker c(with_stop({"###"}), kEosIds, 100);
  Fed f = feed(c, {{10, "a#"}, {11, "#"}, {12, "b"}, {13, "c"}});
  EXPECT_EQ(f.deltas, (std::vector<std::string>{"a", "", "##b", "c"}));
  EXPECT_FALSE(f.last.finished());
}

TEST(StopChecker, IncludeStopStringEmitsUpToItsEnd) {
  SamplingParams p = with_stop({"STOP"});
  p.include_stop_str_in_output = true;
  StopChecker c(p, kEosIds, 100);
  Fed f = feed(c, {{10, "xx ST"}, {11, "OP yy"}});
  EXPECT_EQ(f.deltas, (std::vector<std::string>{"xx ", "STOP"}));
  EXPECT_EQ(f.last.stop_string, "STOP");
}

TEST(StopChecker, EarliestStopStringWins) {
  StopChecker c(with_stop({"cd", "abc"}), kEosIds, 100);
  Fed f = feed(c, {{10, "xab"}, {11, "cd"}});
  EXPECT_EQ(f.last.stop_string, "abc");
  EXPECT_EQ(c.emitted_text(), "x");
}

TEST(StopChecker, StopTokenTextIsDroppedUnlessIncluded) {
  SamplingParams p;
  p.stop_token_ids = {7};
  StopChecker c(p, kEosIds, 100);
  Fed f = feed(c, {{10, "a"}, {7, "<x>"}});
  EXPECT_EQ(f.last.finish, StopFinish::kStop);
  EXPECT_EQ(f.last.stop_token, 7);
  EXPECT_EQ(c.emitted_text(), "a");
  p.include_stop_str_in_output = true;
  StopChecker d(p, kEosIds, 100);
  feed(d, {{10, "a"}, {7, "<x>"}});
  EXPECT_EQ(d.emitted_text(), "a<x>");
}

TEST(StopChecker, EosStopsAndFlushesHeldText) {
  StopChecker c(with_stop({"##"}), kEosIds, 100);
  Fed f = feed(c, {{10, "a#"}, {kEos, ""}});
  EXPECT_EQ(f.last.finish, StopFinish::kStop);
  EXPECT_EQ(f.last.stop_token, kEos);
  EXPECT_TRUE(f.last.by_eos);
  EXPECT_EQ(f.deltas, (std::vector<std::string>{"a", "#"}));
}

TEST(StopChecker, AnEosIdTheRequestListsIsNotByEos) {
  SamplingParams p;
  p.stop_token_ids = {9, kEos};
  StopChecker c(p, kEosIds, 100);
  EXPECT_FALSE(feed(c, {{10, "a"}, {kEos, ""}}).last.by_eos);
  StopChecker d(p, kEosIds, 100);
  Fed f = feed(d, {{9, "!"}});
  EXPECT_EQ(f.last.stop_token, 9);
  EXPECT_FALSE(f.last.by_eos);
}

TEST(StopChecker, IgnoreEosKeepsGoing) {
  SamplingParams p;
  p.ignore_eos = true;
  p.stop_token_ids = {9};
  StopChecker c(p, kEosIds, 100);
  Fed f = feed(c, {{kEos, "e"}, {kEos, "e"}, {9, "!"}});
  EXPECT_EQ(f.deltas, (std::vector<std::string>{"e", "e", ""}));
  EXPECT_EQ(f.last.stop_token, 9);
  EXPECT_FALSE(f.last.by_eos);
}

TEST(StopChecker, NothingStopsBeforeMinTokens) {
  SamplingParams p = with_stop({"x"});
  p.min_tokens = 3;
  p.stop_token_ids = {9};
  StopChecker c(p, kEosIds, 100);
  Fed f = feed(c, {{kEos, "<eos>"}, {9, "x"}, {10, "ax"}});
  EXPECT_EQ(f.deltas, (std::vector<std::string>{"<eos>", "x", "a"}));
  EXPECT_EQ(f.last.stop_string, "x");
  EXPECT_EQ(c.num_tokens(), 3);
}

TEST(StopChecker, MaxTokensFinishesWithLengthAndFlushes) {
  StopChecker c(with_stop({"zz"}), kEosIds, 2);
  Fed f = feed(c, {{10, "a"}, {11, "z"}, {12, "never"}});
  EXPECT_EQ(f.deltas, (std::vector<std::string>{"a", "z"}));
  EXPECT_EQ(f.last.finish, StopFinish::kLength);
  EXPECT_TRUE(f.last.stop_string.empty());
}

TEST(StopChecker, StopStringWinsOverStopTokenAndLength) {
  StopChecker c(with_stop({"b"}), kEosIds, 1);
  StopUpdate u = c.append(kEos, "ab");  // EOS text dropped: no match, EOS stops
  EXPECT_EQ(u.stop_token, kEos);
  SamplingParams p = with_stop({"b"});
  p.include_stop_str_in_output = true;
  StopChecker d(p, kEosIds, 1);
  u = d.append(kEos, "ab");
  EXPECT_EQ(u.stop_string, "b");
  EXPECT_EQ(u.text, "ab");
}

// Reference: after each token, search the whole text so far for the
// earliest stop string; the final text is cut there. The checker's emitted
// text must always be a prefix of the final text and end equal to it.
TEST(StopChecker, RandomStreamsMatchDirectReference) {
  std::mt19937 rng(7);
  auto rand_str = [&](int lo, int hi) {
    std::string s(std::uniform_int_distribution<int>(lo, hi)(rng), 'a');
    for (char& ch : s) ch = "abc"[std::uniform_int_distribution<int>(0, 2)(rng)];
    return s;
  };
  for (int iter = 0; iter < 2000; ++iter) {
    SamplingParams p;
    int num_stop = std::uniform_int_distribution<int>(1, 3)(rng);
    for (int i = 0; i < num_stop; ++i) p.stop.push_back(rand_str(1, 4));
    p.include_stop_str_in_output = iter % 2 == 1;
    std::vector<std::string> texts;
    for (int i = 0; i < 12; ++i) texts.push_back(rand_str(0, 3));

    std::string want, all;
    bool stopped = false;
    for (const std::string& t : texts) {
      all += t;
      size_t best = std::string::npos, len = 0;
      for (const std::string& s : p.stop) {
        size_t at = all.find(s);
        if (at < best) best = at, len = s.size();
      }
      if (best != std::string::npos) {
        want = all.substr(0, p.include_stop_str_in_output ? best + len : best);
        stopped = true;
        break;
      }
    }
    if (!stopped) want = all;

    StopChecker c(p, kEosIds, static_cast<int32_t>(texts.size()));
    std::string got;
    for (size_t i = 0; i < texts.size() && !c.finished(); ++i) {
      got += c.append(10, texts[i]).text;
      ASSERT_EQ(want.compare(0, got.size(), got), 0) << "leaked: " << got << " final " << want;
    }
    ASSERT_TRUE(c.finished());
    ASSERT_EQ(got, want) << "iteration " << iter;
  }
}

}  // namespace
}  // namespace pagoda
