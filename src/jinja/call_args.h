// Binds the arguments of a builtin (filter, test, method, global) to its
// parameters the way Python binds a call: positional first, then keywords;
// unknown keywords, duplicates and surplus arguments are TypeErrors.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/value.h"

namespace pagoda::jinja {

class BoundArgs {
 public:
  // `params` are the parameter names after any already-consumed value
  // (filters: after the filtered value). `func` names the builtin in errors.
  BoundArgs(std::string_view func, const CallArgs& args, std::initializer_list<const char*> params);

  bool has(size_t i) const { return set_[i]; }
  const Value& get(size_t i) const;  // the bound value; asserts has(i)
  Value get_or(size_t i, Value fallback) const { return has(i) ? get(i) : std::move(fallback); }
  // Python truthiness of the argument, or `fallback` when absent.
  bool flag(size_t i, bool fallback) const;
  // An int argument (bool accepted), or `fallback` when absent; throws for other types.
  int64_t integer(size_t i, int64_t fallback) const;
  // A str argument, or `fallback` when absent; throws for other types.
  std::string string(size_t i, std::string fallback) const;

 private:
  std::string func_;
  std::vector<std::string> names_;
  std::vector<Value> values_;
  std::vector<bool> set_;
};

// For builtins that take no keywords: throws if any were passed.
void expect_no_kwargs(std::string_view func, const CallArgs& args);

}  // namespace pagoda::jinja
