// Logprobs in the two OpenAI shapes: chat (choices[].logprobs.content[] of
// {token, logprob, bytes, top_logprobs}) and legacy completions (parallel
// arrays tokens / token_logprobs / top_logprobs / text_offset).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/engine_api.h"
#include "openai/wire/json_util.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::openai {

// The text one token contributes, as shown in logprobs: its decoded text, with
// the word-boundary space of a SentencePiece piece ("▁the" → " the") kept
// even where decoding alone would strip it. May hold a partial UTF-8 character.
std::string token_text(const Tokenizer& tokenizer, int32_t token_id);

// Finite logprob for JSON (-inf → -9999, as vLLM does).
double json_logprob(float logprob);

// One chat logprobs.content entry with at most `num_top` alternatives.
Json chat_logprob_entry(const Tokenizer& tokenizer, const TokenLogprob& logprob, int num_top);

// vLLM's prompt_logprobs: one entry per prompt token, null where nothing
// scored it (the first token), else an object keyed by token id (a decimal
// string) of {"logprob", "rank", "decoded_token"}: the prompt token itself
// first, then its `num_top` most likely alternatives (rank 1, 2, ...; a token
// appears once). decoded_token is token_text.
Json prompt_logprobs_json(const Tokenizer& tokenizer,
                          const std::vector<std::optional<TokenLogprob>>& entries, int num_top);

// Builds completions logprobs for one choice, possibly across stream chunks:
// text_offset continues from chunk to chunk.
class CompletionLogprobs {
 public:
  explicit CompletionLogprobs(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  // A scored token; its top_logprobs dict holds `num_top` alternatives plus the
  // token itself (as vLLM does).
  void add(const TokenLogprob& logprob, int num_top);
  // A token without a score (the first prompt token with echo): null entries.
  void add_unscored(int32_t token_id);
  bool empty() const { return tokens_.empty(); }
  // The entries added since the last take().
  Json take();

 private:
  void add_token(int32_t token_id);

  const Tokenizer* tokenizer_;
  int64_t text_offset_ = 0;  // in code points, over everything added so far
  Json tokens_ = Json::array(), token_logprobs_ = Json::array(), top_logprobs_ = Json::array(),
       text_offsets_ = Json::array();
};

}  // namespace pagoda::openai
