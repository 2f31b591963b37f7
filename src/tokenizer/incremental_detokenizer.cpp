#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace pagoda {

namespace {

bool ends_with_replacement_char(const std::string& s) {
  return s.size() >= 3 && s.compare(s.size() - 3, 3, "\xEF\xBF\xBD") == 0;
}

}  // namespace

bool IncrementalDetokenizer::kept(int32_t id) const {
  return id >= 0 && id < tok_->vocab_size() && !(skip_special_ && tok_->is_special(id));
}

// The prompt's last ids whose text may still change with what follows (the
// last kept id under BPEDecoder, a trailing run of byte-fallback bytes) start
// out pending; the text the caller already has for them is `shown_`.
IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tok, bool skip_special_tokens,
                                               std::span<const int32_t> prompt_ids)
    : tok_(&tok),
      skip_special_(skip_special_tokens),
      hold_last_kept_(tok.last_token_depends_on_next()) {
  size_t tail = prompt_ids.size();
  if (hold_last_kept_) {
    while (tail > 0 && !kept(prompt_ids[tail - 1])) --tail;
    if (tail > 0) --tail;
  }
  while (tail > 0 && tok.is_open_byte(prompt_ids[tail - 1])) --tail;
  // Start-of-text rules apply to the first kept id of the whole sequence.
  at_start_ =
      std::none_of(prompt_ids.begin(), prompt_ids.begin() + static_cast<std::ptrdiff_t>(tail),
                   [&](int32_t x) { return kept(x); });
  pending_.assign(prompt_ids.begin() + static_cast<std::ptrdiff_t>(tail), prompt_ids.end());
  if (!pending_.empty())
    shown_ = tok.decode_impl(pending_, skip_special_, at_start_, /*at_end=*/true);
}

std::string IncrementalDetokenizer::take_new(std::string text) {
  if (shown_.empty()) return text;
  size_t common = 0;
  while (common < text.size() && common < shown_.size() && text[common] == shown_[common]) ++common;
  shown_.clear();
  // Only a prefix the caller already has is dropped; on a mismatch (a prompt
  // that ends inside a character) the new text is returned as is.
  return common == 0 ? text : text.substr(common);
}

// The ids pending_[0, n) are emitted once cutting
// after them cannot change how any of them decodes: their text does not end
// in a U+FFFD that more bytes could turn into a character, their last kept id
// is not a byte-fallback byte that could extend a run, and at the start of the
// text it is not empty (start-of-text rules still apply to what follows).
std::string IncrementalDetokenizer::feed(int32_t id) {
  pending_.push_back(id);
  auto kept = [&](int32_t x) { return this->kept(x); };
  size_t n = pending_.size();
  if (hold_last_kept_) {  // n: up to (not including) the last kept id
    auto it = std::find_if(pending_.rbegin(), pending_.rend(), kept);
    n = it == pending_.rend() ? 0 : static_cast<size_t>(pending_.rend() - it) - 1;
  }
  std::span<const int32_t> ready(pending_.data(), n);
  auto last_kept = std::find_if(ready.rbegin(), ready.rend(), kept);
  if (last_kept == ready.rend() || tok_->is_open_byte(*last_kept)) return {};
  std::string text = tok_->decode_impl(ready, skip_special_, at_start_, /*at_end=*/false);
  if (ends_with_replacement_char(text) || (at_start_ && text.empty())) return {};
  pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
  at_start_ = false;
  return take_new(std::move(text));
}

std::string IncrementalDetokenizer::flush() {
  std::string text = tok_->decode_impl(pending_, skip_special_, at_start_, /*at_end=*/true);
  pending_.clear();
  if (!text.empty()) at_start_ = false;
  return take_new(std::move(text));
}

}  // namespace pagoda
