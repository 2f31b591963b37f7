#include "grammar/json_gbnf_primitives.h"

#include <array>
#include <cstddef>

namespace pagoda::grammar {

namespace {

struct RuleDef {
  const char* name;
  const char* body;
};

// Every fixed rule. Bodies refer to each other by name only; use() defines
// the ones a body names. Character classes write '-' as \x2D where it is a
// literal so that no reader can take it for a range.
constexpr RuleDef kRules[] = {
    {"ws", R"(| " " | "\n" [ \t]{0,20})"},
    {"json-value",
     "json-object | json-array | json-string | json-number | json-boolean | json-null"},
    {"json-object",
     R"("{" ws ( json-string ws ":" ws json-value ws ( "," ws json-string ws ":" ws json-value ws )* )? "}")"},
    {"json-array", R"("[" ws ( json-value ws ( "," ws json-value ws )* )? "]")"},
    {"json-string", R"("\"" json-char* "\"")"},
    // A code point other than '"', '\', a control character or a surrogate,
    // or an escape; \u escapes never leave a lone surrogate (strict JSON
    // parsers reject those).
    {"json-char", R"([^"\\\x00-\x1F\uD800-\uDFFF] | "\\" json-escape)"},
    {"json-escape", R"(["\\/bfnrt] | "u" json-u-escape)"},
    {"json-u-escape",
     R"([0-9a-cA-Ce-fE-F] json-hex json-hex json-hex | [dD] [0-7] json-hex json-hex | [dD] [89abAB] json-hex json-hex "\\u" [dD] [c-fC-F] json-hex json-hex)"},
    {"json-key-char", R"([^"\\\x00-\x1F\uD800-\uDFFF])"},
    {"json-hex", "[0-9a-fA-F]"},
    {"json-number", R"("-"? json-int-part ( "." [0-9]{1,16} )? ( [eE] [+\x2D]? [0-9]{1,2} )?)"},
    {"json-integer", R"("-"? json-int-part)"},
    {"json-int-part", R"("0" | [1-9] [0-9]{0,15})"},
    {"json-boolean", R"("true" | "false")"},
    {"json-null", R"("null")"},
    // RFC 3339 full-date: real month lengths and leap years; years 0001-9999.
    {"fmt-date",
     R"(fmt-year "-" ( fmt-month31 "-" fmt-day31 | fmt-month30 "-" fmt-day30 | "02-" fmt-day28 ) | fmt-leap-year "-02-29")"},
    {"fmt-year", R"([1-9] [0-9]{3} | "0" [1-9] [0-9]{2} | "00" [1-9] [0-9] | "000" [1-9])"},
    {"fmt-leap-year", R"([0-9]{2} fmt-leap-yy | fmt-leap-yy "00")"},
    {"fmt-leap-yy", R"("0" [48] | [2468] [048] | [13579] [26])"},
    {"fmt-month31", R"("0" [13578] | "1" [02])"},
    {"fmt-month30", R"("0" [469] | "11")"},
    {"fmt-day28", R"("0" [1-9] | "1" [0-9] | "2" [0-8])"},
    {"fmt-day30", R"(fmt-day28 | "29" | "30")"},
    {"fmt-day31", R"(fmt-day30 | "31")"},
    // RFC 3339 full-time: hh:mm:ss, 1-9 fraction digits, "Z" or a +hh:mm offset.
    {"fmt-time",
     R"(fmt-hour ":" [0-5] [0-9] ":" [0-5] [0-9] ( "." [0-9]{1,9} )? ( "Z" | [+\x2D] fmt-hour ":" [0-5] [0-9] ))"},
    {"fmt-hour", R"([01] [0-9] | "2" [0-3])"},
    {"fmt-date-time", R"(fmt-date "T" fmt-time)"},
    // ISO 8601 duration: PnW, or PnYnMnD with an optional TnHnMnS (n: 1-9 digits,
    // at least one component, seconds may have a fraction).
    {"fmt-duration",
     R"("P" ( [0-9]{1,9} "W" | fmt-dur-date ( "T" fmt-dur-time )? | "T" fmt-dur-time ))"},
    {"fmt-dur-date",
     R"([0-9]{1,9} "Y" ( [0-9]{1,9} "M" )? ( [0-9]{1,9} "D" )? | [0-9]{1,9} "M" ( [0-9]{1,9} "D" )? | [0-9]{1,9} "D")"},
    {"fmt-dur-time",
     R"([0-9]{1,9} "H" ( [0-9]{1,9} "M" )? fmt-dur-sec? | [0-9]{1,9} "M" fmt-dur-sec? | fmt-dur-sec)"},
    {"fmt-dur-sec", R"([0-9]{1,9} "S")"},
    {"fmt-uuid", R"(json-hex{8} "-" json-hex{4} "-" json-hex{4} "-" json-hex{4} "-" json-hex{12})"},
    // dot-atom local part "@" a domain of at least two labels.
    {"fmt-email", R"(fmt-email-atom ( "." fmt-email-atom )* "@" fmt-label ( "." fmt-label )+)"},
    {"fmt-email-atom", R"([a-zA-Z0-9!#$%&'*+/=?^_`{|}~\x2D]+)"},
    {"fmt-ipv4", R"(fmt-dec-octet "." fmt-dec-octet "." fmt-dec-octet "." fmt-dec-octet)"},
    {"fmt-dec-octet", R"("25" [0-5] | "2" [0-4] [0-9] | "1" [0-9] [0-9] | [1-9] [0-9] | [0-9])"},
    // RFC 3986's IPv6address, alternative by alternative.
    {"fmt-ipv6",
     R"(( fmt-h16 ":" ){6} fmt-ls32 | "::" ( fmt-h16 ":" ){5} fmt-ls32 | fmt-h16? "::" ( fmt-h16 ":" ){4} fmt-ls32 | ( ( fmt-h16 ":" ){0,1} fmt-h16 )? "::" ( fmt-h16 ":" ){3} fmt-ls32 | ( ( fmt-h16 ":" ){0,2} fmt-h16 )? "::" ( fmt-h16 ":" ){2} fmt-ls32 | ( ( fmt-h16 ":" ){0,3} fmt-h16 )? "::" fmt-h16 ":" fmt-ls32 | ( ( fmt-h16 ":" ){0,4} fmt-h16 )? "::" fmt-ls32 | ( ( fmt-h16 ":" ){0,5} fmt-h16 )? "::" fmt-h16 | ( ( fmt-h16 ":" ){0,6} fmt-h16 )? "::")"},
    {"fmt-h16", "json-hex{1,4}"},
    {"fmt-ls32", R"(fmt-h16 ":" fmt-h16 | fmt-ipv4)"},
    // RFC 1123 host name: labels of 1-63 letters, digits and inner hyphens.
    {"fmt-hostname", R"(fmt-label ( "." fmt-label )*)"},
    {"fmt-label", R"([a-zA-Z0-9] ( [a-zA-Z0-9\x2D]{0,61} [a-zA-Z0-9] )?)"},
    // RFC 3986 URI: scheme ":" hier-part [ "?" query ] [ "#" fragment ].
    {"fmt-uri", R"(fmt-uri-scheme ":" fmt-uri-hier ( "?" fmt-uri-query )? ( "#" fmt-uri-query )?)"},
    {"fmt-uri-scheme", R"([a-zA-Z] [a-zA-Z0-9+.\x2D]*)"},
    {"fmt-uri-hier",
     R"(( "//" fmt-uri-authority fmt-uri-path | "/" ( fmt-uri-pchar+ fmt-uri-path )? | fmt-uri-pchar+ fmt-uri-path )?)"},
    {"fmt-uri-authority",
     R"(( fmt-uri-userinfo "@" )? ( "[" fmt-ipv6 "]" | fmt-uri-regname ) ( ":" [0-9]* )?)"},
    {"fmt-uri-userinfo", R"(( [a-zA-Z0-9._~!$&'()*+,;=:\x2D] | fmt-uri-pct )*)"},
    {"fmt-uri-regname", R"(( [a-zA-Z0-9._~!$&'()*+,;=\x2D] | fmt-uri-pct )*)"},
    {"fmt-uri-path", R"(( "/" fmt-uri-pchar* )*)"},
    {"fmt-uri-pchar", R"([a-zA-Z0-9._~!$&'()*+,;=:@\x2D] | fmt-uri-pct)"},
    {"fmt-uri-query", R"(( fmt-uri-pchar | [/?] )*)"},
    {"fmt-uri-pct", R"("%" json-hex json-hex)"},
};

const RuleDef* find_rule(std::string_view name) {
  for (const RuleDef& def : kRules)
    if (name == def.name) return &def;
  return nullptr;
}

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

// Defines `name` and, depth first, every fixed rule its body names (names
// inside literals and classes are skipped).
void use_rule(GbnfRuleSet& rules, std::string_view name) {
  if (rules.is_defined(name)) return;
  const RuleDef* def = find_rule(name);
  rules.define(name, def->body);
  const std::string_view body = def->body;
  for (size_t i = 0; i < body.size();) {
    const char c = body[i];
    if (c == '"' || c == '[') {  // skip a literal or a class, honouring escapes
      const char close = c == '"' ? '"' : ']';
      for (++i; i < body.size() && body[i] != close; ++i)
        if (body[i] == '\\') ++i;
      ++i;
    } else if (is_name_char(c) && (c < '0' || c > '9')) {
      size_t j = i;
      while (j < body.size() && is_name_char(body[j])) ++j;
      if (find_rule(body.substr(i, j - i)) != nullptr) use_rule(rules, body.substr(i, j - i));
      i = j;
    } else {
      ++i;
    }
  }
}

constexpr std::array<std::pair<std::string_view, JsonPrimitive>, 10> kFormats = {{
    {"date-time", JsonPrimitive::kDateTime},
    {"date", JsonPrimitive::kDate},
    {"time", JsonPrimitive::kTime},
    {"duration", JsonPrimitive::kDuration},
    {"uuid", JsonPrimitive::kUuid},
    {"email", JsonPrimitive::kEmail},
    {"ipv4", JsonPrimitive::kIpv4},
    {"ipv6", JsonPrimitive::kIpv6},
    {"hostname", JsonPrimitive::kHostname},
    {"uri", JsonPrimitive::kUri},
}};

const char* primitive_rule_name(JsonPrimitive which) {
  switch (which) {
    case JsonPrimitive::kWs:
      return "ws";
    case JsonPrimitive::kValue:
      return "json-value";
    case JsonPrimitive::kObject:
      return "json-object";
    case JsonPrimitive::kString:
      return "json-string";
    case JsonPrimitive::kStringChar:
      return "json-char";
    case JsonPrimitive::kKeyChar:
      return "json-key-char";
    case JsonPrimitive::kNumber:
      return "json-number";
    case JsonPrimitive::kInteger:
      return "json-integer";
    case JsonPrimitive::kBoolean:
      return "json-boolean";
    case JsonPrimitive::kNull:
      return "json-null";
    case JsonPrimitive::kDateTime:
      return "fmt-date-time";
    case JsonPrimitive::kDate:
      return "fmt-date";
    case JsonPrimitive::kTime:
      return "fmt-time";
    case JsonPrimitive::kDuration:
      return "fmt-duration";
    case JsonPrimitive::kUuid:
      return "fmt-uuid";
    case JsonPrimitive::kEmail:
      return "fmt-email";
    case JsonPrimitive::kIpv4:
      return "fmt-ipv4";
    case JsonPrimitive::kIpv6:
      return "fmt-ipv6";
    case JsonPrimitive::kHostname:
      return "fmt-hostname";
    case JsonPrimitive::kUri:
      return "fmt-uri";
  }
  return "json-value";
}

}  // namespace

std::string use_json_primitive(GbnfRuleSet& rules, JsonPrimitive which) {
  const char* name = primitive_rule_name(which);
  use_rule(rules, name);
  return name;
}

void reserve_json_primitive_names(GbnfRuleSet& rules) {
  for (const RuleDef& def : kRules) rules.reserve(def.name);
}

std::optional<JsonPrimitive> json_format_primitive(std::string_view format) {
  for (const auto& [name, which] : kFormats)
    if (name == format) return which;
  return std::nullopt;
}

const char* supported_json_formats() {
  return "date-time, date, time, duration, uuid, email, ipv4, ipv6, hostname, uri";
}

}  // namespace pagoda::grammar
