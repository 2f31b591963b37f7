// bad_words: vLLM's tokenization of each word (as given without leading
// whitespace, and with a prefix space when that starts with another token
// of the same count) on the stories260K tokenizer, and the field's errors.
#include "openai/bad_words.h"

#include <gtest/gtest.h>

#include <string>

#include "openai/sampling_request.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::openai {
namespace {

using json = nlohmann::ordered_json;
using Ids = std::vector<int32_t>;

const Tokenizer& stories() {
  static const std::unique_ptr<Tokenizer> tok =
      std::move(Tokenizer::load(std::string(PAGODA_SHARED_DIR) + "/models/stories260K").value());
  return *tok;
}

TEST(BadWords, TokenizedAsGivenAndWithAPrefixSpaceWhenItDiffers) {
  const Tokenizer& tok = stories();
  for (const std::string word : {"cat", "Lily", "happy dog", " \tbig", "."}) {
    SCOPED_TRACE(word);
    const std::string stripped = word.substr(word.find_first_not_of(" \t"));
    const Ids plain = tok.encode(stripped, false);
    const Ids spaced = tok.encode(" " + stripped, false);
    std::vector<Ids> want = {plain};
    if (spaced.size() == plain.size() && spaced[0] != plain[0]) want.push_back(spaced);
    EXPECT_EQ(tokenize_bad_word(tok, word), want);
  }
  EXPECT_TRUE(tokenize_bad_word(tok, "").empty());
  EXPECT_TRUE(tokenize_bad_word(tok, "  \n").empty());
}

TEST(BadWords, FieldIsReadIntoTokenSequences) {
  json body = json::parse(R"({"bad_words": ["cat", "happy dog"]})");
  FieldReader reader(body);
  SamplingParams params;
  read_bad_words(reader, stories(), params);
  ASSERT_FALSE(reader.error().has_value()) << reader.error()->message;
  std::vector<Ids> want = tokenize_bad_word(stories(), "cat");
  for (Ids& ids : tokenize_bad_word(stories(), "happy dog")) want.push_back(ids);
  EXPECT_EQ(params.bad_words_token_ids, want);
  EXPECT_FALSE(sampling_params_error(params, stories().vocab_size()).has_value());
}

TEST(BadWords, BadValuesAreA400NamingTheField) {
  json many = json::object();
  many["bad_words"] = json::array();
  for (size_t i = 0; i <= kMaxBadWords; ++i) many["bad_words"].push_back("w");
  const std::vector<std::pair<json, std::string>> cases = {
      {json::parse(R"({"bad_words": "cat"})"), "must be a list of strings"},
      {json::parse(R"({"bad_words": ["cat", 3]})"), "[1] must be a string"},
      {json::parse(R"({"bad_words": ["cat", ""]})"), "[1] has no tokens"},
      {json::parse(R"({"bad_words": ["   "]})"), "has no tokens"},
      {many, "at most 128"},
  };
  for (const auto& [body, want] : cases) {
    FieldReader reader(body);
    SamplingParams params;
    read_bad_words(reader, stories(), params);
    ASSERT_TRUE(reader.error().has_value()) << body.dump();
    EXPECT_EQ(reader.error()->param, "bad_words");
    EXPECT_NE(reader.error()->message.find(want), std::string::npos) << reader.error()->message << " / " << want;
  }
  // Beam rows are unprocessed: refused rather than ignored.
  SamplingParams beam;
  beam.use_beam_search = true;
  beam.beam_width = 2;
  beam.bad_words_token_ids = {{5}};
  auto error = sampling_params_error(beam, stories().vocab_size());
  ASSERT_TRUE(error.has_value());
  EXPECT_EQ(error->param, "bad_words");
}

}  // namespace
}  // namespace pagoda::openai
