// jinja2's builtin tests ({{ x is defined }}, {{ n is divisibleby 3 }}, ...).
#pragma once

#include <string_view>

#include "jinja/value.h"

namespace pagoda::jinja {

using TestFn = bool (*)(Interpreter& interp, const Value& value, CallArgs& args);

TestFn find_test(std::string_view name);  // nullptr for unknown names
bool is_known_test(std::string_view name);

}  // namespace pagoda::jinja
