#include "grammar/json_schema_to_gbnf.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "core/utf8.h"
#include "grammar/gbnf_writer.h"
#include "grammar/json_decimal.h"
#include "grammar/json_gbnf_primitives.h"
#include "grammar/json_schema_keywords.h"
#include "grammar/json_schema_merge.h"
#include "grammar/json_string_pattern.h"
#include "grammar/number_range_gbnf.h"

namespace pagoda::grammar {

namespace {

constexpr const char* kQuote = R"("\"")";  // the GBNF literal of one '"'
// The bounds a JSON Schema integer or number may have (int64 with room to negate).
constexpr double kMaxBound = 1e18;
// Generated expressions nest groups at most this deep before a level becomes
// a rule of its own (parse_gbnf refuses groups nested deeper than 100).
constexpr int kRuleEveryNesting = 32;

std::string join_alternatives(const std::vector<std::string>& alts) {
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t i = 0; i < alts.size(); ++i) out += (i == 0 ? " " : " | ") + alts[i];
  return out + " )";
}

// Nesting depth of a JSON value, counted up to `limit` + 1.
int value_depth(const SchemaJson& v, int limit) {
  if (limit < 0 || !v.is_structured()) return 0;
  int deepest = 0;
  for (const SchemaJson& child : v) deepest = std::max(deepest, value_depth(child, limit - 1));
  return deepest + 1;
}

bool value_has_type(const SchemaJson& v, std::string_view type) {
  if (type == "null") return v.is_null();
  if (type == "boolean") return v.is_boolean();
  if (type == "string") return v.is_string();
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "number") return v.is_number();
  if (type == "integer")
    return v.is_number_integer() ||
           (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>());
  return false;
}

// A keyword from the unsupported list whose value constrains nothing.
bool is_noop_keyword(std::string_view key, const SchemaJson& value) {
  if (key == "uniqueItems") return value == false;
  if (key == "minProperties") return value == 0;
  return value.is_object() && value.empty() &&
         (key == "patternProperties" || key == "dependentRequired" || key == "dependentSchemas" ||
          key == "dependencies");
}

class SchemaConverter {
 public:
  SchemaConverter(const SchemaJson& root, BoundDecimals bound_decimals)
      : root_(root), bound_decimals_(std::move(bound_decimals)) {
    rules_.reserve("root");
    reserve_json_primitive_names(rules_);
  }

  Result<std::string> convert() {
    ref_rules_["#"] = "root";  // "$ref": "#" names the root rule itself
    left_refs_.push_back("#");
    PAGODA_ASSIGN_OR_RETURN(std::string root, visit(root_, "", "value", 0));
    rules_.define("root", std::move(root));
    if (rules_.num_bytes() > kMaxGrammarBytes)
      return schema_error("", "schema", "the grammar would be larger than 4 MiB");
    return rules_.text();
  }

 private:
  // Clears the references expanded since the last '[' or '{' while a
  // container's children are visited: a reference back to one of them from
  // there consumes bytes first, so it is no left recursion.
  class ContainerScope {
   public:
    explicit ContainerScope(std::vector<std::string>& refs) : refs_(refs), saved_(std::move(refs)) {
      refs_.clear();
    }
    ~ContainerScope() { refs_ = std::move(saved_); }

   private:
    std::vector<std::string>& refs_;
    std::vector<std::string> saved_;
  };

  std::string use(JsonPrimitive which) { return use_json_primitive(rules_, which); }

  // An expression (a rule name, a literal or a parenthesised group) for the
  // JSON texts `schema` accepts. `ptr` is its JSON pointer (for errors),
  // `hint` a name for the rules made for it.
  Result<std::string> visit(const SchemaJson& s, const std::string& ptr, const std::string& hint,
                            int depth) {
    if (depth > kMaxSchemaDepth)
      return schema_error(ptr, "schema",
                          fmt::format("nested more than {} levels deep", kMaxSchemaDepth));
    if (rules_.num_bytes() > kMaxGrammarBytes)
      return schema_error(ptr, "schema", "the grammar would be larger than 4 MiB");
    if (s.is_boolean()) {
      if (s.get<bool>()) return use(JsonPrimitive::kValue);
      return schema_error(ptr, "false", "the schema false accepts no value");
    }
    if (!s.is_object()) return schema_error(ptr, "schema", "must be an object or a boolean");
    for (const auto& [key, value] : s.items())
      if (is_unsupported_keyword(key) && !is_noop_keyword(key, value))
        return schema_error(ptr, key, "not supported (the grammar cannot enforce it)");
    if (const SchemaJson* only = sole_all_of_part(s)) {  // e.g. {"allOf": [{"$ref": ...}]}
      const size_t i = static_cast<size_t>(only - &s["allOf"][0]);
      return visit(*only, pointer_child(pointer_child(ptr, "allOf"), std::to_string(i)), hint,
                   depth + 1);
    }
    const bool has_any_of = s.contains("anyOf") || s.contains("oneOf");
    if (s.contains("allOf") || (s.contains("$ref") && has_validation_keywords(s, {"$ref"})) ||
        (has_any_of && has_validation_keywords(s, {"anyOf", "oneOf"})) ||
        (s.contains("anyOf") && s.contains("oneOf"))) {
      PAGODA_ASSIGN_OR_RETURN(SchemaJson merged, merge_schemas({s}, resolver(), ptr, depth + 1));
      return visit(merged, ptr, hint, depth + 1);
    }
    if (s.contains("$ref")) return ref_rule(s["$ref"], ptr, depth);
    if (has_any_of) return visit_any_of(s, ptr, hint, depth);
    if (s.contains("enum") || s.contains("const")) return visit_enum(s, ptr, hint);
    PAGODA_ASSIGN_OR_RETURN(std::vector<std::string> types, types_of(s, ptr));
    if (types.empty()) return use(JsonPrimitive::kValue);
    std::vector<std::string> alts;
    for (const std::string& type : types) {
      PAGODA_ASSIGN_OR_RETURN(std::string alt, visit_type(type, s, ptr, hint, depth));
      alts.push_back(std::move(alt));
    }
    return join_alternatives(alts);
  }

  // The one part of an allOf that constrains anything when the schema has no
  // other validation keyword (Pydantic v1 writes {"allOf": [{"$ref": ...}],
  // "description": ...}); visiting it directly keeps a $ref a rule reference,
  // which recursive schemas need. nullptr otherwise.
  static const SchemaJson* sole_all_of_part(const SchemaJson& s) {
    if (!s.contains("allOf") || !s["allOf"].is_array() || has_validation_keywords(s, {"allOf"}))
      return nullptr;
    const SchemaJson* only = nullptr;
    for (const SchemaJson& part : s["allOf"]) {
      const bool constrains = part.is_object() ? has_validation_keywords(part, {}) : part != true;
      if (!constrains) continue;
      if (only) return nullptr;
      only = &part;
    }
    return only;
  }

  Result<std::string> visit_type(const std::string& type, const SchemaJson& s,
                                 const std::string& ptr, const std::string& hint, int depth) {
    if (type == "object") return visit_object(s, ptr, hint, depth);
    if (type == "array") return visit_array(s, ptr, hint, depth);
    if (type == "string") return visit_string(s, ptr, hint);
    if (type == "integer") return visit_integer(s, ptr, hint);
    if (type == "number") return visit_number(s, ptr, hint);
    if (type == "boolean") return use(JsonPrimitive::kBoolean);
    return use(JsonPrimitive::kNull);
  }

  // The types a schema allows, in a fixed order ("number" absorbs "integer");
  // without "type", the types its keywords apply to; empty: any value.
  Result<std::vector<std::string>> types_of(const SchemaJson& s, const std::string& ptr) {
    static constexpr std::string_view kOrder[] = {"object",  "array",   "string", "number",
                                                  "integer", "boolean", "null"};
    std::vector<std::string_view> named;
    if (s.contains("type")) {
      const SchemaJson& type = s["type"];
      if (type.is_array() && type.empty()) return schema_error(ptr, "type", "must not be empty");
      for (const SchemaJson& t : type.is_array() ? type : SchemaJson::array({type})) {
        const auto it = t.is_string()
                            ? std::find(std::begin(kOrder), std::end(kOrder), t.get<std::string>())
                            : std::end(kOrder);
        if (it == std::end(kOrder))
          return schema_error(ptr, "type", fmt::format("unknown type {}", t.dump()));
        named.push_back(*it);
      }
    } else {
      auto any_of = [&](std::initializer_list<const char*> keys) {
        return std::any_of(keys.begin(), keys.end(), [&](const char* k) { return s.contains(k); });
      };
      if (any_of({"properties", "required", "additionalProperties"})) named.push_back("object");
      if (any_of({"items", "prefixItems", "additionalItems", "minItems", "maxItems"}))
        named.push_back("array");
      if (any_of({"minLength", "maxLength", "pattern", "format"})) named.push_back("string");
      if (any_of({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"}))
        named.push_back("number");
      if (named.empty()) return std::vector<std::string>();
    }
    const bool has_number = std::find(named.begin(), named.end(), "number") != named.end();
    std::vector<std::string> types;
    for (std::string_view t : kOrder) {
      if (t == "integer" && has_number) continue;
      if (std::find(named.begin(), named.end(), t) != named.end()) types.emplace_back(t);
    }
    return types;
  }

  Result<std::string> visit_any_of(const SchemaJson& s, const std::string& ptr,
                                   const std::string& hint, int depth) {
    const char* key = s.contains("anyOf") ? "anyOf" : "oneOf";  // oneOf is read as anyOf
    const SchemaJson& alts = s[key];
    if (!alts.is_array() || alts.empty())
      return schema_error(ptr, key, "must be a non-empty array");
    if (alts.size() > kMaxAlternatives)
      return schema_error(ptr, key, fmt::format("more than {} alternatives", kMaxAlternatives));
    std::vector<std::string> exprs;
    for (size_t i = 0; i < alts.size(); ++i) {
      const std::string at = pointer_child(pointer_child(ptr, key), std::to_string(i));
      PAGODA_ASSIGN_OR_RETURN(std::string e, visit(alts[i], at, hint, depth + 1));
      if (std::find(exprs.begin(), exprs.end(), e) == exprs.end()) exprs.push_back(std::move(e));
    }
    return join_alternatives(exprs);
  }

  Result<std::string> visit_enum(const SchemaJson& s, const std::string& ptr,
                                 const std::string& hint) {
    for (const auto& [key, value] : s.items())
      if (key != "enum" && key != "const" && key != "type" &&
          has_validation_keywords(SchemaJson{{key, value}}, {}))
        return schema_error(ptr, key, "cannot be combined with enum or const");
    SchemaJson values = SchemaJson::array();
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty())
        return schema_error(ptr, "enum", "must be a non-empty array");
      values = s["enum"];
    }
    if (s.contains("const")) {
      if (s.contains("enum") && std::find(values.begin(), values.end(), s["const"]) == values.end())
        return schema_error(ptr, "const", "is not one of the enum values");
      values = SchemaJson::array({s["const"]});
    }
    const char* keyword = s.contains("const") ? "const" : "enum";
    if (values.size() > kMaxEnumValues)
      return schema_error(ptr, keyword, fmt::format("more than {} values", kMaxEnumValues));
    std::vector<std::string> types;
    if (s.contains("type")) {
      PAGODA_ASSIGN_OR_RETURN(types, types_of(s, ptr));
      if (std::find(types.begin(), types.end(), "number") != types.end())
        types.push_back("integer");
    }
    std::vector<std::string> texts;  // the values' compact JSON
    size_t num_bytes = 0;
    for (const SchemaJson& v : values) {
      if (value_depth(v, kMaxSchemaDepth) > kMaxSchemaDepth)
        return schema_error(
            ptr, keyword, fmt::format("a value nested more than {} levels deep", kMaxSchemaDepth));
      const bool typed = types.empty() || std::any_of(types.begin(), types.end(), [&](auto& t) {
                           return value_has_type(v, t);
                         });
      if (!typed) continue;
      texts.push_back(v.dump());
      num_bytes += texts.back().size();
    }
    if (texts.empty()) return schema_error(ptr, keyword, "no value has the schema's type");
    if (rules_.num_bytes() + num_bytes > kMaxGrammarBytes)
      return schema_error(ptr, keyword, "the grammar would be larger than 4 MiB");
    return gbnf_literal_alternatives(std::move(texts), hint + "-enum", rules_);
  }

  // A non-negative integer keyword (minItems, maxLength, ...) up to kMaxRepetitions.
  Result<std::optional<uint64_t>> read_count(const SchemaJson& s, const char* key,
                                             const std::string& ptr) {
    if (!s.contains(key)) return std::optional<uint64_t>();
    const SchemaJson& v = s[key];
    if (!value_has_type(v, "integer") || v.get<double>() < 0)
      return schema_error(ptr, key, "must be a non-negative integer");
    if (v.get<double>() > static_cast<double>(kMaxRepetitions))
      return schema_error(ptr, key,
                          fmt::format("{} is above the supported {}", v.dump(), kMaxRepetitions));
    return std::optional<uint64_t>(v.get<uint64_t>());
  }

  Result<std::string> visit_string(const SchemaJson& s, const std::string& ptr,
                                   const std::string& hint) {
    PAGODA_ASSIGN_OR_RETURN(auto min_len, read_count(s, "minLength", ptr));
    PAGODA_ASSIGN_OR_RETURN(auto max_len, read_count(s, "maxLength", ptr));
    const uint64_t lo = min_len.value_or(0);
    if (max_len && *max_len < lo) return schema_error(ptr, "minLength", "is above maxLength");
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) return schema_error(ptr, "pattern", "must be a string");
      if (s.contains("format"))
        return schema_error(ptr, "pattern", "cannot be combined with format");
      const std::string pattern = s["pattern"].get<std::string>();
      auto content =
          min_len || max_len
              ? define_pattern_content_with_length(pattern, lo, max_len, hint + "-pattern", rules_)
              : define_pattern_content(pattern, hint + "-pattern", rules_);
      if (!content.ok()) return schema_error(ptr, "pattern", content.error().message);
      return fmt::format("( {} {} {} )", kQuote, content.value(), kQuote);
    }
    if (s.contains("format")) {
      if (!s["format"].is_string()) return schema_error(ptr, "format", "must be a string");
      const std::string format = s["format"].get<std::string>();
      const std::optional<JsonPrimitive> which = json_format_primitive(format);
      if (!which)
        return schema_error(
            ptr, "format",
            fmt::format("'{}' is not supported (supported: {})", format, supported_json_formats()));
      if (min_len || max_len)
        return schema_error(ptr, "format", "cannot be combined with minLength or maxLength");
      return fmt::format("( {} {} {} )", kQuote, use(*which), kQuote);
    }
    if (!min_len && !max_len) return use(JsonPrimitive::kString);
    const std::string count =
        max_len ? fmt::format("{{{},{}}}", lo, *max_len) : fmt::format("{{{},}}", lo);
    return fmt::format("( {} {}{} {} )", kQuote, use(JsonPrimitive::kStringChar), count, kQuote);
  }

  // A numeric keyword's exact value, within +-kMaxBound.
  Result<std::optional<JsonDecimal>> read_bound(const SchemaJson& s, const char* key,
                                                const std::string& ptr) {
    if (!s.contains(key) || s[key].is_boolean()) return std::optional<JsonDecimal>();
    if (!s[key].is_number()) return schema_error(ptr, key, "must be a number");
    if (std::fabs(s[key].get<double>()) > kMaxBound)
      return schema_error(ptr, key, "beyond the supported range of +-1e18");
    auto exact = bound_decimals_.exact(s[key]);
    if (!exact.ok()) return schema_error(ptr, key, exact.error().message);
    return std::optional<JsonDecimal>(exact.value());
  }

  // Bounds as [lower, upper] candidates: minimum/maximum, exclusive* (numbers
  // or draft 4's booleans that make minimum/maximum exclusive).
  struct Bounds {
    std::optional<JsonDecimal> minimum, maximum, exclusive_minimum, exclusive_maximum;
  };
  Result<Bounds> read_bounds(const SchemaJson& s, const std::string& ptr) {
    Bounds b;
    PAGODA_ASSIGN_OR_RETURN(b.minimum, read_bound(s, "minimum", ptr));
    PAGODA_ASSIGN_OR_RETURN(b.maximum, read_bound(s, "maximum", ptr));
    PAGODA_ASSIGN_OR_RETURN(b.exclusive_minimum, read_bound(s, "exclusiveMinimum", ptr));
    PAGODA_ASSIGN_OR_RETURN(b.exclusive_maximum, read_bound(s, "exclusiveMaximum", ptr));
    if (s.value("exclusiveMinimum", SchemaJson()) == true)
      std::swap(b.minimum, b.exclusive_minimum);
    if (s.value("exclusiveMaximum", SchemaJson()) == true)
      std::swap(b.maximum, b.exclusive_maximum);
    return b;
  }

  // Bounded integers and numbers are rules of their own: their digit-by-digit
  // grammars nest groups about 20 deep.
  Result<std::string> visit_integer(const SchemaJson& s, const std::string& ptr,
                                    const std::string& hint) {
    PAGODA_ASSIGN_OR_RETURN(Bounds b, read_bounds(s, ptr));
    std::optional<int64_t> lo, hi;
    auto raise = [&](int64_t x) { lo = lo ? std::max(*lo, x) : x; };
    auto lower = [&](int64_t x) { hi = hi ? std::min(*hi, x) : x; };
    if (b.minimum) raise(b.minimum->ceil());
    if (b.exclusive_minimum) raise(b.exclusive_minimum->floor() + 1);
    if (b.maximum) lower(b.maximum->floor());
    if (b.exclusive_maximum) lower(b.exclusive_maximum->ceil() - 1);
    if (!lo && !hi) return use(JsonPrimitive::kInteger);
    std::string expr = integer_range_gbnf(lo, hi);
    if (expr.empty()) return schema_error(ptr, "minimum", "no integer lies within the bounds");
    return rules_.define(rules_.fresh_name(hint + "-integer"), std::move(expr));
  }

  Result<std::string> visit_number(const SchemaJson& s, const std::string& ptr,
                                   const std::string& hint) {
    PAGODA_ASSIGN_OR_RETURN(Bounds b, read_bounds(s, ptr));
    // Of an inclusive and an exclusive bound on one side, the tighter one.
    auto pick = [](const std::optional<JsonDecimal>& incl, const std::optional<JsonDecimal>& excl,
                   bool lower) {
      std::optional<NumberBound> out;
      if (incl) out = NumberBound{*incl, false};
      if (excl && (!incl || (lower ? *excl >= *incl : *excl <= *incl)))
        out = NumberBound{*excl, true};
      return out;
    };
    const auto lo = pick(b.minimum, b.exclusive_minimum, true);
    const auto hi = pick(b.maximum, b.exclusive_maximum, false);
    if (!lo && !hi) return use(JsonPrimitive::kNumber);
    std::string expr = number_range_gbnf(lo, hi);
    if (expr.empty()) return schema_error(ptr, "minimum", "no number lies within the bounds");
    return rules_.define(rules_.fresh_name(hint + "-number"), std::move(expr));
  }

  Result<std::string> visit_array(const SchemaJson& s, const std::string& ptr,
                                  const std::string& hint, int depth);
  Result<std::string> visit_object(const SchemaJson& s, const std::string& ptr,
                                   const std::string& hint, int depth);
  std::string property_name_rule(const std::vector<std::string>& excluded, const std::string& hint);

  SchemaRefResolver resolver() {
    return [this](const std::string& ref, const std::string& at) { return resolve(ref, at); };
  }

  Result<const SchemaJson*> resolve(const std::string& ref, const std::string& at) {
    if (ref.empty() || ref[0] != '#')
      return schema_error(at, "$ref",
                          fmt::format("'{}': only references within the schema ('#...') are "
                                      "supported",
                                      ref));
    try {
      return &root_.at(SchemaJson::json_pointer(ref.substr(1)));
    } catch (const nlohmann::json::exception&) {
      return schema_error(at, "$ref", fmt::format("'{}' does not resolve within the schema", ref));
    }
  }

  // The rule of a referenced schema: one per distinct reference, defined on
  // first use, so that recursive schemas become recursive rules.
  Result<std::string> ref_rule(const SchemaJson& value, const std::string& ptr, int depth) {
    if (!value.is_string()) return schema_error(ptr, "$ref", "must be a string");
    const std::string ref = value.get<std::string>();
    if (const auto it = ref_rules_.find(ref); it != ref_rules_.end()) {
      if (std::find(left_refs_.begin(), left_refs_.end(), ref) != left_refs_.end())
        return schema_error(ptr, "$ref",
                            fmt::format("'{}' refers back to itself without an enclosing object "
                                        "or array, so no finite value matches",
                                        ref));
      return it->second;
    }
    PAGODA_ASSIGN_OR_RETURN(const SchemaJson* target, resolve(ref, ptr));
    const std::string token = ref.substr(ref.rfind('/') + 1);
    const std::string name = rules_.fresh_name("def-" + token);
    ref_rules_[ref] = name;
    left_refs_.push_back(ref);
    PAGODA_ASSIGN_OR_RETURN(std::string expr, visit(*target, ref.substr(1), token, depth + 1));
    left_refs_.pop_back();
    rules_.define(name, std::move(expr));
    return name;
  }

  const SchemaJson& root_;
  const BoundDecimals bound_decimals_;
  GbnfRuleSet rules_;
  std::unordered_map<std::string, std::string> ref_rules_;  // "$ref" value -> rule name
  std::vector<std::string> left_refs_;  // refs being expanded since the last '[' or '{'
};

// Arrays: "[" ws (E0 ws ("," ws Ei ws)*)? "]" where element i follows
// prefixItems[i] (or items for a draft-4 items array), later elements follow
// items (or additionalItems after an items array); with prefix items and no
// schema for the rest, no further elements. minItems/maxItems bound the count.
Result<std::string> SchemaConverter::visit_array(const SchemaJson& s, const std::string& ptr,
                                                 const std::string& hint, int depth) {
  PAGODA_ASSIGN_OR_RETURN(auto min_items, read_count(s, "minItems", ptr));
  PAGODA_ASSIGN_OR_RETURN(auto max_items, read_count(s, "maxItems", ptr));
  const uint64_t min_count = min_items.value_or(0);
  use(JsonPrimitive::kWs);
  if (max_items && *max_items < min_count)
    return schema_error(ptr, "minItems", "is above maxItems");
  const SchemaJson any = true;
  const SchemaJson* prefix = nullptr;
  std::string prefix_key;
  const SchemaJson* rest = &any;  // nullptr: no elements after the prefix
  std::string rest_key = "items";
  if (s.contains("prefixItems")) {
    prefix = &s["prefixItems"];
    prefix_key = "prefixItems";
    rest = s.contains("items") ? &s["items"] : nullptr;
  } else if (s.contains("items") && s["items"].is_array()) {
    prefix = &s["items"];
    prefix_key = "items";
    rest = s.contains("additionalItems") ? &s["additionalItems"] : nullptr;
    rest_key = "additionalItems";
  } else if (s.contains("items")) {
    rest = &s["items"];
  }
  if (prefix && !prefix->is_array())
    return schema_error(ptr, prefix_key, "must be an array of schemas");
  const size_t num_prefix = prefix ? prefix->size() : 0;
  if (num_prefix > kMaxRepetitions)
    return schema_error(ptr, prefix_key, fmt::format("more than {} schemas", kMaxRepetitions));
  if (rest && rest->is_boolean() && !rest->get<bool>()) rest = nullptr;
  if (!rest && min_count > num_prefix)
    return schema_error(ptr, "minItems",
                        fmt::format("is above the {} elements the schema allows", num_prefix));

  std::vector<std::string> elements;  // per prefix element, then the rest's
  {
    ContainerScope scope(left_refs_);
    for (size_t i = 0; i < num_prefix; ++i) {
      const std::string at = pointer_child(pointer_child(ptr, prefix_key), std::to_string(i));
      PAGODA_ASSIGN_OR_RETURN(std::string e, visit((*prefix)[i], at, hint + "-item", depth + 1));
      elements.push_back(std::move(e));
    }
    if (rest) {
      PAGODA_ASSIGN_OR_RETURN(
          std::string e, visit(*rest, pointer_child(ptr, rest_key), hint + "-item", depth + 1));
      elements.push_back(std::move(e));
    }
  }
  // Most elements: the prefix alone without a rest schema, or maxItems.
  std::optional<uint64_t> max_count = max_items;
  if (!rest) max_count = std::min<uint64_t>(max_count.value_or(num_prefix), num_prefix);
  // The elements after the prefix (after the first element when there is no
  // prefix), each after ","; then, from the back, the prefix elements 1.., each
  // optional from index minItems on.
  const uint64_t first_rest = std::max<uint64_t>(num_prefix, 1);
  std::string tail;
  if (rest && (!max_count || *max_count > first_rest)) {
    const uint64_t lo = min_count > first_rest ? min_count - first_rest : 0;
    const std::string count = max_count ? fmt::format("{{{},{}}}", lo, *max_count - first_rest)
                              : lo == 0 ? std::string("*")
                                        : fmt::format("{{{},}}", lo);
    tail = fmt::format("( \",\" ws {} ws ){}", elements.back(), count);
  }
  const uint64_t num_fixed = std::min<uint64_t>(num_prefix, max_count.value_or(num_prefix));
  for (size_t i = num_fixed; i-- > 1;) {
    std::string item = fmt::format("\",\" ws {} ws", elements[i]);
    if (!tail.empty()) item += " " + tail;
    tail = i >= min_count ? "( " + item + " )?" : item;
    if ((num_fixed - i) % kRuleEveryNesting == 0)  // parse_gbnf bounds group nesting
      tail = rules_.define(rules_.fresh_name(hint + "-rest"), tail);
  }
  std::string body;
  if (!max_count || *max_count > 0) {
    body = elements[0] + " ws" + (tail.empty() ? "" : " " + tail);
    if (min_count == 0) body = "( " + body + " )?";
  }
  return rules_.define(rules_.fresh_name(hint),
                       fmt::format("\"[\" ws {}{}\"]\"", body, body.empty() ? "" : " "));
}

// Objects: "{" ws (members separated by "," ws) "}", each member
// key ws ":" ws value ws. Properties come in the schema's order, required
// ones always, optional ones possibly absent; then additional properties
// (names other than the declared ones, written without escapes) where allowed:
// additionalProperties true or a schema, or absent on a schema without
// "properties" (xgrammar's strict default for vLLM: declared properties only).
Result<std::string> SchemaConverter::visit_object(const SchemaJson& s, const std::string& ptr,
                                                  const std::string& hint, int depth) {
  const SchemaJson empty = SchemaJson::object();
  const SchemaJson& properties = s.contains("properties") ? s["properties"] : empty;
  if (!properties.is_object()) return schema_error(ptr, "properties", "must be an object");
  std::vector<std::string> required;
  if (s.contains("required")) {
    if (!s["required"].is_array()) return schema_error(ptr, "required", "must be an array");
    for (const SchemaJson& r : s["required"]) {
      if (!r.is_string()) return schema_error(ptr, "required", "must hold only strings");
      if (std::find(required.begin(), required.end(), r) == required.end()) required.push_back(r);
    }
  }
  const SchemaJson any = true;
  const SchemaJson* additional = s.contains("properties") ? nullptr : &any;
  if (s.contains("additionalProperties")) {
    additional = &s["additionalProperties"];
    if (additional->is_boolean() && !additional->get<bool>()) additional = nullptr;
  }
  use(JsonPrimitive::kWs);
  const std::string name = rules_.fresh_name(hint);
  struct Member {
    std::string text;  // key ws ":" ws value ws
    bool required = false;
  };
  std::vector<Member> members;
  size_t num_member_bytes = 0;  // members are written into rules at the end
  std::vector<std::string> declared;
  std::string additional_member;
  {
    ContainerScope scope(left_refs_);
    auto add_member = [&](const std::string& key, const SchemaJson& schema,
                          const std::string& at) -> Status {
      const bool is_required = std::find(required.begin(), required.end(), key) != required.end();
      declared.push_back(key);
      if (schema.is_boolean() && !schema.get<bool>()) {
        if (is_required)
          return schema_error(ptr, "required",
                              fmt::format("'{}' is required but its schema is false", key));
        return Status::Ok();
      }
      PAGODA_ASSIGN_OR_RETURN(std::string value, visit(schema, at, name + "-" + key, depth + 1));
      members.push_back(
          {fmt::format("{} ws \":\" ws {} ws", gbnf_literal(SchemaJson(key).dump()), value),
           is_required});
      num_member_bytes += members.back().text.size();
      if (rules_.num_bytes() + num_member_bytes > kMaxGrammarBytes)
        return schema_error(at, "schema", "the grammar would be larger than 4 MiB");
      return Status::Ok();
    };
    for (const auto& [key, schema] : properties.items())
      PAGODA_RETURN_IF_ERROR(
          add_member(key, schema, pointer_child(pointer_child(ptr, "properties"), key)));
    for (const std::string& key : required) {
      if (properties.contains(key)) continue;
      if (s.contains("additionalProperties") && !additional)
        return schema_error(ptr, "required",
                            fmt::format("'{}' is required but not in properties, and "
                                        "additionalProperties is false",
                                        key));
      PAGODA_RETURN_IF_ERROR(add_member(key, additional ? *additional : any,
                                        pointer_child(ptr, "additionalProperties")));
    }
    if (additional) {
      PAGODA_ASSIGN_OR_RETURN(std::string value,
                              visit(*additional, pointer_child(ptr, "additionalProperties"),
                                    name + "-additional", depth + 1));
      const std::string key = declared.empty() ? use(JsonPrimitive::kString)
                                               : property_name_rule(declared, name + "-key");
      additional_member = fmt::format("{} ws \":\" ws {} ws", key, value);
    }
  }
  // tail(i): members i.. after at least one member came; first(i): members
  // i.. with at least one of them (or an additional one) present. Where
  // several places refer to them (i up to the first required member r), they
  // are rules, so no group nests deeper than one level.
  const size_t n = members.size();
  size_t first_required = n;
  for (size_t i = 0; i < n; ++i)
    if (members[i].required) {
      first_required = i;
      break;
    }
  const std::string additional_tail =
      additional_member.empty() ? "" : fmt::format("( \",\" ws {} )*", additional_member);
  auto join = [](std::string a, const std::string& b) {
    return a.empty() ? b : b.empty() ? a : a + " " + b;
  };
  auto tail_item = [&](size_t i) {
    const std::string item = "\",\" ws " + members[i].text;
    return members[i].required ? item : "( " + item + " )?";
  };
  std::vector<std::string> tail_rule(n + 1);
  auto tail = [&](size_t i) {
    if (i <= first_required && i < n) return tail_rule[i];
    std::string out;
    for (size_t k = i; k < n; ++k) out = join(out, tail_item(k));
    return join(out, additional_tail);
  };
  for (size_t i = n == 0 ? 0 : std::min(first_required, n - 1) + 1; i-- > 1;)
    tail_rule[i] =
        rules_.define(rules_.fresh_name(name + "-tail"), join(tail_item(i), tail(i + 1)));
  std::string first =
      additional_member.empty() ? "" : join(additional_member, additional_tail);  // first(n)
  for (size_t i = n == 0 ? 0 : std::min(first_required, n - 1) + 1; i-- > 0;) {
    const std::string with = join(members[i].text, tail(i + 1));
    const std::string body = members[i].required || first.empty() ? with : with + " | " + first;
    first = i == 0 ? body : rules_.define(rules_.fresh_name(name + "-first"), body);
  }
  std::string head;
  if (!first.empty()) head = first_required < n ? "( " + first + " ) " : "( " + first + " )? ";
  return rules_.define(name, fmt::format("\"{{\" ws {}\"}}\"", head));
}

// The content of a string other than any of `excluded`, written without
// escapes: a trie of the names, where each node allows its children's
// characters (continuing in the trie) or any other character (then anything).
std::string SchemaConverter::property_name_rule(const std::vector<std::string>& excluded,
                                                const std::string& hint) {
  struct Node {
    std::map<uint32_t, size_t> children;
    bool terminal = false;
  };
  std::vector<Node> trie(1);
  for (const std::string& key : excluded) {
    if (key.find_first_of("\"\\") != std::string::npos ||
        std::any_of(key.begin(), key.end(),
                    [](char c) { return static_cast<unsigned char>(c) < 0x20; }))
      continue;  // needs escapes, which additional names never use
    size_t node = 0;
    for (size_t i = 0; i < key.size();) {
      const uint32_t cp = next_code_point(key, i);
      auto [it, inserted] = trie[node].children.emplace(cp, trie.size());
      if (inserted) trie.emplace_back();
      node = it->second;
    }
    trie[node].terminal = true;
  }
  const std::string key_char = use(JsonPrimitive::kKeyChar);
  // Iterative post-order: expression of each node from its children's.
  std::vector<std::string> expr(trie.size());
  std::vector<int> nesting(trie.size(), 0);  // group depth of expr[node]
  std::vector<std::pair<size_t, bool>> stack = {{0, false}};
  while (!stack.empty()) {
    auto [node, expanded] = stack.back();
    stack.pop_back();
    if (!expanded) {
      stack.push_back({node, true});
      for (const auto& [cp, child] : trie[node].children) stack.push_back({child, false});
      continue;
    }
    std::string other = R"([^"\\\x00-\x1F\uD800-\uDFFF)";
    std::vector<std::string> alts;
    for (const auto& [cp, child] : trie[node].children) {
      if (nesting[child] >= kRuleEveryNesting) {  // parse_gbnf bounds group nesting
        expr[child] = rules_.define(rules_.fresh_name(hint), expr[child]);
        nesting[child] = 0;
      }
      nesting[node] = std::max(nesting[node], nesting[child] + 1);
      std::string utf8;
      append_utf8(utf8, cp);
      alts.push_back(gbnf_literal(utf8) + " " + expr[child]);
      other += gbnf_class_char(cp);
      expr[child].clear();
    }
    alts.push_back(other + "] " + key_char + "*");
    expr[node] = "( ";
    for (size_t i = 0; i < alts.size(); ++i) expr[node] += (i ? " | " : "") + alts[i];
    expr[node] += trie[node].terminal ? " )" : " )?";
  }
  return rules_.define(rules_.fresh_name(hint), fmt::format("{} {} {}", kQuote, expr[0], kQuote));
}

}  // namespace

Result<std::string> json_schema_to_gbnf(std::string_view schema_json) {
  SchemaJson schema;
  try {
    schema = SchemaJson::parse(schema_json);
  } catch (const nlohmann::json::exception& e) {
    return schema_error("", "schema", fmt::format("not valid JSON ({})", e.what()));
  }
  SchemaConverter converter(schema, BoundDecimals::read(schema_json));
  return converter.convert();
}

std::string json_object_gbnf() {
  GbnfRuleSet rules;
  rules.reserve("root");
  rules.define("root", use_json_primitive(rules, JsonPrimitive::kObject));
  return rules.text();
}

}  // namespace pagoda::grammar
