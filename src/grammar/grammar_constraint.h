// Structured output over a grammar: CompiledGrammar is the shared compiled
// form (grammar + vocabulary + mask cache; CompiledConstraint of
// sample/token_constraint.h) and GrammarConstraint the state of one output
// (a Matcher). A token is allowed when the matcher accepts all of its bytes;
// special and empty-byte tokens never are; the eos ids exactly when the
// output so far is complete.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "grammar/grammar.h"
#include "grammar/mask_cache.h"
#include "grammar/matcher.h"
#include "grammar/token_masks.h"
#include "grammar/vocabulary.h"
#include "sample/token_constraint.h"

namespace pagoda::grammar {

class CompiledGrammar final : public CompiledConstraint,
                              public std::enable_shared_from_this<CompiledGrammar> {
 public:
  // Masks cached per state and local masks per stack top: at most
  // mask_cache_bytes of each.
  CompiledGrammar(std::shared_ptr<const Grammar> grammar,
                  std::shared_ptr<const GrammarVocabulary> vocab, size_t mask_cache_bytes);

  std::unique_ptr<TokenConstraint> start() const override;

  const std::shared_ptr<const Grammar>& grammar() const { return grammar_; }
  const GrammarVocabulary& vocab() const { return *vocab_; }
  // The token mask of a matcher state without the eos ids: cached per state;
  // a miss combines the cached local masks of its stacks (token_masks.h).
  std::shared_ptr<const std::vector<uint32_t>> mask_of(const Matcher& m) const;
  const MaskCache& mask_cache() const { return cache_; }
  const StateCache<LocalMask>& local_cache() const { return local_cache_; }

 private:
  std::shared_ptr<const LocalMask> local_mask(std::span<const uint32_t> local) const;

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const GrammarVocabulary> vocab_;
  mutable MaskCache cache_;
  mutable StateCache<LocalMask> local_cache_;
};

class GrammarConstraint final : public TokenConstraint {
 public:
  explicit GrammarConstraint(std::shared_ptr<const CompiledGrammar> compiled);

  void fill_next_mask(std::span<uint32_t> words) const override;
  // The matcher state's cached mask, plus the eos ids where the output may
  // end; null once an eos token was accepted.
  SharedMask shared_next_mask() const override;
  bool accept(int32_t token) override;
  bool is_finished() const override;
  std::unique_ptr<TokenConstraint> clone() const override;
  // The matcher's forced bytes (Matcher::forced_bytes); "" once an eos token
  // was accepted.
  std::string forced_bytes(size_t max_bytes) const override;

  const Matcher& matcher() const { return matcher_; }

 private:
  std::shared_ptr<const CompiledGrammar> compiled_;
  Matcher matcher_;
  bool ended_ = false;  // an eos token was accepted
};

}  // namespace pagoda::grammar
