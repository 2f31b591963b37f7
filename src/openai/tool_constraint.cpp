#include "openai/tool_constraint.h"

#include <fmt/format.h>

#include <string>

namespace pagoda::openai {

namespace {

Json parameters_schema(const Json& tool) {
  const Json& function = tool["function"];
  if (function.contains("parameters") && function["parameters"].is_object() &&
      !function["parameters"].empty()) {
    return function["parameters"];
  }
  return {{"type", "object"}, {"properties", Json::object()}};
}

// Moves `schema`'s definitions (under `key`) into `defs`; a name defined twice
// differently is an error.
std::optional<ApiError> hoist_definitions(Json& schema, const char* key, Json& defs) {
  if (!schema.contains(key)) return std::nullopt;
  Json moved = std::move(schema[key]);
  schema.erase(key);
  if (!moved.is_object()) return std::nullopt;
  for (auto& [name, definition] : moved.items()) {
    if (defs.contains(name) && defs[name] != definition) {
      return invalid_field("tools",
                           fmt::format("'tools' define '{}/{}' differently in two functions; "
                                       "tool_choice \"required\" joins their schemas, so each "
                                       "definition name must mean one schema",
                                       key, name));
    }
    defs[name] = std::move(definition);
  }
  return std::nullopt;
}

}  // namespace

ApiResult<std::optional<ConstraintSource>> tool_choice_constraint(const ToolSelection& tools,
                                                                  bool parallel_tool_calls) {
  if (tools.mode == ToolChoiceMode::kNamed) {
    StructuredOutputSpec spec;
    spec.kind = StructuredOutputSpec::Kind::kJsonSchema;
    spec.text = dump_json(parameters_schema(tools.tools.at(0)));
    return std::optional<ConstraintSource>(ConstraintSource{std::move(spec), "tool_choice"});
  }
  if (tools.mode != ToolChoiceMode::kRequired) return std::optional<ConstraintSource>();
  Json any_of = Json::array();
  Json defs = Json::object();
  Json definitions = Json::object();
  for (const Json& tool : tools.tools) {
    Json parameters = parameters_schema(tool);
    if (auto error = hoist_definitions(parameters, "$defs", defs)) return *error;
    if (auto error = hoist_definitions(parameters, "definitions", definitions)) return *error;
    any_of.push_back(
        {{"type", "object"},
         {"properties",
          {{"name", {{"type", "string"}, {"enum", Json::array({tool["function"]["name"]})}}},
           {"parameters", std::move(parameters)}}},
         {"required", Json::array({"name", "parameters"})},
         {"additionalProperties", false}});
  }
  Json schema = {{"type", "array"}, {"minItems", 1}};
  if (!parallel_tool_calls) schema["maxItems"] = 1;
  schema["items"] = {{"anyOf", std::move(any_of)}};
  if (!defs.empty()) schema["$defs"] = std::move(defs);
  if (!definitions.empty()) schema["definitions"] = std::move(definitions);
  StructuredOutputSpec spec;
  spec.kind = StructuredOutputSpec::Kind::kJsonSchema;
  spec.text = dump_json(schema);
  return std::optional<ConstraintSource>(ConstraintSource{std::move(spec), "tool_choice"});
}

}  // namespace pagoda::openai
