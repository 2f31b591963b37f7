// The state of the byte-level pushdown automaton: a set of stacks of grammar
// positions (Grammar::elements indices). The top frame of a stack is a
// kBytes position (the next byte must be in its set); the frames below are
// return positions. An empty stack means the input so far is a complete
// sentence. The matcher (matcher.h) and the mask walk (token_masks.h) advance
// it one byte at a time.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "grammar/grammar.h"

namespace pagoda::grammar {

// Bounds that keep hostile or highly ambiguous grammars from exploding: a
// byte that would need more stacks, or a deeper stack, is not accepted.
inline constexpr uint32_t kMaxStacks = 1024;
inline constexpr uint32_t kMaxStackDepth = 4096;

class StackSet {
 public:
  // The state before any input.
  static StackSet start(const Grammar& g);
  // The set holding one stack (top a kBytes position).
  static StackSet of_stack(std::span<const uint32_t> frames);
  // The state after the rule of a finished top frame returns into `frames`
  // (the frames below it; the last one a return position): the sentence is
  // complete when frames is empty. Empty when a bound is hit.
  static StackSet resume(const Grammar& g, std::span<const uint32_t> frames);

  uint32_t num_stacks() const { return static_cast<uint32_t>(offsets_.size()); }
  bool empty() const { return offsets_.empty(); }
  // Stack i's frames, bottom first.
  std::span<const uint32_t> stack(uint32_t i) const {
    return {data_.data() + offsets_[i] + 1, data_[offsets_[i]]};
  }
  bool can_end() const;
  // The bytes some stack accepts next.
  ByteSet next_bytes(const Grammar& g) const;

  // out = the stacks after `byte` (out's old content is dropped). false when
  // no stack accepts the byte or a bound was hit (out is then empty).
  bool advance(const Grammar& g, uint8_t byte, StackSet& out) const;

  // Sorts the stacks so that equal sets have equal data(), and returns the
  // hash of that canonical form.
  uint64_t canonicalize();
  // The flat records [length, frames...] of every stack.
  const std::vector<uint32_t>& data() const { return data_; }

  void clear();

 private:
  // Adds the stack prefix + middle + suffix unless present; prefix_hash is
  // hash_frames(prefix). false when a bound is hit.
  bool emit(std::span<const uint32_t> prefix, uint64_t prefix_hash,
            std::span<const uint32_t> middle, std::span<const uint32_t> suffix);
  // Emits every stack reached by continuing at `pos` over `frames` (the
  // frames below, consumed as a scratch).
  bool expand(const Grammar& g, std::vector<uint32_t>& frames, uint32_t pos);

  std::vector<uint32_t> data_;     // per stack: [length, frames...]
  std::vector<uint32_t> offsets_;  // start of each stack's record in data_
  std::vector<uint64_t> hashes_;   // per stack, for deduplication
  std::vector<uint32_t> scratch_;  // frames being expanded
};

}  // namespace pagoda::grammar
