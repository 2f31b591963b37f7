#include "grammar/json_decimal.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <vector>

namespace pagoda::grammar {

namespace {

constexpr std::array<std::string_view, 4> kBoundKeywords = {"minimum", "maximum",
                                                            "exclusiveMinimum", "exclusiveMaximum"};

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

// nlohmann SAX events: hands the numbers that directly follow a bound keyword
// to BoundDecimals::add.
class BoundNumberSax {
 public:
  explicit BoundNumberSax(BoundDecimals& out) : out_(out) {}

  bool null() { return value(); }
  bool boolean(bool) { return value(); }
  bool number_integer(SchemaJson::number_integer_t v) {
    return number(static_cast<double>(v), std::to_string(v));
  }
  bool number_unsigned(SchemaJson::number_unsigned_t v) {
    return number(static_cast<double>(v), std::to_string(v));
  }
  bool number_float(SchemaJson::number_float_t v, const SchemaJson::string_t& text) {
    return number(v, text);
  }
  bool string(SchemaJson::string_t&) { return value(); }
  bool binary(SchemaJson::binary_t&) { return value(); }
  bool start_object(size_t) { return value(); }
  bool key(SchemaJson::string_t& k) {
    after_bound_key_ =
        std::find(kBoundKeywords.begin(), kBoundKeywords.end(), k) != kBoundKeywords.end();
    return true;
  }
  bool end_object() { return value(); }
  bool start_array(size_t) { return value(); }
  bool end_array() { return value(); }
  bool parse_error(size_t, const std::string&, const SchemaJson::exception&) { return false; }

 private:
  bool value() {
    after_bound_key_ = false;
    return true;
  }
  bool number(double v, std::string_view text) {
    if (after_bound_key_) out_.add(v, text);
    return value();
  }

  BoundDecimals& out_;
  bool after_bound_key_ = false;
};

}  // namespace

int64_t JsonDecimal::floor() const {
  const auto k = static_cast<int64_t>(integral);
  return negative ? -k - (fraction.empty() ? 0 : 1) : k;
}

int64_t JsonDecimal::ceil() const {
  const auto k = static_cast<int64_t>(integral);
  return negative ? -k : k + (fraction.empty() ? 0 : 1);
}

std::string JsonDecimal::text() const {
  return fmt::format("{}{}{}{}", negative ? "-" : "", integral, fraction.empty() ? "" : ".",
                     fraction);
}

std::strong_ordering operator<=>(const JsonDecimal& a, const JsonDecimal& b) {
  if (a.negative != b.negative)
    return a.negative ? std::strong_ordering::less : std::strong_ordering::greater;
  // Digit strings without trailing zeros compare as their fractions do.
  auto magnitude =
      a.integral != b.integral ? a.integral <=> b.integral : a.fraction.compare(b.fraction) <=> 0;
  return a.negative ? 0 <=> magnitude : magnitude;
}

std::optional<JsonDecimal> parse_json_decimal(std::string_view text) {
  size_t i = 0;
  const bool negative = i < text.size() && text[i] == '-';
  if (negative) ++i;
  // mantissa = the integral and fraction digits; the point after `point` of them.
  std::string mantissa;
  const size_t int_start = i;
  while (i < text.size() && is_digit(text[i])) mantissa += text[i++];
  const size_t num_int_digits = i - int_start;
  if (num_int_digits == 0 || (num_int_digits > 1 && text[int_start] == '0')) return std::nullopt;
  if (i < text.size() && text[i] == '.') {
    const size_t frac_start = ++i;
    while (i < text.size() && is_digit(text[i])) mantissa += text[i++];
    if (i == frac_start) return std::nullopt;
  }
  int64_t exponent = 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool exp_negative = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) exp_negative = text[i++] == '-';
    const size_t exp_start = i;
    for (; i < text.size() && is_digit(text[i]); ++i)  // saturates far beyond any kept digit
      exponent = std::min<int64_t>(exponent * 10 + (text[i] - '0'), int64_t{1} << 40);
    if (i == exp_start) return std::nullopt;
    if (exp_negative) exponent = -exponent;
  }
  if (i != text.size()) return std::nullopt;
  JsonDecimal out;
  const size_t first = mantissa.find_first_not_of('0');
  if (first == std::string::npos) return out;  // zero, also "-0.0e5"
  // Without leading zeros: the value is 0.mantissa * 10^point.
  int64_t point = static_cast<int64_t>(num_int_digits) + exponent - static_cast<int64_t>(first);
  mantissa.erase(0, first);
  if (point > 19) return std::nullopt;
  const auto digit = [&](int64_t k) {  // digit k of 0.mantissa, '0' beyond it
    return k >= 0 && k < static_cast<int64_t>(mantissa.size()) ? mantissa[k] : '0';
  };
  for (int64_t k = 0; k < point; ++k) {
    const auto d = static_cast<uint64_t>(digit(k) - '0');
    if (out.integral > (UINT64_MAX - d) / 10) return std::nullopt;
    out.integral = out.integral * 10 + d;
  }
  if (out.integral >= 10'000'000'000'000'000'000ULL) return std::nullopt;
  for (size_t j = 0; j < kMaxFractionDigits; ++j) out.fraction += digit(point + j);
  const int64_t rest = point + static_cast<int64_t>(kMaxFractionDigits);
  bool rest_non_zero = false;
  for (int64_t k = std::max<int64_t>(rest, 0); k < static_cast<int64_t>(mantissa.size()); ++k)
    rest_non_zero = rest_non_zero || mantissa[k] != '0';
  out.fraction += rest_non_zero ? '1' : '0';
  out.fraction.erase(out.fraction.find_last_not_of('0') + 1);
  if (out.fraction.find_first_not_of('0') == std::string::npos) out.fraction.clear();
  out.negative = negative && !out.is_zero();
  return out;
}

BoundDecimals BoundDecimals::read(std::string_view schema_text) {
  BoundDecimals out;
  BoundNumberSax sax(out);
  SchemaJson::sax_parse(schema_text, &sax);
  return out;
}

void BoundDecimals::add(double value, std::string_view text) {
  const std::optional<JsonDecimal> exact = parse_json_decimal(text);
  auto [it, inserted] = by_double_.try_emplace(value, Entry{std::string(text), exact, ""});
  if (!inserted && it->second.other_text.empty() && it->second.value != exact)
    it->second.other_text = text;
}

Result<JsonDecimal> BoundDecimals::exact(const SchemaJson& number) const {
  const auto it = by_double_.find(number.get<double>());
  const std::string text = it == by_double_.end() ? number.dump() : it->second.text;
  if (it != by_double_.end() && !it->second.other_text.empty())
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{} and {} differ beyond double precision, so which of them "
                                  "this bound is cannot be told",
                                  it->second.text, it->second.other_text));
  const std::optional<JsonDecimal> value =
      it == by_double_.end() ? parse_json_decimal(text) : it->second.value;
  if (!value)
    return make_error(ErrorCode::kInvalidArgument, fmt::format("{} is out of range", text));
  return *value;
}

}  // namespace pagoda::grammar
