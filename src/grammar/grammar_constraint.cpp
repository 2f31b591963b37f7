#include "grammar/grammar_constraint.h"

#include <algorithm>

#include "sample/token_mask.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace pagoda::grammar {

namespace {

size_t num_masks(size_t bytes, const GrammarVocabulary& vocab) {
  return bytes /
         (sizeof(uint32_t) * static_cast<size_t>(mask_num_words(vocab.logits_vocab_size())) + 1);
}

// Stacks this deep take the plain walk: a local part walked alone could grow
// past the depth bound that the whole stack hits.
constexpr size_t kLocalDepthLimit = kMaxStackDepth - 1024;

}  // namespace

CompiledGrammar::CompiledGrammar(std::shared_ptr<const Grammar> grammar,
                                 std::shared_ptr<const GrammarVocabulary> vocab,
                                 size_t mask_cache_bytes)
    : grammar_(std::move(grammar)),
      vocab_(std::move(vocab)),
      cache_(num_masks(mask_cache_bytes, *vocab_)),
      local_cache_(num_masks(mask_cache_bytes, *vocab_)) {}

std::unique_ptr<TokenConstraint> CompiledGrammar::start() const {
  return std::make_unique<GrammarConstraint>(shared_from_this());
}

std::shared_ptr<const LocalMask> CompiledGrammar::local_mask(
    std::span<const uint32_t> local) const {
  std::vector<uint32_t> key(local.begin(), local.end());
  const uint64_t hash = XXH3_64bits(key.data(), key.size() * sizeof(uint32_t));
  if (auto hit = local_cache_.find(hash, key)) return hit;
  auto computed = std::make_shared<const LocalMask>(compute_local_mask(*grammar_, *vocab_, local));
  local_cache_.insert(hash, key, computed);
  return computed;
}

std::shared_ptr<const std::vector<uint32_t>> CompiledGrammar::mask_of(const Matcher& m) const {
  const StackSet& state = m.stacks();
  if (auto hit = cache_.find(m.state_hash(), state.data())) return hit;
  auto mask = std::make_shared<std::vector<uint32_t>>(
      static_cast<size_t>(mask_num_words(vocab_->logits_vocab_size())), 0u);
  for (uint32_t i = 0; i < state.num_stacks(); ++i) {
    const std::span<const uint32_t> stack = state.stack(i);
    if (stack.empty()) continue;  // complete: the eos ids, set by the constraint
    if (stack.size() > kLocalDepthLimit) {
      fill_grammar_mask(*grammar_, *vocab_, StackSet::of_stack(stack), *mask);
      continue;
    }
    const size_t start = local_start(*grammar_, stack);
    apply_local_mask(*grammar_, *vocab_, *local_mask(stack.subspan(start)), stack.first(start),
                     *mask);
  }
  std::shared_ptr<const std::vector<uint32_t>> shared = std::move(mask);
  cache_.insert(m.state_hash(), state.data(), shared);
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

TokenConstraint::SharedMask GrammarConstraint::shared_next_mask() const {
  if (ended_) return {};
  return {compiled_->mask_of(matcher_),
          matcher_.can_end() ? &compiled_->vocab().eos_ids() : nullptr};
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
