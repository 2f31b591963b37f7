#include "grammar/json_string_pattern.h"

#include <fmt/format.h>

#include <optional>
#include <vector>

#include "core/utf8.h"
#include "grammar/regex_to_gbnf.h"

namespace pagoda::grammar {

namespace {

bool needs_json_escape(uint32_t cp) {
  return cp < 0x20 || cp == '"' || cp == '\\';
}

// `cp` as a JSON string writes it (the short escapes where JSON has them).
std::string json_escaped(uint32_t cp) {
  switch (cp) {
    case '"':
      return "\\\"";
    case '\\':
      return "\\\\";
    case '\b':
      return "\\b";
    case '\f':
      return "\\f";
    case '\n':
      return "\\n";
    case '\r':
      return "\\r";
    case '\t':
      return "\\t";
    default:
      break;
  }
  if (cp < 0x20) return fmt::format("\\u{:04x}", cp);
  std::string out;
  append_utf8(out, cp);
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Reads one code point of a GBNF literal or class at text[i] (an escape or
// UTF-8), advancing i; nullopt on text regex_to_gbnf never writes.
std::optional<uint32_t> read_gbnf_char(std::string_view text, size_t& i) {
  if (i >= text.size()) return std::nullopt;
  if (text[i] != '\\') {
    if (!is_valid_utf8(text.substr(i, utf8_len(static_cast<unsigned char>(text[i])))))
      return std::nullopt;
    return next_code_point(text, i);
  }
  if (i + 1 >= text.size()) return std::nullopt;
  const char kind = text[i + 1];
  i += 2;
  switch (kind) {
    case 'n':
      return '\n';
    case 'r':
      return '\r';
    case 't':
      return '\t';
    case '\\':
    case '"':
    case '[':
    case ']':
      return static_cast<uint32_t>(kind);
    default:
      break;
  }
  const size_t digits = kind == 'x' ? 2 : kind == 'u' ? 4 : kind == 'U' ? 8 : 0;
  if (digits == 0 || i + digits > text.size()) return std::nullopt;
  uint32_t cp = 0;
  for (size_t k = 0; k < digits; ++k) {
    const int v = hex_value(text[i + k]);
    if (v < 0) return std::nullopt;
    cp = cp * 16 + static_cast<uint32_t>(v);
  }
  i += digits;
  return cp;
}

// A class's ranges rewritten for JSON content: the code points JSON escapes
// leave the class and become literal alternatives of their escapes.
std::string json_class(const std::vector<std::pair<uint32_t, uint32_t>>& ranges) {
  std::string kept;
  std::vector<std::string> alts;
  auto keep = [&](uint32_t lo, uint32_t hi) {
    if (lo > hi) return;
    kept += gbnf_class_char(lo);
    if (hi > lo) {
      kept += '-';
      kept += gbnf_class_char(hi);
    }
  };
  for (auto [lo, hi] : ranges) {
    uint32_t from = lo;
    for (uint32_t cp = lo; cp <= hi && cp <= '\\'; ++cp) {
      if (!needs_json_escape(cp)) continue;
      if (cp > from) keep(from, cp - 1);
      alts.push_back(gbnf_literal(json_escaped(cp)));
      from = cp + 1;
    }
    keep(from, hi);
  }
  if (!kept.empty()) alts.insert(alts.begin(), "[" + kept + "]");
  if (alts.size() == 1) return alts[0];
  std::string out = "(";
  for (size_t k = 0; k < alts.size(); ++k) out += (k ? " | " : " ") + alts[k];
  return out + " )";
}

// A regex_to_gbnf rule body with every literal and class rewritten to match
// the JSON-escaped form of the code points it matched.
std::optional<std::string> json_escape_body(std::string_view body) {
  std::string out;
  for (size_t i = 0; i < body.size();) {
    if (body[i] == '"') {
      std::string content;
      for (++i; i < body.size() && body[i] != '"';) {
        const auto cp = read_gbnf_char(body, i);
        if (!cp) return std::nullopt;
        content += json_escaped(*cp);
      }
      if (i >= body.size()) return std::nullopt;
      ++i;
      out += gbnf_literal(content);
    } else if (body[i] == '[') {
      std::vector<std::pair<uint32_t, uint32_t>> ranges;
      for (++i; i < body.size() && body[i] != ']';) {
        if (body[i] == '^') return std::nullopt;  // never written: classes are positive
        const auto lo = read_gbnf_char(body, i);
        if (!lo) return std::nullopt;
        std::optional<uint32_t> hi = lo;
        if (i + 1 < body.size() && body[i] == '-' && body[i + 1] != ']') {
          ++i;
          hi = read_gbnf_char(body, i);
          if (!hi || *hi < *lo) return std::nullopt;
        }
        ranges.emplace_back(*lo, *hi);
      }
      if (i >= body.size()) return std::nullopt;
      ++i;
      out += json_class(ranges);
    } else {
      out += body[i++];
    }
  }
  return out;
}

// Splits a regex at its top-level '|' (outside groups and classes).
std::vector<std::string_view> top_level_alternatives(std::string_view pattern) {
  std::vector<std::string_view> alts;
  int depth = 0;
  bool in_class = false;
  size_t start = 0;
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\') {
      ++i;
    } else if (in_class) {
      in_class = c != ']';
    } else if (c == '[') {
      in_class = true;
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') ++i;
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') ++i;  // a literal ']' first
    } else if (c == '(') {
      ++depth;
    } else if (c == ')') {
      --depth;
    } else if (c == '|' && depth == 0) {
      alts.push_back(pattern.substr(start, i - start));
      start = i + 1;
    }
  }
  alts.push_back(pattern.substr(start));
  return alts;
}

bool ends_with_anchor(std::string_view alt) {
  // "$" or "\Z" preceded by an even number of backslashes (not an escaped '$').
  size_t end = alt.size();
  if (end >= 2 && alt.substr(end - 2) == "\\Z")
    end -= 2;
  else if (end >= 1 && alt[end - 1] == '$')
    end -= 1;
  else
    return false;
  size_t backslashes = 0;
  while (backslashes < end && alt[end - 1 - backslashes] == '\\') ++backslashes;
  return backslashes % 2 == 0;
}

}  // namespace

std::string pattern_search_as_fullmatch(std::string_view pattern) {
  std::string out;
  for (std::string_view alt : top_level_alternatives(pattern)) {
    if (!out.empty()) out += '|';
    const bool anchored_start = alt.substr(0, 1) == "^" || alt.substr(0, 2) == "\\A";
    if (!anchored_start) out += R"([\s\S]*)";
    out += "(?:";
    out += alt;
    out += ')';
    if (!ends_with_anchor(alt)) out += R"([\s\S]*)";
  }
  return out;
}

Result<std::string> define_pattern_content(std::string_view pattern, std::string_view hint,
                                           GbnfRuleSet& rules) {
  // The pattern alone first, so that errors give positions in it.
  PAGODA_RETURN_IF_ERROR(regex_to_gbnf(pattern, "pattern"));
  const std::string search = pattern_search_as_fullmatch(pattern);
  std::string name = rules.fresh_name(hint);
  while (rules.has_name_with_prefix(name + "-")) name = rules.fresh_name(hint);
  auto text = regex_to_gbnf(search, name);
  if (!text.ok())
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{} (in its search form {})", text.error().message, search));
  std::string_view rest = text.value();
  while (!rest.empty()) {
    const size_t eol = rest.find('\n');
    const std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? "" : rest.substr(eol + 1);
    const size_t sep = line.find(" ::= ");
    const auto body =
        sep == std::string_view::npos ? std::nullopt : json_escape_body(line.substr(sep + 5));
    if (!body)
      return make_error(
          ErrorCode::kInternal,
          fmt::format("regex_to_gbnf wrote a rule this converter cannot read: {}", line));
    rules.define(line.substr(0, sep), *body);
  }
  return name;
}

}  // namespace pagoda::grammar
