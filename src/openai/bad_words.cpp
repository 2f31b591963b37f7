#include "openai/bad_words.h"

#include <fmt/format.h>

#include "tokenizer/tokenizer.h"

namespace pagoda::openai {

namespace {

// Python's str.isspace over ASCII (what str.lstrip() removes there).
bool is_space(char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); }

}  // namespace

std::vector<std::vector<int32_t>> tokenize_bad_word(const Tokenizer& tokenizer, const std::string& word) {
  size_t start = 0;
  while (start < word.size() && is_space(word[start])) ++start;
  const std::string stripped = word.substr(start);
  std::vector<std::vector<int32_t>> out;
  std::vector<int32_t> plain = tokenizer.encode(stripped, /*add_special_tokens=*/false);
  if (plain.empty()) return out;
  std::vector<int32_t> spaced = tokenizer.encode(" " + stripped, /*add_special_tokens=*/false);
  out.push_back(std::move(plain));
  if (spaced.size() == out[0].size() && spaced[0] != out[0][0]) out.push_back(std::move(spaced));
  return out;
}

void read_bad_words(FieldReader& reader, const Tokenizer& tokenizer, SamplingParams& params) {
  const Json* value = reader.value("bad_words");
  if (!value) return;
  if (!value->is_array()) {
    reader.fail_field("bad_words", fmt::format("must be a list of strings, got {}", describe_value(*value)));
    return;
  }
  if (value->size() > kMaxBadWords) {
    reader.fail_field("bad_words",
                      fmt::format("holds {} words; at most {} are allowed", value->size(), kMaxBadWords));
    return;
  }
  for (size_t i = 0; i < value->size(); ++i) {
    const Json& word = (*value)[i];
    if (!word.is_string()) {
      reader.fail_field("bad_words", fmt::format("[{}] must be a string, got {}", i, describe_value(word)));
      return;
    }
    auto ids = tokenize_bad_word(tokenizer, word.get<std::string>());
    if (ids.empty()) {
      reader.fail_field("bad_words", fmt::format("[{}] has no tokens: {} is empty once leading "
                                                 "whitespace is removed",
                                                 i, describe_value(word)));
      return;
    }
    for (auto& seq : ids) params.bad_words_token_ids.push_back(std::move(seq));
  }
}

}  // namespace pagoda::openai
