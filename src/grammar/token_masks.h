// Token masks of grammar states: every token whose bytes a state accepts.
// Special tokens, empty-byte tokens and eos ids are never set here (eos is
// the constraint's business). Masks use the packed layout of
// sample/token_mask.h over vocab.logits_vocab_size(); functions only set
// bits. Thread-safe (per-thread scratch).
//
// The plain walk (fill_grammar_mask) goes down the vocabulary's byte trie
// depth-first, advancing a copy of the state per byte and pruning a subtree
// as soon as its prefix is refused.
//
// Local masks split that work so that most of it is done once per grammar
// position instead of once per state (xgrammar's context-independent
// tokens): a stack's LOCAL part is its top frames up to and including the
// innermost frame of a rule the user wrote (the frames above it belong to
// the groups, classes and repetitions of that rule). The local mask is
// walked from the local part alone: tokens it accepts are accepted whatever
// lies below; trie nodes where the local part may finish (its rule returns)
// are "exits", whose tokens depend on the frames below and are resolved per
// state by walking only those subtrees from the resumed state.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/stack_set.h"
#include "grammar/vocabulary.h"

namespace pagoda::grammar {

// The plain walk of the whole trie.
void fill_grammar_mask(const Grammar& g, const GrammarVocabulary& vocab, const StackSet& state,
                       std::span<uint32_t> words);

// The tokens below trie node `node` (excluding its own) that `state` accepts
// as the bytes after that node's prefix.
void walk_subtree(const Grammar& g, const GrammarVocabulary& vocab, const StackSet& state,
                  uint32_t node, std::span<uint32_t> words);

// Index of the first frame of a stack's local part (0 when every frame is a
// helper's).
size_t local_start(const Grammar& g, std::span<const uint32_t> stack);

struct LocalMask {
  std::vector<uint32_t> accepted;  // packed: tokens accepted within the local part
  std::vector<uint32_t> exits;     // trie nodes after whose prefix the local part may return
};

LocalMask compute_local_mask(const Grammar& g, const GrammarVocabulary& vocab,
                             std::span<const uint32_t> local);

// The mask of a stack from its local mask: `local` is local_mask(stack[start:])
// and `below` = stack[:start].
void apply_local_mask(const Grammar& g, const GrammarVocabulary& vocab, const LocalMask& local,
                      std::span<const uint32_t> below, std::span<uint32_t> words);

// Reference for tests: whether the state accepts all of `bytes`.
bool state_accepts(const Grammar& g, const StackSet& state, std::string_view bytes);

}  // namespace pagoda::grammar
