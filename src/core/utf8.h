// UTF-8 helpers shared by the tokenizer and the Jinja interpreter: decoding,
// encoding, validation (Unicode Table 3-7: no overlongs, no surrogates, at
// most U+10FFFF) and lossy repair (invalid bytes -> U+FFFD, like Rust's
// String::from_utf8_lossy and Python's errors="replace").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace pagoda {

constexpr uint32_t kReplacementChar = 0xFFFD;

// Length (1..4) of the sequence starting with lead byte `c` of VALID UTF-8.
inline size_t utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if (c < 0xE0) return 2;
  if (c < 0xF0) return 3;
  return 4;
}

// Decodes the code point at s[i] of VALID UTF-8 and advances i past it. On
// invalid input the value is unspecified, but nothing past s is read.
inline uint32_t next_code_point(std::string_view s, size_t& i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + i;
  const uint32_t c = p[0];
  if (c < 0x80) {
    i += 1;
    return c;
  }
  const size_t len = utf8_len(static_cast<unsigned char>(c));
  uint32_t cp = len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (i + k < s.size() ? (p[k] & 0x3F) : 0);
  i += len;
  return cp;
}

// Decodes the code point that ends at s[end) of VALID UTF-8; `end` moves to its start.
inline uint32_t prev_code_point(std::string_view s, size_t& end) {
  size_t start = end - 1;
  while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
  size_t i = start;
  uint32_t cp = next_code_point(s, i);
  end = start;
  return cp;
}

inline void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Length of the valid UTF-8 sequence at s[i], or 0 when the bytes there are
// not a complete valid sequence; *valid_prefix receives how many bytes form a
// valid but possibly truncated prefix (>= 1 for an invalid sequence: the
// maximal subpart that one U+FFFD replaces).
size_t valid_sequence_len(std::string_view s, size_t i, size_t* valid_prefix);

bool is_valid_utf8(std::string_view s);

// Byte offset of the first byte that starts no complete valid sequence, or
// std::string_view::npos when s is valid UTF-8.
size_t find_invalid_utf8(std::string_view s);

// Code points in valid UTF-8 text (on invalid text, every byte that is not a
// continuation byte counts one).
size_t count_code_points(std::string_view s);

// Copy of s with each maximal invalid subpart replaced by U+FFFD.
std::string to_valid_utf8(std::string_view s);

// True when the last bytes of s are a valid but incomplete UTF-8 sequence
// (more continuation bytes could still complete it).
bool ends_with_incomplete_utf8(std::string_view s);

}  // namespace pagoda
