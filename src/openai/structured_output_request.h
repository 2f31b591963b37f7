// A request's structured-output constraint: the fields that carry one, read
// into a StructuredOutputSpec (sample/structured_output.h), and its
// compilation by the engine. Sources, each with the field name errors use:
//   response_format {type: json_object}              "response_format"
//   response_format {type: json_object, schema: S}   "response_format.schema" (llama-server's)
//   response_format {type: json_schema,
//                    json_schema: {name, schema: S, description, strict}}
//                                                    "response_format.json_schema.schema"
//   structured_outputs {json | regex | choice | grammar | json_object: true}
//                                                    "structured_outputs.<key>" (vLLM's)
//   guided_json, guided_regex, guided_choice, guided_grammar   (vLLM's older names)
//   grammar (GBNF text), json_schema (object)        (llama-server's)
//   tool_choice "required" / a named function        "tool_choice" (chat only: tool_constraint.h)
// At most one source per request.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "engine/engine_api.h"
#include "openai/api_error.h"
#include "openai/field_reader.h"
#include "sample/structured_output.h"

namespace pagoda::openai {

struct ConstraintSource {
  StructuredOutputSpec spec;
  std::string field;  // the request field that set it (see above)
};

// Reads every source above but tool_choice, and the options beside them:
// guided_decoding_backend (a backend name vLLM knows -- auto, xgrammar,
// guidance, outlines, lm-format-enforcer -- optionally with ":no-fallback":
// accepted and ignored, pagoda has one backend and never falls back; other
// values and options are a 400), structured_outputs.disable_fallback (any
// bool, ignored for the same reason), structured_outputs.disable_any_whitespace
// and .disable_additional_properties (false only), and refuses
// guided_whitespace_pattern, structured_outputs.whitespace_pattern,
// structured_outputs.structural_tag and response_format type
// "structural_tag". A JSON Schema is an object (guided_json and
// structured_outputs.json: also a string holding one); a choice list holds at
// least one string. Two sources are a 400 naming both; structured_outputs
// must hold exactly one constraint. Errors are recorded in `reader`; nullopt
// when the request has no constraint (or an error).
std::optional<ConstraintSource> read_constraint_source(FieldReader& reader);

// A 400 naming `later`: it and `earlier` both constrain the output.
ApiError conflicting_constraints(const std::string& earlier, const std::string& later);

// Compiles `source` with the engine (Engine::compile_constraint; call it on a
// worker thread: a schema may take milliseconds). An invalid or unsupported
// spec is a 400 whose param is source.field and whose message starts with
// "<field>: " followed by the compiler's text (which names the keyword or
// position), e.g. "response_format.json_schema.schema: json_schema at
// '/properties/a': ...".
ApiResult<std::shared_ptr<const CompiledConstraint>> compile_constraint_source(
    const Engine& engine, const ConstraintSource& source);

}  // namespace pagoda::openai
