// What a request constrains its output to (structured output): plain data
// that the server reads from response_format, structured_outputs, the
// guided_* fields, llama-server's grammar/json_schema and tool_choice, and
// that the grammar module compiles (Engine::compile_constraint).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pagoda {

struct StructuredOutputSpec {
  enum class Kind {
    kJsonObject,  // any JSON object (response_format {type: json_object})
    kJsonSchema,  // text: a JSON Schema, as JSON text
    kRegex,       // text: a regular expression the whole output matches
    kGrammar,     // text: a grammar in llama.cpp's GBNF syntax (root rule "root")
    kChoice,      // choices: the output is exactly one of them
  };
  Kind kind = Kind::kJsonObject;
  std::string text;
  std::vector<std::string> choices;
};

// The spec's kind as users write it ("json_object", "json_schema", "regex",
// "grammar", "choice").
inline const char* structured_output_kind_name(StructuredOutputSpec::Kind kind) {
  switch (kind) {
    case StructuredOutputSpec::Kind::kJsonObject: return "json_object";
    case StructuredOutputSpec::Kind::kJsonSchema: return "json_schema";
    case StructuredOutputSpec::Kind::kRegex: return "regex";
    case StructuredOutputSpec::Kind::kGrammar: return "grammar";
    case StructuredOutputSpec::Kind::kChoice: return "choice";
  }
  return "?";
}

}  // namespace pagoda
