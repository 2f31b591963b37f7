// What the JSON Schema converter knows about keywords: which are annotations
// (ignored), which it cannot enforce (an error), and the error shape
// "json_schema at '<JSON pointer>': <keyword>: <what>" (grammar_api.md).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "core/result.h"

namespace pagoda::grammar {

// Schemas keep their object keys in document order (properties are written in
// the schema's order).
using SchemaJson = nlohmann::ordered_json;

// Limits that keep a schema's grammar (and the converter's recursion) small.
constexpr int kMaxSchemaDepth = 64;           // nested subschemas, allOf merges, $ref hops
constexpr size_t kMaxEnumValues = 4096;       // values of one enum
constexpr uint64_t kMaxRepetitions = 1000;    // minItems/maxItems/minLength/maxLength
constexpr size_t kMaxAlternatives = 256;      // anyOf alternatives after distributing allOf
constexpr size_t kMaxGrammarBytes = 4 << 20;  // the whole grammar text

Error schema_error(std::string_view pointer, std::string_view keyword, std::string_view what);

// `pointer` extended by one reference token (escaping '~' and '/').
std::string pointer_child(std::string_view pointer, std::string_view token);

// Annotation keywords that do not change which values are valid (title,
// description, default, examples, $schema, $id, $comment, deprecated, ...),
// plus $defs/definitions (containers for $ref targets).
bool is_ignored_keyword(std::string_view keyword);

// Validation keywords the grammar cannot enforce (uniqueItems, multipleOf,
// patternProperties, if/then/else, not, minProperties, ...). Keywords that
// are neither supported, ignored nor in this list are unknown and, as JSON
// Schema says, ignored (documented in docs/structured-output.md).
bool is_unsupported_keyword(std::string_view keyword);

// Whether `schema` has a supported or unsupported validation keyword other
// than those in `except` (annotations and unknown keywords do not count).
bool has_validation_keywords(const SchemaJson& schema,
                             std::initializer_list<std::string_view> except);

}  // namespace pagoda::grammar
