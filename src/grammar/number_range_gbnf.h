// GBNF expressions for JSON numbers within bounds (JSON Schema minimum,
// maximum, exclusiveMinimum, exclusiveMaximum): digit-by-digit range grammars.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace pagoda::grammar {

// Digits a number without an upper bound may have (JSON Schema numbers are
// unbounded; a bound keeps random-weight models from writing forever).
constexpr int kMaxUnboundedDigits = 16;

// The decimal digits (no sign, no leading zeros) of exactly the integers in
// [lo, hi]; without hi, every integer >= lo with at most
// max(kMaxUnboundedDigits, digits of lo) digits. Requires lo <= hi.
std::string digit_range_gbnf(uint64_t lo, std::optional<uint64_t> hi);

// JSON integers in [lo, hi] (either side may be open): "-" before negative
// ones, never "-0". Returns "" when the range is empty.
std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

// A bound of a number range: an integer value, inclusive or exclusive.
struct NumberBound {
  int64_t value = 0;
  bool exclusive = false;
};

// JSON numbers (an integral part and an optional fraction of at most 16
// digits, no exponent) whose value lies within the bounds. Returns "" when no
// number does.
std::string number_range_gbnf(std::optional<NumberBound> lo, std::optional<NumberBound> hi);

}  // namespace pagoda::grammar
