// Exact decimal values of JSON numbers, for the bound keywords of a schema
// (minimum, maximum, exclusiveMinimum, exclusiveMaximum): nlohmann parses
// numbers to doubles, which round 0.1 and 0.10000000000000000001 alike, so the
// converter reads each bound's value from the number's text in the schema.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "core/result.h"
#include "grammar/json_schema_keywords.h"

namespace pagoda::grammar {

// Fraction digits a generated number may have (number_range_gbnf.h's
// grammars and the kNumber primitive write at most this many).
constexpr size_t kMaxFractionDigits = 16;

// A decimal value, exact as far as numbers of at most kMaxFractionDigits
// fraction digits can tell: `fraction` holds the first kMaxFractionDigits + 1
// fraction digits without trailing zeros, where digit kMaxFractionDigits + 1
// (index 16) is made non-zero when any digit from there on is, so comparing
// against such numbers gives the exact answer.
struct JsonDecimal {
  bool negative = false;  // never for zero
  uint64_t integral = 0;  // the integral part's magnitude
  std::string fraction;   // digits after the point, no trailing '0'

  bool is_zero() const { return integral == 0 && fraction.empty(); }
  JsonDecimal magnitude() const { return {false, integral, fraction}; }
  // The largest integer <= the value, and the smallest >= it.
  int64_t floor() const;
  int64_t ceil() const;
  std::string text() const;  // "-12.5", "0"
};

std::strong_ordering operator<=>(const JsonDecimal& a, const JsonDecimal& b);
inline bool operator==(const JsonDecimal& a, const JsonDecimal& b) {
  return (a <=> b) == std::strong_ordering::equal;
}

// The value of a JSON number's text (RFC 8259: -?int frac? exp?), nullopt
// when the text is no JSON number or its magnitude is 10^19 or more.
std::optional<JsonDecimal> parse_json_decimal(std::string_view text);

// The exact values of every number that is directly the value of a bound
// keyword in a schema text, found again by the double nlohmann parsed it to
// (allOf merging copies bound values, so positions in the schema do not
// follow them).
class BoundDecimals {
 public:
  // Reads `schema_text`, which must be valid JSON.
  static BoundDecimals read(std::string_view schema_text);

  // The exact value of `number`, a bound's value in the parsed schema (for a
  // number that is not in the text, that of its shortest round-trip form). An
  // error when two different bounds of the schema parse to the same double
  // (then which one `number` came from is unknown) or the magnitude is 10^19
  // or more.
  Result<JsonDecimal> exact(const SchemaJson& number) const;

  // Records the number written `text` that nlohmann parsed to `value`.
  void add(double value, std::string_view text);

 private:
  struct Entry {
    std::string text;
    std::optional<JsonDecimal> value;
    std::string other_text;  // a different value with the same double, if any
  };
  std::unordered_map<double, Entry> by_double_;
};

}  // namespace pagoda::grammar
