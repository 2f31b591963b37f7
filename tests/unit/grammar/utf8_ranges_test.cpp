// utf8_sequences against a direct encoding of every code point.
#include "grammar/utf8_ranges.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "core/utf8.h"

namespace pagoda::grammar {
namespace {

bool in_sequences(const std::vector<ByteSequence>& seqs, const std::string& bytes) {
  int hits = 0;
  for (const ByteSequence& s : seqs) {
    if (s.size() != bytes.size()) continue;
    bool ok = true;
    for (size_t i = 0; i < s.size(); ++i) {
      const auto b = static_cast<uint8_t>(bytes[i]);
      ok = ok && b >= s[i].first && b <= s[i].second;
    }
    hits += ok;
  }
  EXPECT_LE(hits, 1) << "sequences overlap";
  return hits == 1;
}

bool is_surrogate(uint32_t cp) {
  return cp >= 0xD800 && cp <= 0xDFFF;
}

TEST(Utf8Ranges, EveryCodePointOfRandomRangesAndNoOther) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    std::vector<CodePointRange> ranges;
    for (int k = 0; k < 3; ++k) {
      uint32_t a = rng() % 0x110000, b = rng() % 0x110000;
      if (trial % 2) b = a + rng() % 3000;
      ranges.push_back({std::min(a, b), std::max(a, b)});
    }
    const bool negate = trial % 3 == 0;
    auto norm = normalize_ranges(ranges, negate);
    auto seqs = utf8_sequences(norm);
    for (int probe = 0; probe < 3000; ++probe) {
      uint32_t cp = probe < 1000 ? rng() % 0x110000 : ranges[probe % 3].lo + rng() % 4000 - 2000;
      if (cp > kMaxCodePoint || is_surrogate(cp)) continue;
      bool in = false;
      for (auto& r : ranges) in = in || (cp >= r.lo && cp <= r.hi);
      if (negate) in = !in;
      std::string bytes;
      append_utf8(bytes, cp);
      EXPECT_EQ(in_sequences(seqs, bytes), in) << std::hex << cp;
    }
  }
}

TEST(Utf8Ranges, AnyCodePointIsValidUtf8Only) {
  auto seqs = utf8_sequences(normalize_ranges({{0, kMaxCodePoint}}, false));
  for (uint32_t cp = 0; cp <= kMaxCodePoint; cp += 17) {
    std::string bytes;
    append_utf8(bytes, cp);
    EXPECT_EQ(in_sequences(seqs, bytes), !is_surrogate(cp)) << std::hex << cp;
  }
  EXPECT_FALSE(in_sequences(seqs, "\xC0\x80"));          // overlong
  EXPECT_FALSE(in_sequences(seqs, "\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(in_sequences(seqs, "\xF4\x90\x80\x80"));  // beyond U+10FFFF
}

}  // namespace
}  // namespace pagoda::grammar
