#include "grammar/gbnf_writer.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/utf8.h"

namespace pagoda::grammar {

namespace {

bool is_plain_class_char(uint32_t cp) {
  if (cp >= '0' && cp <= '9') return true;
  if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return true;
  switch (cp) {
    case ' ':
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '(':
    case ')':
    case '*':
    case '+':
    case ',':
    case '.':
    case '/':
    case ':':
    case ';':
    case '<':
    case '=':
    case '>':
    case '?':
    case '@':
    case '_':
    case '`':
    case '{':
    case '|':
    case '}':
    case '~':
      return true;
    default:
      return false;
  }
}

// Groups nested deeper than this become rules (parse_gbnf allows 100).
constexpr int kMaxInlineNesting = 32;

// The alternation for texts[lo, hi) (sorted, unique), which all share their
// first `offset` bytes, after that prefix; "" when only the prefix itself is
// left. `nesting` receives the group depth of the result.
std::string literal_suffixes(const std::vector<std::string>& texts, size_t lo, size_t hi,
                             size_t offset, std::string_view hint, GbnfRuleSet& rules,
                             int& nesting) {
  nesting = 0;
  const bool terminal = texts[lo].size() == offset;  // a prefix sorts before its extensions
  std::vector<std::string> alts;
  for (size_t i = lo + (terminal ? 1 : 0); i < hi;) {
    const std::string& first = texts[i];
    const size_t cp_len = utf8_len(static_cast<unsigned char>(first[offset]));
    size_t j = i + 1;
    while (j < hi && texts[j].compare(offset, cp_len, first, offset, cp_len) == 0) ++j;
    // The group's common prefix: that of its first and last text, cut at a code point.
    const std::string& last = texts[j - 1];
    size_t end = offset + cp_len;
    while (end < first.size() && end < last.size() && first[end] == last[end]) ++end;
    while (end < first.size() && (static_cast<unsigned char>(first[end]) & 0xC0) == 0x80) --end;
    int child_nesting = 0;
    std::string rest = literal_suffixes(texts, i, j, end, hint, rules, child_nesting);
    if (child_nesting >= kMaxInlineNesting) {
      rest = rules.define(rules.fresh_name(hint), rest);
      child_nesting = 0;
    }
    nesting = std::max(nesting, child_nesting + 1);
    std::string alt = gbnf_literal(std::string_view(first).substr(offset, end - offset));
    if (!rest.empty()) {
      alt += ' ';
      alt += rest;
    }
    alts.push_back(std::move(alt));
    i = j;
  }
  if (alts.empty()) return "";
  std::string out = "(";
  for (size_t k = 0; k < alts.size(); ++k) {
    out += k == 0 ? " " : " | ";
    out += alts[k];
  }
  out += terminal ? " )?" : " )";
  return out;
}

}  // namespace

std::string gbnf_literal_alternatives(std::vector<std::string> texts, std::string_view hint,
                                      GbnfRuleSet& rules) {
  std::sort(texts.begin(), texts.end());
  texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
  int nesting = 0;
  return literal_suffixes(texts, 0, texts.size(), 0, hint, rules, nesting);
}

std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  for (size_t i = 0; i < bytes.size();) {
    const auto c = static_cast<unsigned char>(bytes[i]);
    size_t valid_prefix = 0;
    const size_t len = c >= 0x80 ? valid_sequence_len(bytes, i, &valid_prefix) : 1;
    if (c >= 0x80 && len > 0) {
      out.append(bytes.substr(i, len));  // a valid multi-byte sequence stays as is
      i += len;
      continue;
    }
    if (c == '"')
      out += "\\\"";
    else if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '\r')
      out += "\\r";
    else if (c == '\t')
      out += "\\t";
    else if (c < 0x20 || c >= 0x7F)
      out += fmt::format("\\x{:02X}", c);
    else
      out.push_back(static_cast<char>(c));
    ++i;
  }
  out += '"';
  return out;
}

std::string gbnf_class_char(uint32_t cp) {
  if (is_plain_class_char(cp)) return std::string(1, static_cast<char>(cp));
  if (cp <= 0xFF) return fmt::format("\\x{:02X}", cp);
  if (cp <= 0xFFFF) return fmt::format("\\u{:04X}", cp);
  return fmt::format("\\U{:08X}", cp);
}

void GbnfRuleSet::reserve(std::string_view name) {
  if (!index_.emplace(std::string(name), rules_.size()).second) return;
  rules_.push_back({std::string(name), "", false});
}

bool GbnfRuleSet::is_defined(std::string_view name) const {
  const auto it = index_.find(std::string(name));
  return it != index_.end() && rules_[it->second].defined;
}

bool GbnfRuleSet::has_name_with_prefix(std::string_view prefix) const {
  for (const Rule& rule : rules_)
    if (std::string_view(rule.name).substr(0, prefix.size()) == prefix) return true;
  return false;
}

std::string GbnfRuleSet::fresh_name(std::string_view hint) {
  constexpr size_t kMaxHint = 40;  // long property names would make unreadable rule names
  std::string base;
  for (char c : hint.substr(0, kMaxHint)) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    base.push_back(ok ? c : '-');
  }
  if (base.empty()) base.push_back('r');
  std::string name = base;
  for (int n = 2; index_.count(name) > 0; ++n) name = fmt::format("{}-{}", base, n);
  reserve(name);
  return name;
}

std::string GbnfRuleSet::define(std::string_view name, std::string body) {
  reserve(name);
  Rule& rule = rules_[index_.at(std::string(name))];
  num_bytes_ += name.size() + body.size() + 6;
  rule.body = std::move(body);
  rule.defined = true;
  return rule.name;
}

std::string GbnfRuleSet::text() const {
  std::string out;
  out.reserve(num_bytes_);
  for (const Rule& rule : rules_) {
    if (!rule.defined) continue;
    out += rule.name;
    out += " ::= ";
    out += rule.body;
    out += '\n';
  }
  return out;
}

}  // namespace pagoda::grammar
