#include "grammar/utf8_ranges.h"

#include <algorithm>

namespace pagoda::grammar {

namespace {

constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kSurrogateHi = 0xDFFF;

int encode(uint32_t cp, uint8_t* out) {
  if (cp < 0x80) {
    out[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
  out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  return 4;
}

// Splits [lo, hi] until each piece has one encoded length and, below the
// first byte where the ends differ, full continuation ranges; each piece is
// then one byte-range sequence. Depth is bounded (at most ~3 splits per level).
void split(uint32_t lo, uint32_t hi, std::vector<ByteSequence>& out) {
  static constexpr uint32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF};
  for (uint32_t end : kLengthEnds) {
    if (lo <= end && end < hi) {
      split(lo, end, out);
      split(end + 1, hi, out);
      return;
    }
  }
  for (int i = 1; i < 4; ++i) {
    const uint32_t mask = (uint32_t{1} << (6 * i)) - 1;
    if ((lo & ~mask) == (hi & ~mask)) continue;
    if ((lo & mask) != 0) {
      split(lo, lo | mask, out);
      split((lo | mask) + 1, hi, out);
      return;
    }
    if ((hi & mask) != mask) {
      split(lo, (hi & ~mask) - 1, out);
      split(hi & ~mask, hi, out);
      return;
    }
  }
  uint8_t a[4], b[4];
  const int n = encode(lo, a);
  encode(hi, b);
  ByteSequence seq;
  for (int i = 0; i < n; ++i) seq.push_back({a[i], b[i]});
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<CodePointRange> normalize_ranges(std::vector<CodePointRange> ranges, bool negate) {
  std::vector<CodePointRange> merged;
  for (CodePointRange& r : ranges) r.hi = std::min(r.hi, kMaxCodePoint);
  std::sort(ranges.begin(), ranges.end());
  for (const CodePointRange& r : ranges) {
    if (r.lo > r.hi) continue;
    if (!merged.empty() && r.lo <= merged.back().hi + 1) {
      merged.back().hi = std::max(merged.back().hi, r.hi);
    } else {
      merged.push_back(r);
    }
  }
  if (negate) {
    std::vector<CodePointRange> complement;
    uint32_t next = 0;
    for (const CodePointRange& r : merged) {
      if (r.lo > next) complement.push_back({next, r.lo - 1});
      next = r.hi + 1;
    }
    if (next <= kMaxCodePoint) complement.push_back({next, kMaxCodePoint});
    merged.swap(complement);
  }
  std::vector<CodePointRange> out;
  for (const CodePointRange& r : merged) {
    if (r.hi < kSurrogateLo || r.lo > kSurrogateHi) {
      out.push_back(r);
      continue;
    }
    if (r.lo < kSurrogateLo) out.push_back({r.lo, kSurrogateLo - 1});
    if (r.hi > kSurrogateHi) out.push_back({kSurrogateHi + 1, r.hi});
  }
  return out;
}

std::vector<ByteSequence> utf8_sequences(const std::vector<CodePointRange>& ranges) {
  std::vector<ByteSequence> out;
  for (const CodePointRange& r : ranges) split(r.lo, r.hi, out);
  return out;
}

}  // namespace pagoda::grammar
