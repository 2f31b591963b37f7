// The structured-output constraint every benchmark request carries (`pagoda
// bench serve | latency | throughput` with --response-format-schema FILE or
// --structured-output json_object), to measure what constrained decoding
// costs against the same run without it.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "core/result.h"
#include "sample/structured_output.h"

namespace pagoda::bench {

// The constraint the two flags ask for: `schema_file` (a JSON Schema file;
// empty: none) gives kJsonSchema with the file's text, `kind` "json_object"
// gives kJsonObject, "" and "none" give no constraint. Errors
// (kInvalidArgument): both flags, an unknown kind, an unreadable file or one
// that is not a JSON object.
Result<std::optional<StructuredOutputSpec>> bench_constraint(const std::string& schema_file,
                                                             const std::string& kind);

// The OpenAI `response_format` object of a json_object or json_schema spec:
// {"type": "json_object"} or {"type": "json_schema", "json_schema": {"name":
// "bench", "schema": <the schema>}}.
nlohmann::json response_format_json(const StructuredOutputSpec& spec);

// The --help text of the two flags (one wording for the three commands).
inline constexpr const char* kResponseFormatSchemaHelp =
    "attach a structured-output constraint to every request: response_format json_schema with "
    "the JSON Schema in FILE (measures constrained decoding; compare with the same run without it)";
inline constexpr const char* kStructuredOutputHelp =
    "attach a structured-output constraint to every request: json_object (response_format "
    "{\"type\": \"json_object\"}) or none (the default)";

}  // namespace pagoda::bench
