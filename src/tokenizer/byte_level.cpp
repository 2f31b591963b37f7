#include "tokenizer/byte_level.h"

#include "core/utf8.h"

namespace pagoda::tok {

namespace {

struct Tables {
  std::array<uint32_t, 256> to_char{};
  std::array<int16_t, 324> to_byte{};  // indexed by code point; every mapped char is < 324
};

const Tables& tables() {
  static const Tables t = [] {
    Tables t;
    t.to_byte.fill(-1);
    auto printable = [](int b) {
      return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    };
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      uint32_t c = printable(b) ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + n++);
      t.to_char[b] = c;
      t.to_byte[c] = static_cast<int16_t>(b);
    }
    return t;
  }();
  return t;
}

}  // namespace

uint32_t byte_to_char(uint8_t b) {
  return tables().to_char[b];
}

std::optional<uint8_t> char_to_byte(uint32_t cp) {
  const Tables& t = tables();
  if (cp >= t.to_byte.size() || t.to_byte[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(t.to_byte[cp]);
}

std::optional<std::string> byte_level_decode(std::string_view piece) {
  if (!is_valid_utf8(piece)) return std::nullopt;
  std::string out;
  out.reserve(piece.size());
  size_t i = 0;
  while (i < piece.size()) {
    auto b = char_to_byte(next_code_point(piece, i));
    if (!b) return std::nullopt;
    out.push_back(static_cast<char>(*b));
  }
  return out;
}

std::string byte_level_encode(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(out, byte_to_char(static_cast<uint8_t>(c)));
  return out;
}

}  // namespace pagoda::tok
