// UTF-8 repair, Unicode normalization and the regex translation, against
// values from Python (bytes.decode(errors="replace"), unicodedata).
#include <gtest/gtest.h>

#include "tokenizer/gguf_presets.h"
#include "tokenizer/regex.h"
#include "tokenizer/unicode_data.h"
#include "core/utf8.h"

namespace pagoda::tok {
namespace {

TEST(Utf8, RepairsLikePythonReplace) {
  // b.decode("utf-8", "replace") for each b.
  EXPECT_EQ(to_valid_utf8("a\xff"
                          "b"),
            "a\xEF\xBF\xBD"
            "b");
  EXPECT_EQ(to_valid_utf8("\xe4\xb8"), "\xEF\xBF\xBD");
  EXPECT_EQ(to_valid_utf8("\xf0\x80\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(to_valid_utf8("\xed\xa0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(to_valid_utf8("\xe4\xb8\xad\xe4"), "\xe4\xb8\xad\xEF\xBF\xBD");
  EXPECT_EQ(to_valid_utf8("\xc0\xaf"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_TRUE(is_valid_utf8("\xf0\x9f\xa4\x97 ok"));
  EXPECT_FALSE(is_valid_utf8("\xf4\x90\x80\x80"));  // above U+10FFFF
}

TEST(Utf8, IncompleteTail) {
  EXPECT_TRUE(ends_with_incomplete_utf8("ab\xe4\xb8"));
  EXPECT_TRUE(ends_with_incomplete_utf8("\xf0\x9f"));
  EXPECT_FALSE(ends_with_incomplete_utf8("ab\xe4\xb8\xad"));
  EXPECT_FALSE(ends_with_incomplete_utf8("\xff"));
  EXPECT_FALSE(ends_with_incomplete_utf8("\xf0\x80"));  // not a prefix of any valid sequence
}

TEST(Unicode, NormalFormsMatchUnicodedata) {
  // unicodedata.normalize(form, s).
  EXPECT_EQ(normalize("e\xCC\x81", NormalForm::kNfc), "\xC3\xA9");
  EXPECT_EQ(normalize("\xC3\xA9", NormalForm::kNfd), "e\xCC\x81");
  EXPECT_EQ(normalize("\xEF\xAC\x81", NormalForm::kNfkc), "fi");
  EXPECT_EQ(normalize("\xEF\xAC\x81", NormalForm::kNfc), "\xEF\xAC\x81");
  // U+1E9B U+0323 -> NFKC U+1E69, NFD U+017F U+0323 U+0307.
  EXPECT_EQ(normalize("\xE1\xBA\x9B\xCC\xA3", NormalForm::kNfkc), "\xE1\xB9\xA9");
  EXPECT_EQ(normalize("\xE1\xBA\x9B\xCC\xA3", NormalForm::kNfd), "\xC5\xBF\xCC\xA3\xCC\x87");
  // Canonical reordering: a U+0301 U+0323 -> NFD a U+0323 U+0301.
  EXPECT_EQ(normalize("a\xCC\x81\xCC\xA3", NormalForm::kNfd), "a\xCC\xA3\xCC\x81");
  // Hangul: U+1100 U+1161 U+11A8 <-> U+AC01.
  EXPECT_EQ(normalize("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8", NormalForm::kNfc), "\xEA\xB0\x81");
  EXPECT_EQ(normalize("\xEA\xB0\x81", NormalForm::kNfd), "\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8");
  // Angstrom sign U+212B -> U+00C5; full-width A -> A under NFKC only.
  EXPECT_EQ(normalize("\xE2\x84\xAB", NormalForm::kNfc), "\xC3\x85");
  EXPECT_EQ(normalize("\xEF\xBC\xA1", NormalForm::kNfkd), "A");
  // Composition exclusion: U+0958 stays decomposed under NFC.
  EXPECT_EQ(normalize("\xE0\xA5\x98", NormalForm::kNfc), "\xE0\xA4\x95\xE0\xA4\xBC");
}

TEST(Unicode, Properties) {
  EXPECT_TRUE(is_white_space(0x85));
  EXPECT_TRUE(is_white_space(0x3000));
  EXPECT_FALSE(is_white_space(0x180E));  // not White_Space since Unicode 6.3
  EXPECT_FALSE(is_white_space(0x200B));
  EXPECT_TRUE(is_numeric(0x0663));  // Arabic-indic three
  EXPECT_TRUE(is_numeric(0x2462));  // circled three (No)
  EXPECT_TRUE(is_punctuation(0x3002));
  EXPECT_FALSE(is_punctuation('$'));
  EXPECT_TRUE(is_mark(0x0301));
  std::string lower;
  append_lowercase(lower, 0x130);  // U+0130 -> i U+0307
  append_lowercase(lower, 'Q');
  append_lowercase(lower, 0x0416);  // Cyrillic Zhe
  EXPECT_EQ(lower, "i\xCC\x87q\xD0\xB6");
}

std::vector<std::string> pieces(const Regex& re, std::string_view text) {
  std::vector<Match> m;
  re.find_all(text, m);
  std::vector<std::string> out;
  for (const Match& x : m) out.emplace_back(text.substr(x.start, x.end - x.start));
  return out;
}

TEST(Regex, OnigurumaWhitespaceAndWordClasses) {
  auto ws = Regex::compile(R"(\s+)");
  ASSERT_TRUE(ws.ok());
  EXPECT_EQ(pieces(**ws,
                   "a\xC2\x85"
                   "b\xE1\xA0\x8E"
                   "c"),
            (std::vector<std::string>{"\xC2\x85"}));
  auto word = Regex::compile(R"(\w+)");
  ASSERT_TRUE(word.ok());
  // Marks belong to words (Rust/Oniguruma), U+2462 (No) does not.
  EXPECT_EQ(pieces(**word,
                   "ne\xCC\x81"
                   "e \xE2\x91\xA2"),
            (std::vector<std::string>{"ne\xCC\x81"
                                      "e"}));
}

TEST(Regex, EmptyMatchesAdvance) {
  auto re = Regex::compile(R"((?=(\d{3})+(?!\d)))");
  ASSERT_TRUE(re.ok());
  std::vector<Match> m;
  (*re)->find_all("1234567", m);
  ASSERT_EQ(m.size(), 2u);  // before 234 and before 567
  EXPECT_EQ(m[0].start, 1u);
  EXPECT_EQ(m[1].start, 4u);
}

TEST(Regex, BadPatternIsAnError) {
  auto re = Regex::compile("(unclosed");
  ASSERT_FALSE(re.ok());
  EXPECT_NE(re.error().message.find("(unclosed"), std::string::npos);
}

}  // namespace
}  // namespace pagoda::tok

namespace pagoda::tok {
namespace {

TEST(GgufPresets, EveryPatternCompiles) {
  auto names = gguf_preset_names();
  EXPECT_GT(names.size(), 60u);
  for (std::string_view name : names) {
    const GgufPreset* p = find_gguf_preset(name);
    ASSERT_NE(p, nullptr) << name;
    for (std::string_view pattern : p->patterns) {
      auto re = Regex::compile(pattern);
      EXPECT_TRUE(re.ok()) << name << ": " << (re.ok() ? "" : re.error().message);
    }
  }
  EXPECT_EQ(find_gguf_preset("kimi-k2"), nullptr);
  EXPECT_EQ(find_gguf_preset(""), find_gguf_preset("default"));
}

}  // namespace
}  // namespace pagoda::tok
