// jinja2's builtin filters, with transformers' tojson.
#pragma once

#include <string_view>

#include "jinja/value.h"

namespace pagoda::jinja {

using FilterFn = Value (*)(Interpreter& interp, const Value& value, CallArgs& args);

// nullptr when the filter is not implemented (see is_known_filter).
FilterFn find_filter(std::string_view name);
// True for every filter name jinja2 defines, implemented here or not
// (random, urlize, wordwrap and pprint are not).
bool is_known_filter(std::string_view name);

}  // namespace pagoda::jinja
