#include "grammar/json_schema_merge.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <optional>
#include <set>

namespace pagoda::grammar {

namespace {

constexpr std::array<std::string_view, 7> kTypeNames = {"null",   "boolean", "object", "array",
                                                        "number", "string",  "integer"};

// Whether part `p` has a lower (or upper) bound keyword whose tightest value wins.
constexpr std::array<std::string_view, 4> kLowerBounds = {"minItems", "minLength", "minimum",
                                                          "exclusiveMinimum"};
constexpr std::array<std::string_view, 4> kUpperBounds = {"maxItems", "maxLength", "maximum",
                                                          "exclusiveMaximum"};

bool contains(auto& list, std::string_view key) {
  return std::find(list.begin(), list.end(), key) != list.end();
}

// Draft 4's boolean exclusiveMinimum/exclusiveMaximum as the numeric form.
void normalize_exclusive(SchemaJson& part) {
  for (auto [excl, bound] :
       {std::pair{"exclusiveMinimum", "minimum"}, std::pair{"exclusiveMaximum", "maximum"}}) {
    if (!part.contains(excl) || !part[excl].is_boolean()) continue;
    if (part[excl].get<bool>() && part.contains(bound)) {
      part[excl] = part[bound];
      part.erase(bound);
    } else {
      part.erase(excl);
    }
  }
}

// Appends `part` with its $ref and allOf inlined (recursively) to `out`.
Status flatten(const SchemaJson& part, const SchemaRefResolver& resolve, const std::string& at,
               int depth, std::vector<SchemaJson>& out) {
  if (depth > kMaxSchemaDepth)
    return schema_error(at, "allOf", "nested more than 64 levels deep (or a $ref loop)");
  if (part.is_boolean()) {
    if (part.get<bool>()) return Status::Ok();
    return schema_error(at, "allOf", "a subschema is false, so no value matches");
  }
  if (!part.is_object()) return schema_error(at, "allOf", "subschemas must be objects or booleans");
  SchemaJson rest = part;
  if (rest.contains("$ref")) {
    if (!rest["$ref"].is_string()) return schema_error(at, "$ref", "must be a string");
    PAGODA_ASSIGN_OR_RETURN(const SchemaJson* target, resolve(rest["$ref"].get<std::string>(), at));
    rest.erase("$ref");
    PAGODA_RETURN_IF_ERROR(flatten(*target, resolve, at, depth + 1, out));
  }
  if (rest.contains("allOf")) {
    if (!rest["allOf"].is_array() || rest["allOf"].empty())
      return schema_error(at, "allOf", "must be a non-empty array");
    const SchemaJson subs = rest["allOf"];
    rest.erase("allOf");
    for (const SchemaJson& sub : subs)
      PAGODA_RETURN_IF_ERROR(flatten(sub, resolve, at, depth + 1, out));
  }
  normalize_exclusive(rest);
  out.push_back(std::move(rest));
  return Status::Ok();
}

// The type names a part allows, or nullopt for any; "integer" stands inside "number".
Result<std::optional<std::set<std::string>>> part_types(const SchemaJson& part,
                                                        const std::string& at) {
  if (!part.contains("type")) return std::optional<std::set<std::string>>();
  std::set<std::string> types;
  const SchemaJson& type = part["type"];
  for (const SchemaJson& t : type.is_array() ? type : SchemaJson::array({type})) {
    if (!t.is_string() || !contains(kTypeNames, t.get<std::string>()))
      return schema_error(at, "type", fmt::format("unknown type {}", t.dump()));
    types.insert(t.get<std::string>());
  }
  return std::optional(types);
}

std::set<std::string> intersect_types(const std::set<std::string>& a,
                                      const std::set<std::string>& b) {
  std::set<std::string> out;
  for (const std::string& t : a) {
    if (b.count(t))
      out.insert(t);
    else if (t == "integer" && b.count("number"))
      out.insert(t);
    else if (t == "number" && b.count("integer"))
      out.insert("integer");
  }
  return out;
}

// {"allOf": schemas}, or the only schema, or false when one of them is false.
SchemaJson all_of(const std::vector<SchemaJson>& schemas) {
  for (const SchemaJson& s : schemas)
    if (s.is_boolean() && !s.get<bool>()) return false;
  if (schemas.size() == 1) return schemas[0];
  return SchemaJson{{"allOf", schemas}};
}

// The object keywords of the merged schema.
void merge_properties(const std::vector<SchemaJson>& parts, SchemaJson& out) {
  std::vector<std::string> keys;
  for (const SchemaJson& p : parts)
    if (p.contains("properties") && p["properties"].is_object())
      for (const auto& [key, value] : p["properties"].items())
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  for (const std::string& key : keys) {
    std::vector<SchemaJson> schemas;
    for (const SchemaJson& p : parts) {
      if (p.contains("properties") && p["properties"].is_object() && p["properties"].contains(key))
        schemas.push_back(p["properties"][key]);
      else if (p.contains("additionalProperties"))
        schemas.push_back(p["additionalProperties"]);
    }
    out["properties"][key] = all_of(schemas);
  }
  std::vector<SchemaJson> additional, items;
  SchemaJson required = SchemaJson::array();
  for (const SchemaJson& p : parts) {
    if (p.contains("additionalProperties")) additional.push_back(p["additionalProperties"]);
    if (p.contains("items") && !p["items"].is_array()) items.push_back(p["items"]);
    if (p.contains("required") && p["required"].is_array())
      for (const SchemaJson& r : p["required"])
        if (std::find(required.begin(), required.end(), r) == required.end()) required.push_back(r);
  }
  if (!additional.empty()) out["additionalProperties"] = all_of(additional);
  if (!items.empty()) out["items"] = all_of(items);
  if (!required.empty()) out["required"] = required;
}

// The combination of parts without $ref, allOf, anyOf or oneOf.
Result<SchemaJson> combine(const std::vector<SchemaJson>& parts, const std::string& at) {
  SchemaJson out = SchemaJson::object();
  std::optional<std::set<std::string>> types;
  std::optional<SchemaJson> values;  // enum/const, intersected
  for (const SchemaJson& p : parts) {
    PAGODA_ASSIGN_OR_RETURN(auto pt, part_types(p, at));
    if (pt) types = types ? intersect_types(*types, *pt) : *pt;
    for (const auto& [key, value] : p.items()) {
      if (is_ignored_keyword(key) || key == "type" || key == "properties" || key == "required" ||
          key == "additionalProperties" || (key == "items" && !value.is_array()))
        continue;
      if (key == "enum" || key == "const") {
        if (key == "enum" && !value.is_array()) return schema_error(at, "enum", "must be an array");
        const SchemaJson list = key == "enum" ? value : SchemaJson::array({value});
        SchemaJson kept = SchemaJson::array();
        for (const SchemaJson& v : list)
          if (!values || std::find(values->begin(), values->end(), v) != values->end())
            kept.push_back(v);
        values = kept;
      } else if (contains(kLowerBounds, key) || contains(kUpperBounds, key)) {
        if (!value.is_number()) return schema_error(at, key, "must be a number");
        const bool lower = contains(kLowerBounds, key);
        if (!out.contains(key) || (lower ? value > out[key] : value < out[key])) out[key] = value;
      } else if (out.contains(key) && out[key] != value) {
        return schema_error(at, "allOf",
                            fmt::format("cannot merge two different '{}' of its subschemas", key));
      } else {
        out[key] = value;
      }
    }
  }
  merge_properties(parts, out);
  if (types) {
    if (types->empty()) return schema_error(at, "allOf", "the subschemas' types do not intersect");
    out["type"] = SchemaJson(std::vector<std::string>(types->begin(), types->end()));
  }
  if (values) {
    if (values->empty())
      return schema_error(at, "allOf", "no value is in every subschema's enum/const");
    out["enum"] = *values;
  }
  return out;
}

}  // namespace

Result<SchemaJson> merge_schemas(const std::vector<SchemaJson>& parts,
                                 const SchemaRefResolver& resolve, const std::string& at,
                                 int depth) {
  if (depth > kMaxSchemaDepth)
    return schema_error(at, "allOf", "nested more than 64 levels deep (or a $ref loop)");
  std::vector<SchemaJson> flat;
  for (const SchemaJson& part : parts)
    PAGODA_RETURN_IF_ERROR(flatten(part, resolve, at, depth, flat));
  for (size_t i = 0; i < flat.size(); ++i) {
    const char* key = flat[i].contains("anyOf")   ? "anyOf"
                      : flat[i].contains("oneOf") ? "oneOf"
                                                  : nullptr;
    if (key == nullptr) continue;
    const SchemaJson alternatives = flat[i][key];
    if (!alternatives.is_array() || alternatives.empty())
      return schema_error(at, key, "must be a non-empty array");
    flat[i].erase(key);
    SchemaJson merged = SchemaJson::array();
    for (const SchemaJson& alt : alternatives) {
      std::vector<SchemaJson> with_alt = flat;
      with_alt.push_back(alt);
      PAGODA_ASSIGN_OR_RETURN(SchemaJson m, merge_schemas(with_alt, resolve, at, depth + 1));
      if (m.is_object() && m.size() == 1 && m.contains("anyOf")) {
        for (SchemaJson& a : m["anyOf"]) merged.push_back(std::move(a));
      } else {
        merged.push_back(std::move(m));
      }
      if (merged.size() > kMaxAlternatives)
        return schema_error(at, key, "more than 256 alternatives after distributing allOf");
    }
    if (merged.size() == 1) return merged[0];
    return SchemaJson{{"anyOf", merged}};
  }
  return combine(flat, at);
}

}  // namespace pagoda::grammar
