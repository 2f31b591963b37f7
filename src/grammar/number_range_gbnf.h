// GBNF expressions for JSON numbers within bounds (JSON Schema minimum,
// maximum, exclusiveMinimum, exclusiveMaximum): digit-by-digit range grammars.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "grammar/json_decimal.h"

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

// A bound of a number range: an exact decimal, inclusive or exclusive.
struct NumberBound {
  JsonDecimal value;
  bool exclusive = false;
};

// JSON numbers without exponent (an integral part as digit_range_gbnf writes
// them, an optional fraction of at most kMaxFractionDigits digits) whose value
// lies within the bounds, decided digit by digit: an integral part strictly
// between the bounds' takes any fraction, one equal to a bound's integral
// part a fraction compared digit by digit with the bound's. Never "-0".
// Returns "" when no such number lies within them.
std::string number_range_gbnf(std::optional<NumberBound> lo, std::optional<NumberBound> hi);

}  // namespace pagoda::grammar
