#include "grammar/grammar_constraint.h"

#include <algorithm>

#include "grammar/token_masks.h"
#include "sample/token_mask.h"

namespace pagoda::grammar {

CompiledGrammar::CompiledGrammar(std::shared_ptr<const Grammar> grammar,
                                 std::shared_ptr<const GrammarVocabulary> vocab,
                                 size_t mask_cache_bytes)
    : grammar_(std::move(grammar)),
      vocab_(std::move(vocab)),
      cache_(mask_cache_bytes /
             (sizeof(uint32_t) * static_cast<size_t>(mask_num_words(vocab_->logits_vocab_size())) + 1)) {}

std::unique_ptr<TokenConstraint> CompiledGrammar::start() const {
  return std::make_unique<GrammarConstraint>(shared_from_this());
}

std::shared_ptr<const MaskCache::Mask> CompiledGrammar::mask_of(const Matcher& m) const {
  const auto& state = m.stacks().data();
  if (auto hit = cache_.find(m.state_hash(), state)) return hit;
  auto mask = std::make_shared<MaskCache::Mask>(
      static_cast<size_t>(mask_num_words(vocab_->logits_vocab_size())), 0u);
  fill_grammar_mask(*grammar_, *vocab_, m.stacks(), *mask);
  std::shared_ptr<const MaskCache::Mask> shared = std::move(mask);
  cache_.insert(m.state_hash(), state, shared);
  return shared;
}

GrammarConstraint::GrammarConstraint(std::shared_ptr<const CompiledGrammar> compiled)
    : compiled_(std::move(compiled)), matcher_(compiled_->grammar()) {}

void GrammarConstraint::fill_next_mask(std::span<uint32_t> words) const {
  if (ended_) return;
  const auto mask = compiled_->mask_of(matcher_);
  const size_t n = std::min(words.size(), mask->size());
  for (size_t i = 0; i < n; ++i) words[i] |= (*mask)[i];
  if (!matcher_.can_end()) return;
  for (int32_t id : compiled_->vocab().eos_ids()) {
    if (static_cast<size_t>(id >> 5) < words.size()) words[id >> 5] |= uint32_t{1} << (id & 31);
  }
}

bool GrammarConstraint::accept(int32_t token) {
  if (ended_) return false;
  const GrammarVocabulary& vocab = compiled_->vocab();
  if (vocab.is_eos(token)) {
    if (!matcher_.can_end()) return false;
    ended_ = true;
    return true;
  }
  if (vocab.is_special(token)) return false;
  const std::string& bytes = vocab.token_bytes(token);
  if (bytes.empty()) return false;
  return matcher_.accept_bytes(bytes);
}

bool GrammarConstraint::is_finished() const {
  return ended_ || (matcher_.can_end() && matcher_.next_bytes().empty());
}

std::unique_ptr<TokenConstraint> GrammarConstraint::clone() const {
  return std::make_unique<GrammarConstraint>(*this);
}

std::string GrammarConstraint::forced_bytes(size_t max_bytes) const {
  return ended_ ? std::string() : matcher_.forced_bytes(max_bytes);
}

}  // namespace pagoda::grammar
