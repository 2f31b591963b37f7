// IncrementalDetokenizer: for random id sequences, every delta is valid UTF-8
// and the deltas plus flush() concatenate to decode() exactly.
#include <gtest/gtest.h>

#include <filesystem>
#include <random>

#include "tokenizer/tokenizer.h"
#include "core/utf8.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;

void check_random_streams(const Tokenizer& tok, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int32_t> any(0, tok.vocab_size() - 1);
  for (int n = 0; n < 300; ++n) {
    std::vector<int32_t> ids(1 + rng() % 24);
    for (int32_t& id : ids) id = any(rng);
    for (bool skip : {false, true}) {
      IncrementalDetokenizer detok(tok, skip);
      std::string text;
      for (int32_t id : ids) {
        std::string delta = detok.feed(id);
        ASSERT_TRUE(is_valid_utf8(delta));
        text += delta;
      }
      text += detok.flush();
      ASSERT_EQ(text, tok.decode(ids, skip));
    }
  }
}

TEST(IncrementalDetokenizer, ByteLevel) {
  auto tok = Tokenizer::load(fs::path(PAGODA_TEST_DATA) / "tokenizer" / "bytelevel");
  ASSERT_TRUE(tok.ok());
  check_random_streams(**tok, 1);
}

TEST(IncrementalDetokenizer, MetaspaceWithByteFallback) {
  auto tok = Tokenizer::load(fs::path(PAGODA_TEST_DATA) / "tokenizer" / "metaspace");
  ASSERT_TRUE(tok.ok());
  check_random_streams(**tok, 2);
}

TEST(IncrementalDetokenizer, SentencePieceStories260K) {
  fs::path folder = fs::path(PAGODA_SHARED_DIR) / "models" / "stories260K";
  if (!fs::exists(folder)) GTEST_SKIP() << "optional input " << folder << " absent";
  auto tok = Tokenizer::load(folder.string());
  ASSERT_TRUE(tok.ok());
  check_random_streams(**tok, 3);
  // Byte-fallback runs are held back until complete: 中 = E4 B8 AD.
  auto e4 = (*tok)->token_to_id("<0xE4>");
  auto b8 = (*tok)->token_to_id("<0xB8>");
  auto ad = (*tok)->token_to_id("<0xAD>");
  ASSERT_TRUE(e4 && b8 && ad);
  IncrementalDetokenizer detok(**tok, false);
  EXPECT_EQ(detok.feed(*e4), "");
  EXPECT_EQ(detok.feed(*b8), "");
  EXPECT_EQ(detok.feed(*ad), "");  // the run may still go on
  EXPECT_EQ(detok.feed(*(*tok)->token_to_id("\xE2\x96\x81"
                                            "a")),
            "\xE4\xB8\xAD a");
  EXPECT_EQ(detok.flush(), "");
}

TEST(IncrementalDetokenizer, PromptContext) {
  fs::path folder = fs::path(PAGODA_SHARED_DIR) / "models" / "stories260K";
  if (!fs::exists(folder)) GTEST_SKIP() << "optional input " << folder << " absent";
  auto tok = Tokenizer::load(folder.string());
  ASSERT_TRUE(tok.ok());
  std::vector<int32_t> prompt = (*tok)->encode("Once upon");
  std::vector<int32_t> rest = (*tok)->encode("a time", false);  // "▁a▁time"
  ASSERT_EQ((*tok)->decode(rest), "a time");
  IncrementalDetokenizer detok(**tok, true, prompt);
  std::string text;
  for (int32_t id : rest) text += detok.feed(id);
  text += detok.flush();
  // The first generated token keeps its leading space after a prompt.
  EXPECT_EQ(text, " a time");
}

}  // namespace
}  // namespace pagoda
