// Python string formatting: printf-style `str % args` and str.format().
#pragma once

#include <string>
#include <string_view>

#include "jinja/value.h"

namespace pagoda::jinja {

// Python `fmt % args`: `args` is a tuple of positional values, a dict for
// %(name)s fields, or a single value. With `escape_args` (a Markup format
// string) string arguments are HTML-escaped like markupsafe does.
std::string percent_format(std::string_view fmt, const Value& args, bool escape_args);

// Python `fmt.format(*args, **kwargs)` (fields {}, {0}, {name}, {0[key]},
// {0.attr}, conversions !r !s !a, and the format-spec mini-language).
std::string str_format(std::string_view fmt, const CallArgs& args);

// Python format(value, spec).
std::string format_with_spec(const Value& v, std::string_view spec);

}  // namespace pagoda::jinja
