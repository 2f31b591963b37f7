// The mask of a grammar state: every token whose bytes the state accepts,
// found by walking the vocabulary's byte trie depth-first and advancing a
// copy of the state per byte (a subtree is pruned as soon as its prefix is
// refused). Special tokens, empty-byte tokens and eos ids are never set here
// (eos is the constraint's business).
#pragma once

#include <cstdint>
#include <span>

#include "grammar/grammar.h"
#include "grammar/stack_set.h"
#include "grammar/vocabulary.h"

namespace pagoda::grammar {

// Sets bits in `words` (the packed layout of sample/token_mask.h over
// vocab.logits_vocab_size(); not cleared first). Thread-safe (per-thread
// scratch).
void fill_grammar_mask(const Grammar& g, const GrammarVocabulary& vocab, const StackSet& state,
                       std::span<uint32_t> words);

// Reference for tests: whether the state accepts all of `bytes`.
bool state_accepts(const Grammar& g, const StackSet& state, std::string_view bytes);

}  // namespace pagoda::grammar
