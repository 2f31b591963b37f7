#include "grammar/regex_char_set.h"

#include <algorithm>
#include <cassert>

namespace pagoda::grammar {

namespace {

constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kSurrogateHi = 0xDFFF;

}  // namespace

RegexCharSet RegexCharSet::range(uint32_t lo, uint32_t hi) {
  RegexCharSet s;
  s.add(lo, hi);
  return s;
}

RegexCharSet RegexCharSet::any() {
  return range(0, kMaxCodePoint);
}

RegexCharSet RegexCharSet::digit() {
  return range('0', '9');
}

RegexCharSet RegexCharSet::word() {
  RegexCharSet s = range('0', '9');
  s.add('A', 'Z');
  s.add('_', '_');
  s.add('a', 'z');
  return s;
}

RegexCharSet RegexCharSet::space() {
  // ECMA-262 WhiteSpace and LineTerminator: TAB LF VT FF CR SP NBSP, U+1680,
  // U+2000..U+200A, LS, PS, NNBSP, MMSP, IDEOGRAPHIC SPACE, ZWNBSP.
  RegexCharSet s = range('\t', '\r');
  for (uint32_t cp : {0x20u, 0xA0u, 0x1680u, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u, 0xFEFFu})
    s.add(cp, cp);
  s.add(0x2000, 0x200A);
  return s;
}

void RegexCharSet::add(uint32_t lo, uint32_t hi) {
  assert(lo <= hi && hi <= kMaxCodePoint);
  if (lo < kSurrogateLo) add_scalar_range(lo, std::min(hi, kSurrogateLo - 1));
  if (hi > kSurrogateHi) add_scalar_range(std::max(lo, kSurrogateHi + 1), hi);
}

void RegexCharSet::add(const RegexCharSet& other) {
  for (const CodePointRange& r : other.ranges_) add_scalar_range(r.lo, r.hi);
}

void RegexCharSet::add_scalar_range(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  // The first range that could touch [lo, hi]: its hi + 1 >= lo.
  auto first = std::lower_bound(ranges_.begin(), ranges_.end(), lo,
                                [](const CodePointRange& r, uint32_t v) { return r.hi + 1 < v; });
  auto last = first;
  while (last != ranges_.end() && last->lo <= hi + 1) {
    lo = std::min(lo, last->lo);
    hi = std::max(hi, last->hi);
    ++last;
  }
  first = ranges_.erase(first, last);
  ranges_.insert(first, CodePointRange{lo, hi});
}

RegexCharSet RegexCharSet::complement() const {
  RegexCharSet out;
  uint32_t next = 0;
  for (const CodePointRange& r : ranges_) {
    if (r.lo > next) out.add(next, r.lo - 1);
    next = r.hi + 1;
  }
  if (next <= kMaxCodePoint) out.add(next, kMaxCodePoint);
  return out;
}

bool RegexCharSet::contains(uint32_t cp) const {
  auto it = std::lower_bound(ranges_.begin(), ranges_.end(), cp,
                             [](const CodePointRange& r, uint32_t v) { return r.hi < v; });
  return it != ranges_.end() && it->lo <= cp;
}

}  // namespace pagoda::grammar
