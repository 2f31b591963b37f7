#include "grammar/number_range_gbnf.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <string_view>
#include <vector>

namespace pagoda::grammar {

namespace {

std::string join_alternatives(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i == 0 ? " " : " | ") + alts[i];
  return out + " )";
}

std::string digit_class(char lo, char hi) {
  if (lo == hi) return fmt::format("\"{}\"", lo);
  return fmt::format("[{}-{}]", lo, hi);
}

std::string any_digits(size_t n) {
  if (n == 0) return "";
  if (n == 1) return "[0-9]";
  return fmt::format("[0-9]{{{}}}", n);
}

// The digit strings of one length n from a to b (a <= b, both n digits).
std::string same_length_range(std::string_view a, std::string_view b) {
  const size_t n = a.size();
  if (n == 0) return "";
  if (a == b) return fmt::format("\"{}\"", a);
  if (a[0] == b[0]) {
    const std::string rest = same_length_range(a.substr(1), b.substr(1));
    return fmt::format("\"{}\" {}", a[0], rest);
  }
  const std::string_view a_rest = a.substr(1), b_rest = b.substr(1);
  const bool a_rest_zero = a_rest.find_first_not_of('0') == std::string_view::npos;
  const bool b_rest_nine = b_rest.find_first_not_of('9') == std::string_view::npos;
  const std::string spaced_any = n > 1 ? fmt::format(" {}", any_digits(n - 1)) : "";
  std::vector<std::string> alts;
  char mid_lo = static_cast<char>(a[0] + 1), mid_hi = static_cast<char>(b[0] - 1);
  if (a_rest_zero) {
    mid_lo = a[0];
  } else {
    alts.push_back(
        fmt::format("\"{}\" {}", a[0], same_length_range(a_rest, std::string(n - 1, '9'))));
  }
  if (b_rest_nine) mid_hi = b[0];
  if (mid_lo <= mid_hi) alts.push_back(digit_class(mid_lo, mid_hi) + spaced_any);
  if (!b_rest_nine) {
    alts.push_back(
        fmt::format("\"{}\" {}", b[0], same_length_range(std::string(n - 1, '0'), b_rest)));
  }
  return join_alternatives(alts);
}

uint64_t smallest_with_digits(size_t n) {
  uint64_t v = 1;
  for (size_t i = 1; i < n; ++i) v *= 10;
  return n == 1 ? 0 : v;
}

uint64_t largest_with_digits(size_t n) {
  uint64_t v = 9;
  for (size_t i = 1; i < n; ++i) v = v * 10 + 9;
  return v;
}

// "[0-9]{min,max}"; "" when max == 0.
std::string digit_run(size_t min, size_t max) {
  if (max == 0) return "";
  if (min == max) return any_digits(max);
  if (min == 0 && max == 1) return "[0-9]?";
  return fmt::format("[0-9]{{{},{}}}", min, max);
}

// A bound on the fraction f of a number's magnitude k.f: 0.f >= 0.digits
// (lower) or <= (upper), strictly when exclusive; digits have no trailing '0'.
struct FractionBound {
  std::string_view digits;
  bool exclusive = false;
};

char digit_at(const FractionBound& b, size_t p) {
  return p < b.digits.size() ? b.digits[p] : '0';
}

// Whether a fraction whose digits 0..p-1 equal those of each given bound,
// and that ends there, lies within the bounds (its rest is zero: equal to a
// bound whose rest is zero, below one whose rest is not).
bool ends_within(size_t p, const std::optional<FractionBound>& lo,
                 const std::optional<FractionBound>& hi) {
  if (lo && !(p >= lo->digits.size() && !lo->exclusive)) return false;
  return !hi || p < hi->digits.size() || !hi->exclusive;
}

// The digit strings d (at most kMaxFractionDigits - p long; at least one
// digit when `must_continue`) that may follow fraction digits 0..p-1 equal to
// those of each given bound (a bound already passed is not given) so that the
// whole fraction lies within the bounds. "" when only the empty string does,
// nullopt when none does.
std::optional<std::string> fraction_rest(size_t p, const std::optional<FractionBound>& lo,
                                         const std::optional<FractionBound>& hi,
                                         bool must_continue) {
  const size_t room = kMaxFractionDigits - p;
  const bool can_end = !must_continue && ends_within(p, lo, hi);
  std::vector<std::string> alts;
  if (room > 0) {
    const char a = lo ? digit_at(*lo, p) : '0';
    const char b = hi ? digit_at(*hi, p) : '9';
    // Digits strictly between the bounds' digits leave both bounds behind.
    const char free_lo = lo ? static_cast<char>(a + 1) : '0';
    const char free_hi = hi ? static_cast<char>(b - 1) : '9';
    const std::string rest = digit_run(0, room - 1);
    if (free_lo <= free_hi)
      alts.push_back(digit_class(free_lo, free_hi) + (rest.empty() ? "" : " " + rest));
    auto follow = [&](char d, const std::optional<FractionBound>& next_lo,
                      const std::optional<FractionBound>& next_hi) {
      if (auto next = fraction_rest(p + 1, next_lo, next_hi, false))
        alts.push_back(fmt::format("\"{}\"", d) + (next->empty() ? "" : " " + *next));
    };
    if (lo && hi && a == b) {
      follow(a, lo, hi);
    } else {
      if (lo && (!hi || a < b)) follow(a, lo, std::nullopt);
      if (hi && (!lo || a < b)) follow(b, std::nullopt, hi);
    }
  }
  if (alts.empty()) return can_end ? std::optional<std::string>("") : std::nullopt;
  if (!can_end) return join_alternatives(alts);
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i == 0 ? " " : " | ") + alts[i];
  return out + " )?";
}

// The fraction part ("" or "." and 1..kMaxFractionDigits digits) of numbers
// whose fraction lies within the bounds: "" when only no fraction does,
// nullopt when none does.
std::optional<std::string> fraction_gbnf(const std::optional<FractionBound>& lo,
                                         const std::optional<FractionBound>& hi) {
  const std::optional<std::string> digits = fraction_rest(0, lo, hi, true);
  const bool can_be_absent = ends_within(0, lo, hi);
  if (!digits) return can_be_absent ? std::optional<std::string>("") : std::nullopt;
  return fmt::format("( \".\" {} ){}", *digits, can_be_absent ? "?" : "");
}

FractionBound fraction_bound(const NumberBound& b) {
  return {b.value.fraction, b.exclusive};
}

// Appends the alternatives "<prefix><digits of k><fraction>" of exactly the
// magnitudes k.f within [lo, hi] (non-negative bounds; lo inclusive 0 when
// absent).
void add_magnitudes(const NumberBound& lo, const std::optional<NumberBound>& hi,
                    std::string_view prefix, std::vector<std::string>& alts) {
  if (hi && (lo.value > hi->value || (lo.value == hi->value && (lo.exclusive || hi->exclusive))))
    return;
  auto emit = [&](uint64_t a, std::optional<uint64_t> b, std::optional<std::string> fraction) {
    if (!fraction) return;
    alts.push_back(std::string(prefix) + digit_range_gbnf(a, b) +
                   (fraction->empty() ? "" : " " + *fraction));
  };
  const uint64_t k_lo = lo.value.integral;
  if (hi && hi->value.integral == k_lo) {
    emit(k_lo, k_lo, fraction_gbnf(fraction_bound(lo), fraction_bound(*hi)));
    return;
  }
  emit(k_lo, k_lo, fraction_gbnf(fraction_bound(lo), std::nullopt));
  const std::optional<std::string> any_fraction = fraction_gbnf(std::nullopt, std::nullopt);
  if (!hi) {
    emit(k_lo + 1, std::nullopt, any_fraction);
    return;
  }
  const uint64_t k_hi = hi->value.integral;
  if (k_lo + 1 < k_hi) emit(k_lo + 1, k_hi - 1, any_fraction);
  emit(k_hi, k_hi, fraction_gbnf(std::nullopt, fraction_bound(*hi)));
}

}  // namespace

std::string digit_range_gbnf(uint64_t lo, std::optional<uint64_t> hi) {
  const std::string lo_digits = std::to_string(lo);
  const size_t max_digits = std::max<size_t>(kMaxUnboundedDigits, lo_digits.size());
  const size_t hi_len = hi ? std::to_string(*hi).size() : max_digits;
  std::vector<std::string> alts;
  for (size_t n = lo_digits.size(); n <= hi_len; ++n) {
    const uint64_t a = std::max(lo, smallest_with_digits(n));
    if (!hi && n > lo_digits.size()) {  // every longer number, up to max_digits
      alts.push_back(n == max_digits ? fmt::format("[1-9] {}", any_digits(n - 1))
                                     : fmt::format("[1-9] [0-9]{{{},{}}}", n - 1, max_digits - 1));
      break;
    }
    const uint64_t b = hi ? std::min(*hi, largest_with_digits(n)) : largest_with_digits(n);
    alts.push_back(same_length_range(std::to_string(a), std::to_string(b)));
  }
  return join_alternatives(alts);
}

std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  if (lo && hi && *lo > *hi) return "";
  std::vector<std::string> alts;
  if (!lo || *lo < 0) {  // negative: magnitudes [max(1, -hi), -lo]
    const uint64_t mag_lo = hi && *hi < 0 ? 0 - static_cast<uint64_t>(*hi) : 1;
    std::optional<uint64_t> mag_hi;
    if (lo) mag_hi = 0 - static_cast<uint64_t>(*lo);
    alts.push_back("\"-\" " + digit_range_gbnf(mag_lo, mag_hi));
  }
  if (!hi || *hi >= 0) {
    const uint64_t from = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    std::optional<uint64_t> to;
    if (hi) to = static_cast<uint64_t>(*hi);
    alts.push_back(digit_range_gbnf(from, to));
  }
  return join_alternatives(alts);
}

std::string number_range_gbnf(std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  std::vector<std::string> alts;
  // x = -m: lo <= x <= hi  <=>  -hi <= m <= -lo, and m > 0 (never "-0").
  if (!lo || lo->value.negative) {
    NumberBound m_lo{JsonDecimal(), true};
    if (hi && hi->value.negative) m_lo = {hi->value.magnitude(), hi->exclusive};
    std::optional<NumberBound> m_hi;
    if (lo) m_hi = NumberBound{lo->value.magnitude(), lo->exclusive};
    add_magnitudes(m_lo, m_hi, "\"-\" ", alts);
  }
  if (!hi || !hi->value.negative) {
    NumberBound m_lo;
    if (lo && !lo->value.negative) m_lo = *lo;
    add_magnitudes(m_lo, hi, "", alts);
  }
  if (alts.empty()) return "";
  return join_alternatives(alts);
}

}  // namespace pagoda::grammar
