// JSON ↔ template values: JSON input (messages, tools, kwargs) becomes
// Python-like values, and `tojson` serializes values exactly like Python's
// json.dumps (the filter transformers installs).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "jinja/value.h"

namespace pagoda::jinja {

// Objects keep their key order (ordered_json), as Python dicts do.
Value value_from_json(const nlohmann::ordered_json& j);

struct JsonDumpOptions {
  bool ensure_ascii = false;
  bool has_indent = false;  // indent is not None
  std::string indent;       // the indent string (an int n becomes n spaces)
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};

// json.dumps(v, ...). Throws a kType JinjaError for values JSON cannot hold
// (undefined, namespaces, iterators, ...) and for bad dict keys.
std::string json_dumps(const Value& v, const JsonDumpOptions& options);

}  // namespace pagoda::jinja
