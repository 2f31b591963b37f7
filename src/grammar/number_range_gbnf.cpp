#include "grammar/number_range_gbnf.h"

#include <fmt/format.h>

#include <algorithm>
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

// The fraction a number's integral part may be followed by.
enum class Frac { kNone, kZero, kNonZero, kAny };

Frac intersect(Frac a, Frac b) {
  if (a == Frac::kAny) return b;
  if (b == Frac::kAny) return a;
  return a == b ? a : Frac::kNone;
}

std::string frac_suffix(Frac frac) {
  switch (frac) {
    case Frac::kAny:
      return R"(( "." [0-9]{1,16} )?)";
    case Frac::kZero:
      return R"(( "." "0"{1,16} )?)";
    case Frac::kNonZero:
      return R"("." "0"{0,15} [1-9] [0-9]{0,15})";
    case Frac::kNone:
      break;
  }
  return "";
}

// Fractions allowed after integral part k >= 0 of a number, per bound side,
// for the non-negative numbers (x = k.f) and the negative ones (x = -k.f).
Frac nonneg_lower(uint64_t k, const std::optional<NumberBound>& lo) {
  if (!lo || lo->value < 0) return Frac::kAny;
  const auto l = static_cast<uint64_t>(lo->value);
  if (k > l) return Frac::kAny;
  if (k == l) return lo->exclusive ? Frac::kNonZero : Frac::kAny;
  return Frac::kNone;
}

Frac nonneg_upper(uint64_t k, const std::optional<NumberBound>& hi) {
  if (!hi) return Frac::kAny;
  if (hi->value < 0) return Frac::kNone;
  const auto h = static_cast<uint64_t>(hi->value);
  if (k < h) return Frac::kAny;
  if (k == h) return hi->exclusive ? Frac::kNone : Frac::kZero;
  return Frac::kNone;
}

// x = -(k + f) >= lo  <=>  k + f <= -lo.
Frac negative_lower(uint64_t k, const std::optional<NumberBound>& lo) {
  if (!lo) return Frac::kAny;
  if (lo->value > 0) return Frac::kNone;
  const auto l = static_cast<uint64_t>(-lo->value);
  if (k < l) return Frac::kAny;
  if (k == l) return lo->exclusive ? Frac::kNone : Frac::kZero;
  return Frac::kNone;
}

// x = -(k + f) <= hi  <=>  k + f >= -hi.
Frac negative_upper(uint64_t k, const std::optional<NumberBound>& hi) {
  if (!hi || hi->value > 0) return Frac::kAny;
  const auto h = static_cast<uint64_t>(-hi->value);
  if (k > h) return Frac::kAny;
  if (k == h) return hi->exclusive ? Frac::kNonZero : Frac::kAny;
  return Frac::kNone;
}

// Alternatives "<digits of k> <fraction>" over all k >= 0, where frac_at(k) is
// constant between consecutive `points`.
template <typename FracAt>
void add_cells(std::vector<uint64_t> points, const FracAt& frac_at, std::string_view prefix,
               std::vector<std::string>& alts) {
  std::sort(points.begin(), points.end());
  points.erase(std::unique(points.begin(), points.end()), points.end());
  auto emit = [&](uint64_t a, std::optional<uint64_t> b) {
    const Frac frac = frac_at(a);
    if (frac == Frac::kNone) return;
    alts.push_back(std::string(prefix) + digit_range_gbnf(a, b) + " " + frac_suffix(frac));
  };
  uint64_t start = 0;
  for (uint64_t p : points) {
    if (start < p) emit(start, p - 1);
    emit(p, p);
    start = p + 1;
  }
  emit(start, std::nullopt);
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
  std::vector<uint64_t> nonneg_points, negative_points = {0};
  for (const auto& bound : {lo, hi}) {
    if (!bound) continue;
    if (bound->value >= 0) nonneg_points.push_back(static_cast<uint64_t>(bound->value));
    if (bound->value <= 0) negative_points.push_back(0 - static_cast<uint64_t>(bound->value));
  }
  add_cells(
      negative_points,
      [&](uint64_t k) {
        const Frac f = intersect(negative_lower(k, lo), negative_upper(k, hi));
        return k == 0 ? intersect(f, Frac::kNonZero) : f;  // never "-0"
      },
      "\"-\" ", alts);
  add_cells(
      nonneg_points,
      [&](uint64_t k) { return intersect(nonneg_lower(k, lo), nonneg_upper(k, hi)); }, "", alts);
  if (alts.empty()) return "";
  return join_alternatives(alts);
}

}  // namespace pagoda::grammar
