#include "grammar/json_string_pattern.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <vector>

#include "core/utf8.h"
#include "grammar/regex_dfa.h"
#include "grammar/regex_parser.h"
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

// The product of a pattern automaton with a length counter: states (q, n),
// automaton state q after n code points, n counted up to max_length, or up to
// min_length (then meaning "min_length or more") without a maximum; found
// forwards from (0, 0) (state 0), each marked live when an accepting state
// can be reached from it.
struct ProductState {
  uint32_t q = 0;
  uint64_t n = 0;
  bool accepting = false;
  bool live = false;
  std::vector<std::pair<size_t, size_t>> edges;  // (automaton transition index, target)
};

Result<std::vector<ProductState>> length_product(const RegexDfa& dfa, uint64_t min_length,
                                                 std::optional<uint64_t> max_length) {
  const uint64_t top = max_length.value_or(min_length);
  std::vector<ProductState> states;
  std::map<std::pair<uint32_t, uint64_t>, size_t> ids;
  auto id_of = [&](uint32_t q, uint64_t n) -> Result<size_t> {
    const auto [it, inserted] = ids.try_emplace({q, n}, states.size());
    if (!inserted) return it->second;
    if (states.size() >= kMaxLengthProductStates)
      return make_error(
          ErrorCode::kInvalidArgument,
          fmt::format("pattern and length bounds need more than {} automaton states ({} pattern "
                      "states x {} lengths); use a smaller maxLength or a simpler pattern",
                      kMaxLengthProductStates, dfa.states.size(), top + 1));
    states.push_back({q, n, dfa.states[q].accepting && n >= min_length, false, {}});
    return it->second;
  };
  if (dfa.states.empty()) return states;
  PAGODA_RETURN_IF_ERROR(id_of(0, 0));
  for (size_t i = 0; i < states.size(); ++i) {
    const uint64_t n = states[i].n;
    if (max_length && n == *max_length) continue;
    const auto& transitions = dfa.states[states[i].q].transitions;
    for (size_t t = 0; t < transitions.size(); ++t) {
      PAGODA_ASSIGN_OR_RETURN(size_t to, id_of(transitions[t].target, std::min(n + 1, top)));
      states[i].edges.emplace_back(t, to);
    }
  }
  std::vector<std::vector<size_t>> sources(states.size());
  std::vector<size_t> stack;
  for (size_t i = 0; i < states.size(); ++i) {
    for (const auto& [t, to] : states[i].edges) sources[to].push_back(i);
    if (states[i].accepting) {
      states[i].live = true;
      stack.push_back(i);
    }
  }
  while (!stack.empty()) {
    const size_t i = stack.back();
    stack.pop_back();
    for (size_t from : sources[i])
      if (!states[from].live) {
        states[from].live = true;
        stack.push_back(from);
      }
  }
  return states;
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

// A name from `hint` such that no name in `rules` starts with it and "-".
std::string fresh_prefix(std::string_view hint, GbnfRuleSet& rules) {
  std::string name = rules.fresh_name(hint);
  while (rules.has_name_with_prefix(name + "-")) name = rules.fresh_name(hint);
  return name;
}

Result<std::string> define_pattern_content(std::string_view pattern, std::string_view hint,
                                           GbnfRuleSet& rules) {
  // The pattern alone first, so that errors give positions in it.
  PAGODA_RETURN_IF_ERROR(regex_to_gbnf(pattern, "pattern"));
  const std::string search = pattern_search_as_fullmatch(pattern);
  const std::string name = fresh_prefix(hint, rules);
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

Result<std::string> define_pattern_content_with_length(std::string_view pattern,
                                                       uint64_t min_length,
                                                       std::optional<uint64_t> max_length,
                                                       std::string_view hint, GbnfRuleSet& rules) {
  PAGODA_RETURN_IF_ERROR(parse_regex(pattern));  // errors give positions in the pattern
  const std::string search = pattern_search_as_fullmatch(pattern);
  auto tree = parse_regex(search);
  if (!tree.ok())
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("{} (in its search form {})", tree.error().message, search));
  PAGODA_ASSIGN_OR_RETURN(RegexDfa dfa, build_regex_dfa(*tree));
  PAGODA_ASSIGN_OR_RETURN(std::vector<ProductState> states,
                          length_product(dfa, min_length, max_length));
  if (states.empty() || !states[0].live)
    return make_error(
        ErrorCode::kInvalidArgument,
        max_length
            ? fmt::format("no string of {} to {} characters matches it", min_length, *max_length)
            : fmt::format("no string of {} or more characters matches it", min_length));
  // Rule per live state: "<class> <next state's rule>" per edge, "" when accepting.
  const std::string name = fresh_prefix(hint, rules);
  auto state_name = [&](size_t i) { return i == 0 ? name : fmt::format("{}-{}", name, i); };
  std::map<std::string, std::string> class_rules;  // JSON-escaped class -> its rule
  for (size_t i = 0; i < states.size(); ++i) {
    if (!states[i].live) continue;
    std::string body;
    for (const auto& [t, to] : states[i].edges) {
      if (!states[to].live) continue;
      std::vector<std::pair<uint32_t, uint32_t>> ranges;
      for (const CodePointRange& r : dfa.states[states[i].q].transitions[t].chars.ranges())
        ranges.emplace_back(r.lo, r.hi);
      std::string cls = json_class(ranges);
      if (cls[0] == '(') {  // an alternation with escapes: a rule shared by every use
        auto [it, inserted] = class_rules.try_emplace(cls);
        if (inserted)
          it->second =
              rules.define(fmt::format("{}-c{}", name, class_rules.size()), std::move(cls));
        cls = it->second;
      }
      body += fmt::format("{}{} {}", body.empty() ? "" : " | ", cls, state_name(to));
    }
    if (states[i].accepting) body += body.empty() ? "\"\"" : " | \"\"";
    rules.define(state_name(i), std::move(body));
  }
  return name;
}

}  // namespace pagoda::grammar
