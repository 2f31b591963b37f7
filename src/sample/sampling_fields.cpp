#include "sample/sampling_fields.h"

namespace pagoda {

std::string FieldRange::interval() const {
  return fmt::format("{}{}, {}]", lo_open ? '(' : '[', lo, hi);
}

std::string out_of_range_message(std::string_view name, std::string_view value,
                                 std::string_view allowed) {
  return fmt::format("'{}' = {} is out of range: must be {}", name, value, allowed);
}

}  // namespace pagoda
