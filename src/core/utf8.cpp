#include "core/utf8.h"

namespace pagoda {

namespace {

// Valid range of the second byte for a lead byte (Unicode Table 3-7); the
// remaining continuation bytes are always 0x80..0xBF.
struct LeadInfo {
  uint8_t len;  // 0: invalid lead byte
  uint8_t lo;
  uint8_t hi;
};

LeadInfo lead_info(unsigned char c) {
  if (c < 0x80) return {1, 0, 0};
  if (c < 0xC2) return {0, 0, 0};
  if (c < 0xE0) return {2, 0x80, 0xBF};
  if (c == 0xE0) return {3, 0xA0, 0xBF};
  if (c == 0xED) return {3, 0x80, 0x9F};
  if (c < 0xF0) return {3, 0x80, 0xBF};
  if (c == 0xF0) return {4, 0x90, 0xBF};
  if (c < 0xF4) return {4, 0x80, 0xBF};
  if (c == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

}  // namespace

size_t valid_sequence_len(std::string_view s, size_t i, size_t* valid_prefix) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  LeadInfo info = lead_info(p[i]);
  if (info.len == 0) {
    *valid_prefix = 1;
    return 0;
  }
  size_t k = 1;
  for (; k < info.len; ++k) {
    if (i + k >= s.size()) break;
    unsigned char b = p[i + k];
    unsigned char lo = k == 1 ? info.lo : 0x80;
    unsigned char hi = k == 1 ? info.hi : 0xBF;
    if (b < lo || b > hi) break;
  }
  *valid_prefix = k;
  return k == info.len ? k : 0;
}

size_t find_invalid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t prefix = 0;
    const size_t len = valid_sequence_len(s, i, &prefix);
    if (len == 0) return i;
    i += len;
  }
  return std::string_view::npos;
}

bool is_valid_utf8(std::string_view s) {
  return find_invalid_utf8(s) == std::string_view::npos;
}

size_t count_code_points(std::string_view s) {
  size_t count = 0;
  for (unsigned char c : s) count += (c & 0xC0) != 0x80;
  return count;
}

std::string to_valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 8);
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      out.push_back(s[i++]);
      continue;
    }
    size_t prefix = 0;
    size_t len = valid_sequence_len(s, i, &prefix);
    if (len > 0) {
      out.append(s.substr(i, len));
      i += len;
    } else {
      append_utf8(out, kReplacementChar);
      i += prefix;
    }
  }
  return out;
}

bool ends_with_incomplete_utf8(std::string_view s) {
  // An incomplete sequence is at most 3 bytes: a lead byte and continuations.
  size_t n = s.size();
  for (size_t back = 1; back <= 3 && back <= n; ++back) {
    size_t i = n - back;
    auto c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) == 0x80) continue;  // continuation: keep looking for the lead
    size_t prefix = 0;
    size_t len = valid_sequence_len(s, i, &prefix);
    return len == 0 && prefix == back && lead_info(c).len > back;
  }
  return false;
}

}  // namespace pagoda
