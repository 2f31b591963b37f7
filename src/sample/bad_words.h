// vLLM's bad_words at sampling time: which tokens the request's tokenized
// bad words (SamplingParams::bad_words_token_ids) ban for the next token.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pagoda {

// Appends to `banned` the last token of every word whose other tokens are
// the last tokens of `output` (the tokens generated so far, never the
// prompt); a one-token word always matches. A word longer than output + 1
// tokens cannot match yet. Order follows `words`; a token may repeat.
void add_bad_word_bans(std::span<const std::vector<int32_t>> words, std::span<const int32_t> output,
                       std::vector<int32_t>& banned);

// Whether some word has more than one token, so its bans depend on the
// output (a sequence's next row cannot be planned before its last token).
bool has_multi_token_word(std::span<const std::vector<int32_t>> words);

}  // namespace pagoda
