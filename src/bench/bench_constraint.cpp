#include "bench/bench_constraint.h"

#include <fstream>
#include <sstream>

namespace pagoda::bench {

using nlohmann::json;

Result<std::optional<StructuredOutputSpec>> bench_constraint(const std::string& schema_file,
                                                             const std::string& kind) {
  const bool object = kind == "json_object";
  if (!object && !kind.empty() && kind != "none")
    return make_error(ErrorCode::kInvalidArgument,
                      "bad --structured-output '" + kind + "': expected json_object or none");
  if (schema_file.empty()) {
    if (!object) return std::optional<StructuredOutputSpec>{};
    StructuredOutputSpec spec;
    spec.kind = StructuredOutputSpec::Kind::kJsonObject;
    return std::optional<StructuredOutputSpec>{spec};
  }
  if (object)
    return make_error(ErrorCode::kInvalidArgument,
                      "--response-format-schema and --structured-output json_object exclude each "
                      "other");
  std::ifstream in(schema_file);
  std::stringstream text;
  if (in.is_open()) text << in.rdbuf();
  if (!in.is_open() || in.bad())
    return make_error(ErrorCode::kIo,
                      "cannot read --response-format-schema file '" + schema_file + "'");
  const json schema = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!schema.is_object())
    return make_error(ErrorCode::kInvalidArgument, "--response-format-schema file '" + schema_file +
                                                       "' is not a JSON object (a JSON Schema)");
  StructuredOutputSpec spec;
  spec.kind = StructuredOutputSpec::Kind::kJsonSchema;
  spec.text = schema.dump();
  return std::optional<StructuredOutputSpec>{spec};
}

json response_format_json(const StructuredOutputSpec& spec) {
  if (spec.kind == StructuredOutputSpec::Kind::kJsonSchema)
    return {{"type", "json_schema"},
            {"json_schema", {{"name", "bench"}, {"schema", json::parse(spec.text)}}}};
  return {{"type", "json_object"}};
}

}  // namespace pagoda::bench
