// The global functions a chat template sees: jinja2's (range, dict,
// namespace, cycler, joiner, lipsum) and transformers' (raise_exception,
// strftime_now).
#pragma once

#include <string>
#include <unordered_map>

#include "jinja/value.h"

namespace pagoda::jinja {

void add_globals(std::unordered_map<std::string, Value>& context);

}  // namespace pagoda::jinja
