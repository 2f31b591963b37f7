#include "openai/logprobs_format.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "openai/wire/json_util.h"

namespace pagoda::openai {

namespace {

constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // U+2581, SentencePiece's space

Json token_bytes(const std::string& text) {
  Json bytes = Json::array();
  for (unsigned char c : text) bytes.push_back(static_cast<int>(c));
  return bytes;
}

}  // namespace

std::string token_text(const Tokenizer& tokenizer, int32_t token_id) {
  const int32_t ids[1] = {token_id};
  std::string text = tokenizer.decode(std::span<const int32_t>(ids, 1), false);
  if (!text.starts_with(' ') && tokenizer.id_to_token(token_id).starts_with(kMetaspace))
    text.insert(0, " ");
  return text;
}

double json_logprob(float logprob) {
  return std::isfinite(logprob) ? logprob : -9999.0;
}

Json chat_logprob_entry(const Tokenizer& tokenizer, const TokenLogprob& logprob, int num_top) {
  const std::string text = token_text(tokenizer, logprob.token_id);
  Json top = Json::array();
  const size_t count =
      std::min<size_t>(logprob.top.size(), static_cast<size_t>(std::max(num_top, 0)));
  for (size_t i = 0; i < count; ++i) {
    const std::string alt = token_text(tokenizer, logprob.top[i].token_id);
    top.push_back({{"token", alt},
                   {"logprob", json_logprob(logprob.top[i].logprob)},
                   {"bytes", token_bytes(alt)}});
  }
  return {{"token", text},
          {"logprob", json_logprob(logprob.logprob)},
          {"bytes", token_bytes(text)},
          {"top_logprobs", std::move(top)}};
}

Json prompt_logprobs_json(const Tokenizer& tokenizer,
                          const std::vector<std::optional<TokenLogprob>>& entries, int num_top) {
  Json out = Json::array();
  for (const auto& entry : entries) {
    if (!entry) {
      out.push_back(nullptr);
      continue;
    }
    Json scored = Json::object();
    auto add = [&](int32_t token_id, float logprob, int32_t rank) {
      const std::string key = std::to_string(token_id);
      if (scored.contains(key)) return;
      scored[key] = {{"logprob", json_logprob(logprob)},
                     {"rank", rank},
                     {"decoded_token", token_text(tokenizer, token_id)}};
    };
    add(entry->token_id, entry->logprob, entry->rank);
    const size_t count =
        std::min<size_t>(entry->top.size(), static_cast<size_t>(std::max(num_top, 0)));
    for (size_t i = 0; i < count; ++i)
      add(entry->top[i].token_id, entry->top[i].logprob, static_cast<int32_t>(i + 1));
    out.push_back(std::move(scored));
  }
  return out;
}

void CompletionLogprobs::add_token(int32_t token_id) {
  const std::string text = token_text(*tokenizer_, token_id);
  tokens_.push_back(text);
  text_offsets_.push_back(text_offset_);
  text_offset_ += static_cast<int64_t>(count_code_points(text));
}

void CompletionLogprobs::add(const TokenLogprob& logprob, int num_top) {
  add_token(logprob.token_id);
  token_logprobs_.push_back(json_logprob(logprob.logprob));
  Json top = Json::object();
  const size_t count =
      std::min<size_t>(logprob.top.size(), static_cast<size_t>(std::max(num_top, 0)));
  for (size_t i = 0; i < count; ++i) {
    top[token_text(*tokenizer_, logprob.top[i].token_id)] = json_logprob(logprob.top[i].logprob);
  }
  top[tokens_.back().get<std::string>()] = json_logprob(logprob.logprob);
  top_logprobs_.push_back(std::move(top));
}

void CompletionLogprobs::add_unscored(int32_t token_id) {
  add_token(token_id);
  token_logprobs_.push_back(nullptr);
  top_logprobs_.push_back(nullptr);
}

Json CompletionLogprobs::take() {
  Json out = {{"tokens", std::move(tokens_)},
              {"token_logprobs", std::move(token_logprobs_)},
              {"top_logprobs", std::move(top_logprobs_)},
              {"text_offset", std::move(text_offsets_)}};
  tokens_ = token_logprobs_ = top_logprobs_ = text_offsets_ = Json::array();
  return out;
}

}  // namespace pagoda::openai
