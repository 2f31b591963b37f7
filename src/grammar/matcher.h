// A byte-level pushdown automaton over a Grammar: the state of one output
// (a set of stacks, stack_set.h). Copyable (a copy is an independent state);
// const methods are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "grammar/grammar.h"
#include "grammar/stack_set.h"

namespace pagoda::grammar {

class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const Grammar> grammar);

  // Advances over all of `bytes`, or returns false and leaves the state
  // unchanged when the grammar does not admit them here.
  bool accept_bytes(std::string_view bytes);
  // The bytes so far are a complete sentence of the root rule.
  bool can_end() const { return stacks_.can_end(); }
  // No byte can follow and the input cannot end (never after a true accept).
  bool is_dead() const { return !can_end() && next_bytes().empty(); }
  // The bytes that may come next.
  ByteSet next_bytes() const { return stacks_.next_bytes(*grammar_); }
  // The bytes every continuation must start with while the grammar admits
  // exactly one next byte (up to max_bytes of them); "" when the next byte is
  // not forced or the input may end here.
  std::string forced_bytes(size_t max_bytes) const;

  const Grammar& grammar() const { return *grammar_; }
  const std::shared_ptr<const Grammar>& shared_grammar() const { return grammar_; }
  // The state in canonical form (equal states, equal data) and its hash.
  const StackSet& stacks() const { return stacks_; }
  uint64_t state_hash() const { return hash_; }

 private:
  std::shared_ptr<const Grammar> grammar_;
  StackSet stacks_;
  uint64_t hash_ = 0;
};

// Whether the whole of `text` is a sentence of `grammar`.
bool grammar_matches(std::shared_ptr<const Grammar> grammar, std::string_view text);

}  // namespace pagoda::grammar
