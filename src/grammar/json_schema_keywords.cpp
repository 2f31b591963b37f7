#include "grammar/json_schema_keywords.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>

namespace pagoda::grammar {

namespace {

constexpr std::array<std::string_view, 24> kIgnored = {
    "title",
    "description",
    "examples",
    "example",
    "default",
    "$schema",
    "$id",
    "id",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$anchor",
    "$dynamicAnchor",
    "$vocabulary",
    "contentMediaType",
    "contentEncoding",
    "contentSchema",
    "discriminator",
    "externalDocs",
    "xml",
    "$defs",
    "definitions",
    "markdownDescription",
};

constexpr std::array<std::string_view, 20> kUnsupported = {
    "uniqueItems",
    "multipleOf",
    "patternProperties",
    "propertyNames",
    "if",
    "then",
    "else",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "not",
    "minProperties",
    "maxProperties",
    "contains",
    "minContains",
    "maxContains",
    "unevaluatedItems",
    "unevaluatedProperties",
    "$dynamicRef",
    "$recursiveRef",
};

// The validation keywords the converter enforces.
constexpr std::array<std::string_view, 23> kSupported = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "enum",
    "const",
    "anyOf",
    "oneOf",
    "allOf",
    "$ref",
    "items",
    "prefixItems",
    "additionalItems",
    "minItems",
    "maxItems",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
};

}  // namespace

Error schema_error(std::string_view pointer, std::string_view keyword, std::string_view what) {
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("json_schema at '{}': {}: {}", pointer, keyword, what));
}

std::string pointer_child(std::string_view pointer, std::string_view token) {
  std::string out(pointer);
  out += '/';
  for (char c : token) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

bool is_ignored_keyword(std::string_view keyword) {
  return std::find(kIgnored.begin(), kIgnored.end(), keyword) != kIgnored.end();
}

bool is_unsupported_keyword(std::string_view keyword) {
  return std::find(kUnsupported.begin(), kUnsupported.end(), keyword) != kUnsupported.end();
}

bool has_validation_keywords(const SchemaJson& schema,
                             std::initializer_list<std::string_view> except) {
  for (const auto& [key, value] : schema.items()) {
    if (std::find(except.begin(), except.end(), key) != except.end()) continue;
    if (is_unsupported_keyword(key) ||
        std::find(kSupported.begin(), kSupported.end(), key) != kSupported.end())
      return true;
  }
  return false;
}

}  // namespace pagoda::grammar
