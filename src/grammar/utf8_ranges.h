// Code-point ranges as UTF-8 byte-range sequences (the way regex engines
// compile Unicode classes to byte automata): every code point of the ranges,
// and nothing else, is encoded by exactly one sequence whose i-th byte lies in
// the sequence's i-th byte range. Surrogates (U+D800..U+DFFF) are never
// encoded.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace pagoda::grammar {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

struct CodePointRange {
  uint32_t lo = 0;
  uint32_t hi = 0;  // inclusive
  bool operator<(const CodePointRange& o) const { return lo != o.lo ? lo < o.lo : hi < o.hi; }
  bool operator==(const CodePointRange&) const = default;
};

using ByteRange = std::pair<uint8_t, uint8_t>;  // inclusive
using ByteSequence = std::vector<ByteRange>;    // 1..4 ranges

// Sorted, merged ranges without surrogates; with `negate`, the complement in
// [0, kMaxCodePoint].
std::vector<CodePointRange> normalize_ranges(std::vector<CodePointRange> ranges, bool negate);

// The byte sequences of normalized ranges, in code point order.
std::vector<ByteSequence> utf8_sequences(const std::vector<CodePointRange>& ranges);

}  // namespace pagoda::grammar
