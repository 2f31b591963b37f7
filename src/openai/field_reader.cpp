#include "openai/field_reader.h"

#include <fmt/format.h>

#include <cmath>

#include "openai/wire/json_util.h"

namespace pagoda::openai {

std::string describe_value(const Json& value) {
  std::string text = dump_json(value);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return fmt::format("{} {}", value.type_name(), text);
}

std::optional<int64_t> as_integer(const Json& value, int64_t lo, int64_t hi) {
  int64_t v = 0;
  if (value.is_number_integer()) {
    if (value.is_number_unsigned() && value.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) {
      return std::nullopt;
    }
    v = value.get<int64_t>();
  } else if (value.is_number_float()) {
    const double d = value.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9.0e15) return std::nullopt;
    v = static_cast<int64_t>(d);
  } else {
    return std::nullopt;
  }
  if (v < lo || v > hi) return std::nullopt;
  return v;
}

const Json* FieldReader::value(const char* name) const {
  auto it = object_.find(name);
  if (it == object_.end() || it->is_null()) return nullptr;
  return &*it;
}

void FieldReader::fail(ApiError error) {
  if (!error_) error_ = std::move(error);
}

void FieldReader::fail_field(const char* name, const std::string& what) {
  fail(invalid_field(field_name(name), fmt::format("'{}' {}", field_name(name), what)));
}

std::optional<double> FieldReader::number(const char* name, double lo, double hi, bool lo_open) {
  const Json* v = value(name);
  if (!v) return std::nullopt;
  const char open = lo_open ? '(' : '[';
  if (!v->is_number()) {
    fail_field(name, fmt::format("must be a number in {}{}, {}], got {}", open, lo, hi,
                                 describe_value(*v)));
    return std::nullopt;
  }
  const double d = v->get<double>();
  if (!(lo_open ? d > lo : d >= lo) || !(d <= hi)) {
    fail_field(name, fmt::format("must be in {}{}, {}], got {}", open, lo, hi, d));
    return std::nullopt;
  }
  return d;
}

std::optional<int64_t> FieldReader::integer(const char* name, int64_t lo, int64_t hi) {
  const Json* v = value(name);
  if (!v) return std::nullopt;
  auto i = as_integer(*v, lo, hi);
  if (!i) {
    if (v->is_number() && as_integer(*v, INT64_MIN, INT64_MAX)) {
      fail_field(name, fmt::format("must be in [{}, {}], got {}", lo, hi, dump_json(*v)));
    } else {
      fail_field(name, fmt::format("must be an integer, got {}", describe_value(*v)));
    }
  }
  return i;
}

std::optional<bool> FieldReader::boolean(const char* name) {
  const Json* v = value(name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) {
    fail_field(name, fmt::format("must be a boolean, got {}", describe_value(*v)));
    return std::nullopt;
  }
  return v->get<bool>();
}

std::optional<std::string> FieldReader::string(const char* name) {
  const Json* v = value(name);
  if (!v) return std::nullopt;
  if (!v->is_string()) {
    fail_field(name, fmt::format("must be a string, got {}", describe_value(*v)));
    return std::nullopt;
  }
  return v->get<std::string>();
}

std::optional<std::vector<std::string>> FieldReader::string_list(const char* name) {
  const Json* v = value(name);
  if (!v) return std::nullopt;
  if (v->is_string()) return std::vector<std::string>{v->get<std::string>()};
  if (!v->is_array()) {
    fail_field(name,
               fmt::format("must be a string or an array of strings, got {}", describe_value(*v)));
    return std::nullopt;
  }
  std::vector<std::string> out;
  for (size_t i = 0; i < v->size(); ++i) {
    if (!(*v)[i].is_string()) {
      fail_field(name, fmt::format("[{}] must be a string, got {}", i, describe_value((*v)[i])));
      return std::nullopt;
    }
    out.push_back((*v)[i].get<std::string>());
  }
  return out;
}

std::optional<std::vector<int64_t>> FieldReader::integer_list(const char* name, int64_t lo,
                                                              int64_t hi) {
  const Json* v = value(name);
  if (!v) return std::nullopt;
  if (!v->is_array()) {
    fail_field(name, fmt::format("must be an array of integers, got {}", describe_value(*v)));
    return std::nullopt;
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < v->size(); ++i) {
    auto item = as_integer((*v)[i], lo, hi);
    if (!item) {
      fail_field(name, fmt::format("[{}] must be an integer in [{}, {}], got {}", i, lo, hi,
                                   describe_value((*v)[i])));
      return std::nullopt;
    }
    out.push_back(*item);
  }
  return out;
}

}  // namespace pagoda::openai
