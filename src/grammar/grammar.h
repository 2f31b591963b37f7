// The compiled form of a grammar: rules over BYTES. Every alternative is a
// run of elements in one flat array closed by a kEnd element; a kBytes
// element matches one byte of its set, a kRef element a sentence of another
// rule. Code-point classes and literals are already UTF-8 byte sequences here
// (gbnf_parser.h builds it). finalize_grammar() checks the rules and derives
// the tables the matcher (matcher.h) runs on.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/result.h"

namespace pagoda::grammar {

// A set of bytes: bit b % 64 of words[b / 64].
struct ByteSet {
  std::array<uint64_t, 4> words{};

  bool contains(uint8_t b) const { return (words[b >> 6] >> (b & 63)) & 1; }
  void add(uint8_t b) { words[b >> 6] |= uint64_t{1} << (b & 63); }
  void add_range(uint8_t lo, uint8_t hi);  // [lo, hi], nothing when lo > hi
  void add_all(const ByteSet& other);
  bool empty() const { return (words[0] | words[1] | words[2] | words[3]) == 0; }
  int count() const;
  bool operator==(const ByteSet&) const = default;
};

struct Element {
  enum class Kind : uint8_t { kBytes, kRef, kEnd };
  Kind kind = Kind::kEnd;
  uint32_t value = 0;  // kBytes: index into Grammar::byte_sets; kRef: rule id
};

struct Rule {
  std::string name;                    // for errors; helper rules are named after their rule
  std::vector<uint32_t> alternatives;  // start positions in Grammar::elements (none: never matches)
  // Made by the parser for a group, class or repetition inside a rule (the
  // mask builder treats it as part of the rule that wrote it).
  bool helper = false;
};

struct Grammar {
  std::vector<Element> elements;
  std::vector<ByteSet> byte_sets;
  std::vector<Rule> rules;
  uint32_t root = 0;

  // Derived by finalize_grammar():
  std::vector<uint8_t> nullable;       // by rule: matches the empty string
  std::vector<uint32_t> element_rule;  // by position: the rule whose alternative holds it
  // The stacks a reference to rule r pushes to reach its first bytes: the
  // flat records [length, frames (bottom first; the last one is a kBytes
  // position, the others return positions in the rule's alternatives)] in
  // first_stacks[first_begin[r], first_begin[r + 1]).
  std::vector<uint32_t> first_begin;
  std::vector<uint32_t> first_stacks;
};

// Grammar size bounds (errors beyond them, never unbounded work).
inline constexpr size_t kMaxGrammarElements = 1'000'000;
inline constexpr size_t kMaxFirstStackWords = 4'000'000;

// By rule: whether it matches the empty string.
std::vector<uint8_t> compute_nullable(const Grammar& g);

// Checks a grammar and fills its derived tables. Errors (kInvalidArgument):
// "grammar: rule 'a' is left-recursive (a -> b -> a)" for a rule that can
// reach itself before matching any byte, and "grammar: rule 'a' is too
// ambiguous" when the first-byte table outgrows kMaxFirstStackWords.
Status finalize_grammar(Grammar& g);

// The elements of one alternative as text, for debugging and tests.
std::string describe_rule(const Grammar& g, uint32_t rule);

}  // namespace pagoda::grammar
