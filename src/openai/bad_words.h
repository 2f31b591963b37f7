// The `bad_words` request field (vLLM's): strings the output must not
// contain, tokenized where the request is planned into
// SamplingParams::bad_words_token_ids, which the sampler applies per step
// (sample/bad_words.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "openai/field_reader.h"
#include "sample/sampling_params.h"

namespace pagoda {
class Tokenizer;
}

namespace pagoda::openai {

// At most this many words per request (each step matches every word).
constexpr size_t kMaxBadWords = 128;

// vLLM's tokenization of one bad word: the word without its leading
// whitespace, encoded without special tokens added (special-token text is
// still parsed, as Hugging Face encode does); then " " + that word, kept too
// when it has the same number of tokens but a different first token (the
// word in mid-text). Empty when the word has no token.
std::vector<std::vector<int32_t>> tokenize_bad_word(const Tokenizer& tokenizer, const std::string& word);

// Reads `bad_words` (a list of at most kMaxBadWords strings) into
// params.bad_words_token_ids; a word without tokens (empty or whitespace
// only) is a 400 naming the field. Errors are recorded in `reader`.
void read_bad_words(FieldReader& reader, const Tokenizer& tokenizer, SamplingParams& params);

}  // namespace pagoda::openai
