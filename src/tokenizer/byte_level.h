// GPT-2's reversible byte <-> printable-character mapping used by byte-level
// BPE vocabularies ("Ġ" is the space byte 0x20).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pagoda::tok {

// The code point that stands for byte b.
uint32_t byte_to_char(uint8_t b);
// The byte that code point cp stands for, if any.
std::optional<uint8_t> char_to_byte(uint32_t cp);

// Decodes a vocabulary piece written in the byte alphabet into raw bytes;
// nullopt when some char is outside the alphabet.
std::optional<std::string> byte_level_decode(std::string_view piece);
// Encodes raw bytes into the byte alphabet.
std::string byte_level_encode(std::string_view bytes);

}  // namespace pagoda::tok
