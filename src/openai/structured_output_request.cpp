#include "openai/structured_output_request.h"

#include <fmt/format.h>

#include <array>
#include <string_view>
#include <utility>
#include <vector>

#include "openai/wire/bounded_json.h"

namespace pagoda::openai {

namespace {

using Kind = StructuredOutputSpec::Kind;

constexpr std::array<std::string_view, 5> kBackends = {"auto", "xgrammar", "guidance", "outlines",
                                                       "lm-format-enforcer"};

StructuredOutputSpec make_spec(Kind kind, std::string text = {}) {
  StructuredOutputSpec spec;
  spec.kind = kind;
  spec.text = std::move(text);
  return spec;
}

// The sources found so far; a second one is a conflict recorded in `reader`.
class Sources {
 public:
  explicit Sources(FieldReader& reader) : reader_(reader) {}

  void add(std::string field, StructuredOutputSpec spec) {
    if (found_) {
      reader_.fail(conflicting_constraints(found_->field, field));
      return;
    }
    found_ = ConstraintSource{std::move(spec), std::move(field)};
  }
  std::optional<ConstraintSource> take() { return std::move(found_); }

 private:
  FieldReader& reader_;
  std::optional<ConstraintSource> found_;
};

// Field `name` of `reader` as JSON Schema text: an object, or (with
// `string_ok`, vLLM's json fields) a string holding one.
std::optional<std::string> read_schema(FieldReader& reader, const char* name, bool string_ok) {
  const Json* value = reader.value(name);
  if (!value) return std::nullopt;
  if (value->is_object()) return dump_json(*value);
  if (string_ok && value->is_string()) {
    auto parsed = parse_bounded_json(value->get_ref<const std::string&>(), "the schema");
    if (!parsed.ok()) {
      reader.fail_field(name, "is a string that is not valid JSON: " + parsed.error().message);
      return std::nullopt;
    }
    if (!parsed->is_object()) {
      reader.fail_field(name, fmt::format("must hold a JSON Schema object, got {}",
                                          describe_value(parsed.value())));
      return std::nullopt;
    }
    return dump_json(parsed.value());
  }
  reader.fail_field(
      name, fmt::format("must be a JSON Schema object{}, got {}",
                        string_ok ? " (or a string holding one)" : "", describe_value(*value)));
  return std::nullopt;
}

std::optional<StructuredOutputSpec> read_choice(FieldReader& reader, const char* name) {
  auto choices = reader.string_list(name);
  if (!choices) return std::nullopt;
  if (!reader.value(name)->is_array()) {
    reader.fail_field(name, "must be an array of strings");
    return std::nullopt;
  }
  if (choices->empty()) {
    reader.fail_field(name, "must hold at least one string");
    return std::nullopt;
  }
  StructuredOutputSpec spec = make_spec(Kind::kChoice);
  spec.choices = std::move(*choices);
  return spec;
}

// The regex / grammar / choice / json fields that vLLM names with and
// without the "guided_" prefix, read from `reader` with names prefixed by
// `name_prefix`; each found source is added to `out` under `field_prefix` +
// its name.
void read_vllm_sources(FieldReader& reader, const std::string& name_prefix,
                       const std::string& field_prefix, std::vector<ConstraintSource>& out) {
  auto name = [&](const char* key) { return name_prefix + key; };
  auto add = [&](const char* key, StructuredOutputSpec spec) {
    out.push_back({std::move(spec), field_prefix + name(key)});
  };
  if (auto schema = read_schema(reader, name("json").c_str(), /*string_ok=*/true))
    add("json", make_spec(Kind::kJsonSchema, std::move(*schema)));
  if (auto regex = reader.string(name("regex").c_str()))
    add("regex", make_spec(Kind::kRegex, *regex));
  if (auto choice = read_choice(reader, name("choice").c_str())) add("choice", std::move(*choice));
  if (auto grammar = reader.string(name("grammar").c_str()))
    add("grammar", make_spec(Kind::kGrammar, *grammar));
}

void read_response_format(FieldReader& reader, Sources& sources) {
  const Json* format = reader.value("response_format");
  if (!format) return;
  if (!format->is_object()) {
    reader.fail_field("response_format",
                      fmt::format("must be an object such as {{\"type\": \"json_object\"}}, got {}",
                                  describe_value(*format)));
    return;
  }
  FieldReader nested(*format, "response_format.");
  const std::optional<std::string> type = nested.string("type");
  if (!type) {
    if (!nested.error())
      nested.fail_field("type", "is required: \"text\", \"json_object\" or \"json_schema\"");
  } else if (*type == "json_object") {
    // llama-server also reads a schema beside the type.
    if (auto schema = read_schema(nested, "schema", /*string_ok=*/false)) {
      sources.add("response_format.schema", make_spec(Kind::kJsonSchema, std::move(*schema)));
    } else if (!nested.error()) {
      sources.add("response_format", make_spec(Kind::kJsonObject));
    }
  } else if (*type == "json_schema") {
    const Json* json_schema = nested.value("json_schema");
    if (!json_schema || !json_schema->is_object()) {
      nested.fail_field("json_schema",
                        "must be an object {\"name\", \"schema\", \"strict\", \"description\"} "
                        "with type \"json_schema\"");
    } else {
      FieldReader inner(*json_schema, "response_format.json_schema.");
      inner.string("name");
      inner.string("description");
      inner.boolean("strict");
      if (!inner.value("schema") && !inner.error()) {
        inner.fail_field("schema", "is required: the JSON Schema the output must follow");
      }
      if (auto schema = read_schema(inner, "schema", /*string_ok=*/false)) {
        if (!inner.error())
          sources.add("response_format.json_schema.schema",
                      make_spec(Kind::kJsonSchema, std::move(*schema)));
      }
      if (inner.error()) nested.fail(*inner.error());
    }
  } else if (*type == "structural_tag") {
    nested.fail_field("type", "\"structural_tag\" is not supported; use \"json_schema\"");
  } else if (*type != "text") {
    nested.fail_field("type", fmt::format("must be \"text\", \"json_object\" or \"json_schema\", "
                                          "got \"{}\"",
                                          *type));
  }
  if (nested.error()) reader.fail(*nested.error());
}

void read_structured_outputs(FieldReader& reader, Sources& sources) {
  const Json* value = reader.value("structured_outputs");
  if (!value) return;
  if (!value->is_object()) {
    reader.fail_field("structured_outputs",
                      fmt::format("must be an object such as {{\"json\": {{...}}}}, got {}",
                                  describe_value(*value)));
    return;
  }
  FieldReader nested(*value, "structured_outputs.");
  std::vector<ConstraintSource> found;
  read_vllm_sources(nested, "", "structured_outputs.", found);
  if (nested.boolean("json_object").value_or(false))
    found.push_back({make_spec(Kind::kJsonObject), "structured_outputs.json_object"});
  nested.boolean("disable_fallback");  // there is no fallback backend
  for (const char* option : {"disable_any_whitespace", "disable_additional_properties"}) {
    if (nested.boolean(option).value_or(false)) {
      nested.fail_field(option, "is not supported: send false or leave it out");
    }
  }
  if (nested.value("whitespace_pattern")) {
    nested.fail_field("whitespace_pattern",
                      "is not supported: JSON whitespace follows pagoda's fixed policy "
                      "(docs/structured-output.md)");
  }
  if (nested.value("structural_tag")) {
    nested.fail_field("structural_tag", "is not supported; use json, regex, choice or grammar");
  }
  if (!nested.error()) {
    if (found.empty()) {
      nested.fail(invalid_field("structured_outputs",
                                "'structured_outputs' must hold one of 'json', 'regex', 'choice', "
                                "'grammar' or 'json_object': true"));
    } else if (found.size() > 1) {
      nested.fail(invalid_field(
          found[1].field,
          fmt::format("'structured_outputs' holds both '{}' and '{}'; exactly one constraint is "
                      "allowed",
                      found[0].field, found[1].field)));
    } else {
      sources.add(std::move(found[0].field), std::move(found[0].spec));
    }
  }
  if (nested.error()) reader.fail(*nested.error());
}

void read_guided_decoding_backend(FieldReader& reader) {
  const auto backend = reader.string("guided_decoding_backend");
  if (!backend) return;
  const std::string_view value = *backend;
  const size_t colon = value.find(':');
  const std::string_view name = value.substr(0, colon);
  const std::string_view options = colon == std::string_view::npos ? "" : value.substr(colon + 1);
  bool known = false;
  for (std::string_view b : kBackends) known = known || b == name;
  if (!known || !(options.empty() || options == "no-fallback")) {
    reader.fail_field("guided_decoding_backend",
                      fmt::format("is not supported with value \"{}\": pagoda has one structured-"
                                  "output backend; send auto, xgrammar, guidance, outlines or "
                                  "lm-format-enforcer (optionally with \":no-fallback\"), or leave "
                                  "it out",
                                  value));
  }
}

}  // namespace

ApiError conflicting_constraints(const std::string& earlier, const std::string& later) {
  return invalid_field(later, fmt::format("'{}' and '{}' both constrain the output; a request may "
                                          "use only one structured-output constraint",
                                          earlier, later));
}

std::optional<ConstraintSource> read_constraint_source(FieldReader& reader) {
  Sources sources(reader);
  read_response_format(reader, sources);
  read_structured_outputs(reader, sources);
  std::vector<ConstraintSource> guided;
  read_vllm_sources(reader, "guided_", "", guided);
  for (auto& source : guided) sources.add(std::move(source.field), std::move(source.spec));
  if (auto grammar = reader.string("grammar"))
    sources.add("grammar", make_spec(Kind::kGrammar, *grammar));
  if (auto schema = read_schema(reader, "json_schema", /*string_ok=*/false))
    sources.add("json_schema", make_spec(Kind::kJsonSchema, std::move(*schema)));
  read_guided_decoding_backend(reader);
  if (reader.value("guided_whitespace_pattern")) {
    reader.fail_field("guided_whitespace_pattern",
                      "is not supported: JSON whitespace follows pagoda's fixed policy "
                      "(docs/structured-output.md)");
  }
  if (reader.error()) return std::nullopt;
  return sources.take();
}

ApiResult<std::shared_ptr<const CompiledConstraint>> compile_constraint_source(
    const Engine& engine, const ConstraintSource& source) {
  auto compiled = engine.compile_constraint(source.spec);
  if (compiled.ok()) return compiled.value();
  ApiError error = api_error_from(compiled.error());
  if (error.status == 400) {
    error.param = source.field;
    error.message = source.field + ": " + error.message;
  }
  return error;
}

}  // namespace pagoda::openai
