#include "core/byte_size.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

namespace pagoda {

namespace {

struct Unit {
  std::string_view name;
  double factor;
};

constexpr double kKi = 1024.0, kK = 1000.0;
constexpr Unit kUnits[] = {
    {"", 1},
    {"K", kKi},
    {"M", kKi* kKi},
    {"G", kKi* kKi* kKi},
    {"T", kKi* kKi* kKi* kKi},
    {"KiB", kKi},
    {"MiB", kKi* kKi},
    {"GiB", kKi* kKi* kKi},
    {"TiB", kKi* kKi* kKi* kKi},
    {"k", kK},
    {"m", kK* kK},
    {"g", kK* kK* kK},
    {"t", kK* kK* kK* kK},
    {"KB", kK},
    {"MB", kK* kK},
    {"GB", kK* kK* kK},
    {"TB", kK* kK* kK* kK},
};

}  // namespace

Result<int64_t> parse_byte_size(std::string_view text) {
  auto bad = [text] {
    return make_error(ErrorCode::kInvalidArgument,
                      "'" + std::string(text) +
                          "' is not a byte size (a number of bytes, or one with a unit such as "
                          "512MiB, 4GiB, 1.5G)");
  };
  size_t digits = 0;
  while (digits < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) {
    ++digits;
  }
  if (digits == 0) return bad();
  double number = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + digits, number);
  if (ec != std::errc() || end != text.data() + digits) return bad();
  const std::string_view unit = text.substr(digits);
  for (const Unit& u : kUnits) {
    if (u.name != unit) continue;
    const double bytes = std::floor(number * u.factor);
    if (!(bytes < 9.2e18)) return bad();
    return static_cast<int64_t>(bytes);
  }
  return bad();
}

}  // namespace pagoda
