// Unicode character properties and normalization forms from tables generated
// out of ICU 72 (Unicode 15.0; see gen/gen_unicode_data.cpp). The predicates
// follow Rust's char methods, which Hugging Face tokenizers uses.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace pagoda::tok {

// Values as ICU's UCharCategory.
enum class GeneralCategory : uint8_t {
  kCn,
  kLu,
  kLl,
  kLt,
  kLm,
  kLo,
  kMn,
  kMe,
  kMc,
  kNd,
  kNl,
  kNo,
  kZs,
  kZl,
  kZp,
  kCc,
  kCf,
  kCo,
  kCs,
  kPd,
  kPs,
  kPe,
  kPc,
  kPo,
  kSm,
  kSc,
  kSk,
  kSo,
  kPi,
  kPf,
};

// Unicode 16.0, as Rust and the Oniguruma of tokenizers 0.23: ICU 72's 15.0
// tables plus the characters assigned in 15.1 and 16.0.
GeneralCategory general_category(uint32_t cp);
// PCRE2 10.42 knows Unicode 14.0: the ranges ("\x{lo}-\x{hi}...", for a
// character class) of the characters assigned since then whose general
// category starts with `property` ("L", "Lu", "N", ...); "" otherwise.
std::string class_additions_after_unicode14(std::string_view property);
bool is_white_space(uint32_t cp);   // White_Space (Rust char::is_whitespace)
bool is_alphabetic(uint32_t cp);    // Alphabetic
bool is_numeric(uint32_t cp);       // Nd | Nl | No (Rust char::is_numeric)
bool is_alphanumeric(uint32_t cp);  // Alphabetic or numeric
bool is_punctuation(uint32_t cp);   // Pc | Pd | Ps | Pe | Pi | Pf | Po
bool is_mark(uint32_t cp);          // Mn | Mc | Me
bool is_other(uint32_t cp);         // Cc | Cf | Cs | Co | Cn
uint8_t combining_class(uint32_t cp);

// The same as of older Unicode versions, for the crates that tokenizers uses:
// unicode_categories (Unicode 8.0: BertNormalizer, BertPreTokenizer,
// Punctuation) and unicode-normalization-alignments (Unicode 9.0: StripAccents).
GeneralCategory general_category_v8(uint32_t cp);
bool is_punctuation_v8(uint32_t cp);  // P* in 8.0
bool is_control_v8(uint32_t cp);      // Cc | Cf | Co | Cs in 8.0
bool is_mark_v9(uint32_t cp);         // M* in 9.0

// Appends the full lowercase mapping of cp (Rust char::to_lowercase).
void append_lowercase(std::string& out, uint32_t cp);

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };
// The normalization forms use the data of characters assigned by Unicode 9.0
// (what tokenizers' unicode-normalization-alignments crate knows); newer
// characters pass through unchanged.

// `text` must be valid UTF-8. Returns the normalized text.
std::string normalize(std::string_view text, NormalForm form);

// True when a quick check proves `text` is already in `form` (no char whose
// quick-check value is not Yes or whose combining class is not 0).
bool is_normalized_quick(std::string_view text, NormalForm form);

}  // namespace pagoda::tok
