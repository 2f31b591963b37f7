// A set of Unicode scalar values (code points 0..U+10FFFF minus the surrogates
// U+D800..U+DFFF, which have no UTF-8 encoding): what one regex character class
// such as [a-z], \d or `.` matches. Stored as sorted, disjoint, non-adjacent
// closed ranges, so equal sets have equal representations.
#pragma once

#include <cstdint>
#include <vector>

namespace pagoda::grammar {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

struct CodePointRange {
  uint32_t lo = 0;  // inclusive
  uint32_t hi = 0;  // inclusive, >= lo
};

class RegexCharSet {
 public:
  RegexCharSet() = default;
  static RegexCharSet of(uint32_t cp) { return range(cp, cp); }
  static RegexCharSet range(uint32_t lo, uint32_t hi);
  static RegexCharSet any();    // every scalar value
  static RegexCharSet digit();  // \d: [0-9] (ECMAScript, and Python with re.ASCII)
  static RegexCharSet word();   // \w: [A-Za-z0-9_]
  static RegexCharSet space();  // \s: ECMAScript's WhiteSpace and LineTerminator code points

  // Adds [lo, hi] (lo <= hi <= U+10FFFF), dropping any surrogates it covers.
  void add(uint32_t lo, uint32_t hi);
  void add(const RegexCharSet& other);
  RegexCharSet complement() const;  // within the scalar values

  bool empty() const { return ranges_.empty(); }
  // True when the set holds exactly one code point (then first() is it).
  bool is_single() const { return ranges_.size() == 1 && ranges_[0].lo == ranges_[0].hi; }
  uint32_t first() const { return ranges_.front().lo; }
  bool contains(uint32_t cp) const;
  const std::vector<CodePointRange>& ranges() const { return ranges_; }

 private:
  void add_scalar_range(uint32_t lo, uint32_t hi);  // no surrogates in [lo, hi]
  std::vector<CodePointRange> ranges_;
};

}  // namespace pagoda::grammar
