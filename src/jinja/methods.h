// The Python methods templates may call on values (str, dict, list, tuple,
// dict views, range) under jinja2's ImmutableSandboxedEnvironment, which
// refuses the mutating ones (list.append, dict.update, ...).
#pragma once

#include <string_view>

#include "jinja/value.h"

namespace pagoda::jinja {

enum class MethodLookup { kFound, kUnsafe, kMissing };

// Sets `out` to the bound method `obj.name` when it exists and is safe.
MethodLookup find_method(const Value& obj, std::string_view name, Value& out);

// str methods (str_methods.cpp); false when str has no such method.
bool find_str_method(const Value& self, std::string_view name, Value& out);

// Python str.split(sep, maxsplit) / str.rsplit and str.splitlines.
ValueList py_split(const std::string& s, const Value* sep, int64_t maxsplit, bool from_right);
ValueList py_splitlines(const std::string& s, bool keepends);
// Python str.strip family: `chars` null → whitespace.
std::string py_strip(const std::string& s, const std::string* chars, bool left, bool right);
// Python str.replace (count < 0: all).
std::string py_replace(const std::string& s, const std::string& old, const std::string& repl,
                       int64_t count);
std::string py_upper(std::string_view s);
std::string py_lower(std::string_view s);
std::string py_title(std::string_view s);       // str.title()
std::string py_capitalize(std::string_view s);  // str.capitalize()

}  // namespace pagoda::jinja
