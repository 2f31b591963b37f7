#include "sample/sampling_fields.h"

namespace pagoda {

std::string FieldRange::interval() const {
  return fmt::format("{}{}, {}]", lo_open ? '(' : '[', lo, hi);
}

std::string out_of_range_message(std::string_view name, std::string_view value,
                                 std::string_view allowed) {
  return fmt::format("'{}' = {} is out of range: must be {}", name, value, allowed);
}

std::vector<SamplingFieldError> drop_out_of_range_defaults(GenerationDefaults& defaults) {
  std::vector<SamplingFieldError> dropped;
  for_each_numeric_field([&](const auto& field) {
    if (field.generation == nullptr) return;
    auto& value = defaults.*field.generation;
    if (!value) return;
    if (auto error = field.check(*value)) {
      dropped.push_back(std::move(*error));
      value.reset();
    }
  });
  return dropped;
}

std::string describe_generation_defaults(const GenerationDefaults& defaults) {
  std::string out;
  for_each_numeric_field([&](const auto& field) {
    if (field.generation == nullptr || !(defaults.*field.generation)) return;
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", field.name, *(defaults.*field.generation));
  });
  return out;
}

}  // namespace pagoda
