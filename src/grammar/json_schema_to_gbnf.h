// JSON Schema -> GBNF (llama.cpp's grammar syntax, read by parse_gbnf): a
// grammar whose sentences are JSON texts that the schema accepts, written
// with the shared whitespace policy (ws ::= | " " | "\n" [ \t]{0,20} between
// tokens). The supported subset, and what is enforced for each keyword, is in
// docs/structured-output.md ("JSON Schema"). A keyword that changes which
// values are valid but cannot be enforced is an error, never ignored.
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"

namespace pagoda::grammar {

// A complete GBNF grammar (root rule "root") for `schema_json`, a JSON Schema
// as JSON text. Errors: kInvalidArgument
// "json_schema at '<JSON pointer>': <keyword>: <what>".
Result<std::string> json_schema_to_gbnf(std::string_view schema_json);

// The grammar of any JSON object (response_format {type: json_object}), with
// values of any JSON type; root rule "root".
std::string json_object_gbnf();

}  // namespace pagoda::grammar
