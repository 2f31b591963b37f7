// The parsed form of a regular expression: an immutable tree over code-point
// classes. Nodes are built only through the make_* functions, which keep the
// tree simplified (no one-child sequences or alternations, no {1,1} or {0,0}
// repeats, nested sequences and alternations flattened) and fold the empty
// language ("nothing", an empty class) upwards, so a tree that is not nothing
// has no nothing inside it. make_alt merges the single-class branches into
// one class, so an alternation of characters is a character class.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "grammar/regex_char_set.h"

namespace pagoda::grammar {

constexpr uint32_t kUnbounded = std::numeric_limits<uint32_t>::max();

struct RegexNode;
using RegexNodePtr = std::shared_ptr<const RegexNode>;

struct RegexNode {
  enum class Kind {
    kEmpty,        // matches only the empty string
    kChars,        // one code point of `chars`; an empty set is "nothing"
    kSeq,          // children in order (>= 2)
    kAlt,          // any one child (>= 2)
    kRepeat,       // children[0] repeated min..max times (max may be kUnbounded)
    kStartAnchor,  // ^ or \A at pattern position `pos` (only in the parser's output)
    kEndAnchor,    // $ or \Z at pattern position `pos` (only in the parser's output)
  };
  Kind kind = Kind::kEmpty;
  RegexCharSet chars;
  std::vector<RegexNodePtr> children;
  uint32_t min = 0;
  uint32_t max = 0;
  size_t pos = 0;
  bool nullable = true;  // the empty string is in the language (anchors count as empty)
  // Code-point classes in the tree with each repeat unrolled to max copies
  // (min + 1 when unbounded), saturating at 2^62: what bounds the grammar size.
  uint64_t expanded_size = 0;
};

RegexNodePtr make_empty();
RegexNodePtr make_nothing();
RegexNodePtr make_chars(RegexCharSet chars);
RegexNodePtr make_seq(std::vector<RegexNodePtr> items);
RegexNodePtr make_alt(std::vector<RegexNodePtr> branches);
RegexNodePtr make_repeat(RegexNodePtr body, uint32_t min, uint32_t max);  // min <= max
RegexNodePtr make_anchor(RegexNode::Kind kind, size_t pos);

inline bool is_nothing(const RegexNode& n) {
  return n.kind == RegexNode::Kind::kChars && n.chars.empty();
}

// L without the empty string (nothing when L is only the empty string), or
// nullptr where that would copy a sequence of more than kMaxStrippedSequence
// nullable items (each item i gives a branch "item i non-empty, then items
// i+1.."). L{m,n} == non_empty_part(L){0,n} when L is nullable, which keeps
// a bounded repeat from being ambiguous about which copies are empty.
constexpr size_t kMaxStrippedSequence = 16;
RegexNodePtr non_empty_part(const RegexNodePtr& node);

// A node L' with L'* == L* whose language lacks the empty string (nothing when
// L* is only the empty string). Repeating it without bound creates no cycle
// of empty moves in a pushdown automaton, as repeating a nullable L would.
RegexNodePtr star_body(const RegexNodePtr& node);

// The repeat GBNF spells for body{min,max}: a nullable body repeated more than
// once becomes star_body(body){0,} (unbounded) or non_empty_part(body){0,max}
// (bounded) where that part exists; else body{min,max} itself. A null body
// means the repeat matches only the empty string.
struct GbnfRepeat {
  RegexNodePtr body;
  uint32_t min = 0;
  uint32_t max = 0;
};
GbnfRepeat gbnf_repeat(const RegexNodePtr& body, uint32_t min, uint32_t max);

// The grammar elements parse_gbnf expands `r` to (its kMaxRepeatElements
// bound): body{m,n} is m copies of the body's s elements and n - m optional
// copies of s + 3, body{m,} m copies and one optional; a single code point is a
// literal of s = its UTF-8 bytes, any other body one element.
uint64_t gbnf_repeat_elements(const GbnfRepeat& r);

}  // namespace pagoda::grammar
