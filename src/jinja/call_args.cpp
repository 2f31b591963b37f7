#include "jinja/call_args.h"

#include <cassert>

#include "jinja/error.h"

namespace pagoda::jinja {

BoundArgs::BoundArgs(std::string_view func, const CallArgs& args,
                     std::initializer_list<const char*> params)
    : func_(func), values_(params.size()), set_(params.size(), false) {
  for (const char* p : params) names_.emplace_back(p);
  if (args.positional.size() > names_.size()) {
    fail(ErrorKind::kType, func_ + "() takes at most " + std::to_string(names_.size()) +
                               " argument(s) (" + std::to_string(args.positional.size()) +
                               " given)");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) {
    values_[i] = args.positional[i];
    set_[i] = true;
  }
  for (const auto& [key, value] : args.keyword) {
    size_t i = 0;
    while (i < names_.size() && names_[i] != key) ++i;
    if (i == names_.size()) {
      fail(ErrorKind::kType, func_ + "() got an unexpected keyword argument '" + key + "'");
    }
    if (set_[i])
      fail(ErrorKind::kType, func_ + "() got multiple values for argument '" + key + "'");
    values_[i] = value;
    set_[i] = true;
  }
}

const Value& BoundArgs::get(size_t i) const {
  assert(set_[i]);
  return values_[i];
}

bool BoundArgs::flag(size_t i, bool fallback) const {
  return has(i) ? truthy(values_[i]) : fallback;
}

int64_t BoundArgs::integer(size_t i, int64_t fallback) const {
  if (!has(i)) return fallback;
  const Value& v = values_[i];
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_int()) {
    fail(ErrorKind::kType, func_ + "(): '" + type_name(v) +
                               "' object cannot be interpreted as an integer (argument '" +
                               names_[i] + "')");
  }
  return v.as_int();
}

std::string BoundArgs::string(size_t i, std::string fallback) const {
  if (!has(i)) return fallback;
  const Value& v = values_[i];
  if (v.is_undefined()) fail_undefined(v);
  if (!v.is_string()) {
    fail(ErrorKind::kType,
         func_ + "(): argument '" + names_[i] + "' must be str, not " + type_name(v));
  }
  return v.str();
}

void expect_no_kwargs(std::string_view func, const CallArgs& args) {
  if (!args.keyword.empty()) {
    fail(ErrorKind::kType, std::string(func) + "() takes no keyword arguments");
  }
}

}  // namespace pagoda::jinja
