// The fixed GBNF rules of JSON (any value, strings, numbers, the whitespace
// policy) and of the string formats the JSON Schema converter supports, added
// on demand to a GbnfRuleSet. Every rule name used here is reserved up front
// so that generated names never collide with them.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "grammar/gbnf_writer.h"

namespace pagoda::grammar {

enum class JsonPrimitive {
  kWs,          // ws ::= | " " | "\n" [ \t]{0,20}  (grammar_api.md's whitespace policy)
  kValue,       // any JSON value (objects and arrays nest with ws between tokens)
  kObject,      // any JSON object
  kString,      // a JSON string: escapes, no raw control characters, valid UTF-8
  kStringChar,  // one character of a string's content (a code point or one escape)
  kKeyChar,     // one unescaped code point of a string's content (no '"', '\', controls)
  kNumber,      // a JSON number, at most 16 integral, 16 fraction and 2 exponent digits
  kInteger,     // a JSON integer, at most 16 digits
  kBoolean,
  kNull,
  // String formats: the content between the quotes (JSON Schema "format").
  kDateTime,
  kDate,
  kTime,
  kDuration,
  kUuid,
  kEmail,
  kIpv4,
  kIpv6,
  kHostname,
  kUri,
};

// Defines `which` (and every rule it uses) in `rules` unless already defined;
// returns its rule name.
std::string use_json_primitive(GbnfRuleSet& rules, JsonPrimitive which);

// Reserves the names of all primitive rules (call before generating names).
void reserve_json_primitive_names(GbnfRuleSet& rules);

// The primitive for a JSON Schema "format" value, or nullopt when unsupported.
std::optional<JsonPrimitive> json_format_primitive(std::string_view format);

// The supported formats, comma-separated (for error messages and docs).
const char* supported_json_formats();

}  // namespace pagoda::grammar
