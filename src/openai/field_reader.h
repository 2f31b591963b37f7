// Typed, range-checked reads of a request's JSON fields. A missing or null
// field reads as nullopt; a wrong type or an out-of-range value records an
// ApiError naming the field (the first error wins) and reads as nullopt.
// Usage: read every field, then check error().
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "openai/api_error.h"

namespace pagoda::openai {

class FieldReader {
 public:
  // `object` must outlive the reader; `prefix` is prepended to field names in
  // errors, e.g. "stream_options.".
  explicit FieldReader(const Json& object, std::string prefix = "")
      : object_(object), prefix_(std::move(prefix)) {}

  // Numbers in [lo, hi]; (lo, hi] when lo_open.
  std::optional<double> number(const char* name, double lo, double hi, bool lo_open = false);
  // Integers in [lo, hi]; a float with an integral value (2.0) is accepted.
  std::optional<int64_t> integer(const char* name, int64_t lo, int64_t hi);
  std::optional<bool> boolean(const char* name);
  std::optional<std::string> string(const char* name);
  // A string or an array of strings (e.g. "stop").
  std::optional<std::vector<std::string>> string_list(const char* name);
  // An array of integers in [lo, hi].
  std::optional<std::vector<int64_t>> integer_list(const char* name, int64_t lo, int64_t hi);
  // The raw value if present and not null.
  const Json* value(const char* name) const;

  // Records `error` unless one is already recorded.
  void fail(ApiError error);
  // Records a 400 for field `name`: "'<prefix><name>' <what>".
  void fail_field(const char* name, const std::string& what);
  const std::optional<ApiError>& error() const { return error_; }
  std::string field_name(const char* name) const { return prefix_ + name; }

 private:
  const Json& object_;
  std::string prefix_;
  std::optional<ApiError> error_;
};

// A short rendering of a JSON value for error messages (at most ~60 chars).
std::string describe_value(const Json& value);

// Reads an integer JSON value in [lo, hi] (integral floats accepted).
std::optional<int64_t> as_integer(const Json& value, int64_t lo, int64_t hi);

}  // namespace pagoda::openai
