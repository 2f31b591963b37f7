#include "grammar/regex_parser.h"

#include <fmt/format.h>

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/utf8.h"

namespace pagoda::grammar {

namespace {

using Kind = RegexNode::Kind;

constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kLowSurrogateLo = 0xDC00;
constexpr uint32_t kSurrogateHi = 0xDFFF;

bool is_digit(uint32_t c) {
  return c >= '0' && c <= '9';
}
bool is_ascii_alpha(uint32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

int hex_value(uint32_t c) {
  if (is_digit(c)) return static_cast<int>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
  if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
  return -1;
}

// What one escape sequence denotes.
struct Escape {
  enum class Kind { kCodePoint, kSet, kStartAnchor, kEndAnchor };
  Kind kind = Kind::kCodePoint;
  uint32_t cp = 0;
  RegexCharSet set;
};

// A parsed quantifier: {min, max} at pattern position `pos`.
struct Quantifier {
  uint32_t min = 0;
  uint32_t max = 0;
  size_t pos = 0;
};

class Parser {
 public:
  explicit Parser(std::vector<uint32_t> pattern) : p_(std::move(pattern)) {}

  Result<RegexNodePtr> parse() {
    PAGODA_ASSIGN_OR_RETURN(RegexNodePtr tree, parse_alternation(0));
    if (i_ < p_.size()) return error(i_, "unbalanced parenthesis ')'");
    if (tree->expanded_size > kMaxRegexExpandedSize) {
      return error(
          0, fmt::format("the pattern unrolls to more than {} characters", kMaxRegexExpandedSize));
    }
    return tree;
  }

  Error error(size_t pos, std::string_view what) const {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("regex at position {}: {}", pos, what));
  }

 private:
  bool at_end() const { return i_ >= p_.size(); }
  uint32_t peek(size_t ahead = 0) const { return i_ + ahead < p_.size() ? p_[i_ + ahead] : 0; }
  bool has(size_t ahead) const { return i_ + ahead < p_.size(); }

  // alternation := sequence ('|' sequence)*
  Result<RegexNodePtr> parse_alternation(size_t depth) {
    std::vector<RegexNodePtr> branches;
    while (true) {
      PAGODA_ASSIGN_OR_RETURN(RegexNodePtr seq, parse_sequence(depth));
      branches.push_back(std::move(seq));
      if (at_end() || peek() != '|') break;
      ++i_;
    }
    return make_alt(std::move(branches));
  }

  // sequence := (atom quantifier?)*, up to '|', ')' or the end.
  Result<RegexNodePtr> parse_sequence(size_t depth) {
    std::vector<RegexNodePtr> items;
    while (!at_end() && peek() != '|' && peek() != ')') {
      PAGODA_ASSIGN_OR_RETURN(RegexNodePtr atom, parse_atom(depth));
      PAGODA_ASSIGN_OR_RETURN(std::optional<Quantifier> q, parse_quantifier());
      if (q) {
        if (atom->kind == Kind::kStartAnchor || atom->kind == Kind::kEndAnchor) {
          return error(q->pos, "nothing to repeat");
        }
        if (gbnf_repeat_elements(gbnf_repeat(atom, q->min, q->max)) > kMaxRegexRepeatElements) {
          return error(q->pos, fmt::format("the repeat expands to more than {} grammar elements",
                                           kMaxRegexRepeatElements));
        }
        atom = make_repeat(std::move(atom), q->min, q->max);
        if (atom->expanded_size > kMaxRegexExpandedSize) {
          return error(q->pos, fmt::format("the repeat unrolls to more than {} characters",
                                           kMaxRegexExpandedSize));
        }
        PAGODA_ASSIGN_OR_RETURN(std::optional<Quantifier> again, parse_quantifier());
        if (again) return error(again->pos, "multiple repeat");
      }
      items.push_back(std::move(atom));
    }
    return make_seq(std::move(items));  // anchors stay until resolve_anchors
  }

  Result<RegexNodePtr> parse_atom(size_t depth) {
    const size_t pos = i_;
    const uint32_t c = p_[i_++];
    switch (c) {
      case '(':
        return parse_group(pos, depth);
      case '[':
        return parse_class(pos);
      case '.':
        return make_chars(RegexCharSet::range('\n', '\n').complement());
      case '^':
        return make_anchor(Kind::kStartAnchor, pos);
      case '$':
        return make_anchor(Kind::kEndAnchor, pos);
      case '*':
      case '+':
      case '?':
        return error(pos, "nothing to repeat");
      case '{': {
        --i_;
        PAGODA_ASSIGN_OR_RETURN(std::optional<Quantifier> q, parse_quantifier());
        if (q) return error(pos, "nothing to repeat");
        ++i_;
        return make_chars(RegexCharSet::of('{'));
      }
      case '\\': {
        PAGODA_ASSIGN_OR_RETURN(Escape e, parse_escape(pos, /*in_class=*/false));
        switch (e.kind) {
          case Escape::Kind::kCodePoint:
            return make_chars(RegexCharSet::of(e.cp));
          case Escape::Kind::kSet:
            return make_chars(std::move(e.set));
          case Escape::Kind::kStartAnchor:
            return make_anchor(Kind::kStartAnchor, pos);
          case Escape::Kind::kEndAnchor:
            return make_anchor(Kind::kEndAnchor, pos);
        }
        return error(pos, "bad escape");
      }
      default:
        return make_chars(RegexCharSet::of(c));
    }
  }

  // After '(' at `open`: (...), (?:...), (?P<name>...), (?<name>...); every
  // other (?...) form is refused by name.
  Result<RegexNodePtr> parse_group(size_t open, size_t depth) {
    if (depth + 1 > kMaxRegexGroupDepth) {
      return error(open, fmt::format("groups nested deeper than {}", kMaxRegexGroupDepth));
    }
    if (!at_end() && peek() == '?') {
      PAGODA_RETURN_IF_ERROR(parse_group_prefix(open));
    }
    PAGODA_ASSIGN_OR_RETURN(RegexNodePtr inner, parse_alternation(depth + 1));
    if (at_end()) return error(open, "missing ')', unterminated group");
    ++i_;  // ')'
    return inner;
  }

  // At "?" after '(' at `open`: consumes a non-capturing or named-group prefix.
  Status parse_group_prefix(size_t open) {
    const uint32_t c = peek(1);
    if (c == ':') {
      i_ += 2;
      return Status::Ok();
    }
    if (c == 'P' && peek(2) == '<') {
      i_ += 3;
      return parse_group_name(open);
    }
    if (c == '<' && peek(2) != '=' && peek(2) != '!') {
      i_ += 2;
      return parse_group_name(open);
    }
    if (c == '=' || c == '!') return error(open, "lookahead assertions are not supported");
    if (c == '<') return error(open, "lookbehind assertions are not supported");
    if (c == 'P' && peek(2) == '=') return error(open, "backreferences are not supported");
    if (c == '>') return error(open, "atomic groups are not supported");
    if (c == '(') return error(open, "conditional groups are not supported");
    if (c == '#') return error(open, "comment groups are not supported");
    if (is_ascii_alpha(c) || c == '-') {
      return error(open, "inline flags and modifiers such as (?i) are not supported");
    }
    return error(open, "unknown group syntax '(?'");
  }

  // Reads "name>" of a named group opened at `open`.
  Status parse_group_name(size_t open) {
    std::string name;
    while (!at_end() && peek() != '>') {
      const uint32_t c = peek();
      const bool ok = c == '_' || is_ascii_alpha(c) || c >= 0x80 || (is_digit(c) && !name.empty());
      if (!ok) return error(i_, "bad character in group name");
      append_utf8(name, c);
      ++i_;
    }
    if (at_end()) return error(open, "missing '>' after the group name");
    if (name.empty()) return error(i_, "missing group name");
    ++i_;  // '>'
    if (!group_names_.insert(name).second) {
      return error(open, fmt::format("duplicate group name '{}'", name));
    }
    return Status::Ok();
  }

  // After '[' at `open`: [...] or [^...] with ranges and escapes.
  Result<RegexNodePtr> parse_class(size_t open) {
    bool negated = false;
    if (!at_end() && peek() == '^') {
      negated = true;
      ++i_;
    }
    if (!at_end() && peek() == ']') {
      return error(i_,
                   "']' first in a character class is ambiguous (Python: a literal ']', "
                   "ECMAScript: the end of an empty class); escape it as \\]");
    }
    RegexCharSet set;
    while (true) {
      if (at_end()) return error(open, "unterminated character class");
      if (peek() == ']') break;
      const size_t lo_pos = i_;
      PAGODA_ASSIGN_OR_RETURN(Escape lo, parse_class_atom());
      if (peek() == '-' && has(1) && peek(1) != ']') {
        ++i_;  // '-'
        PAGODA_ASSIGN_OR_RETURN(Escape hi, parse_class_atom());
        if (lo.kind != Escape::Kind::kCodePoint || hi.kind != Escape::Kind::kCodePoint) {
          return error(lo_pos, "bad character range: an end is a class like \\d");
        }
        if (lo.cp > hi.cp) return error(lo_pos, "bad character range: start after end");
        set.add(lo.cp, hi.cp);
      } else if (lo.kind == Escape::Kind::kSet) {
        set.add(lo.set);
      } else {
        set.add(lo.cp, lo.cp);
      }
    }
    ++i_;  // ']'
    return make_chars(negated ? set.complement() : std::move(set));
  }

  Result<Escape> parse_class_atom() {
    const size_t pos = i_;
    const uint32_t c = p_[i_++];
    if (c != '\\') return Escape{Escape::Kind::kCodePoint, c, {}};
    return parse_escape(pos, /*in_class=*/true);
  }

  // After the backslash at `pos`.
  Result<Escape> parse_escape(size_t pos, bool in_class) {
    if (at_end()) return error(pos, "trailing backslash");
    const uint32_t c = p_[i_++];
    auto code_point = [](uint32_t cp) { return Escape{Escape::Kind::kCodePoint, cp, {}}; };
    auto set = [](RegexCharSet s, bool negate) {
      return Escape{Escape::Kind::kSet, 0, negate ? s.complement() : std::move(s)};
    };
    switch (c) {
      case 'd':
        return set(RegexCharSet::digit(), false);
      case 'D':
        return set(RegexCharSet::digit(), true);
      case 'w':
        return set(RegexCharSet::word(), false);
      case 'W':
        return set(RegexCharSet::word(), true);
      case 's':
        return set(RegexCharSet::space(), false);
      case 'S':
        return set(RegexCharSet::space(), true);
      case 'n':
        return code_point('\n');
      case 'r':
        return code_point('\r');
      case 't':
        return code_point('\t');
      case 'f':
        return code_point('\f');
      case 'v':
        return code_point('\v');
      case 'b':
        if (in_class) return code_point('\b');
        return error(pos, "word boundaries (\\b) are not supported");
      case 'B':
        return error(pos, "word boundaries (\\B) are not supported");
      case 'A':
      case 'Z':
        if (in_class) return error(pos, "anchors are not allowed in a character class");
        return Escape{c == 'A' ? Escape::Kind::kStartAnchor : Escape::Kind::kEndAnchor, 0, {}};
      case '0':
        if (!at_end() && is_digit(peek())) return error(pos, "octal escapes are not supported");
        return code_point(0);
      case 'x': {
        PAGODA_ASSIGN_OR_RETURN(uint32_t cp, parse_hex(pos, 2, "\\x needs two hex digits"));
        return code_point(cp);
      }
      case 'u':
        return parse_u_escape(pos);
      case 'U': {
        PAGODA_ASSIGN_OR_RETURN(uint32_t cp, parse_hex(pos, 8, "\\U needs eight hex digits"));
        PAGODA_RETURN_IF_ERROR(check_scalar(pos, cp));
        return code_point(cp);
      }
      case 'c':
        if (!at_end() && is_ascii_alpha(peek())) return code_point(p_[i_++] % 32);
        return error(pos, "\\c needs an ASCII letter");
      case 'k':
        return error(pos, "backreferences are not supported");
      case 'p':
      case 'P':
        return error(pos, "Unicode property escapes (\\p, \\P) are not supported; use ranges");
      default:
        break;
    }
    if (is_digit(c)) return error(pos, "backreferences are not supported");
    if (is_ascii_alpha(c)) {
      return error(pos, fmt::format("unsupported escape \\{}", static_cast<char>(c)));
    }
    return code_point(c);  // an escaped metacharacter or any other symbol stands for itself
  }

  // After "\u" at `pos`: \uNNNN (a surrogate pair \uD83D\uDE00 is one code
  // point, as in ECMAScript's u mode) or \u{N...}.
  Result<Escape> parse_u_escape(size_t pos) {
    uint32_t cp = 0;
    if (!at_end() && peek() == '{') {
      ++i_;
      size_t digits = 0;
      while (!at_end() && hex_value(peek()) >= 0 && digits < 7) {
        cp = cp * 16 + static_cast<uint32_t>(hex_value(p_[i_++]));
        ++digits;
      }
      if (digits == 0 || digits > 6 || at_end() || peek() != '}') {
        return error(pos, "\\u{...} needs 1 to 6 hex digits");
      }
      ++i_;
    } else {
      PAGODA_ASSIGN_OR_RETURN(cp, parse_hex(pos, 4, "\\u needs four hex digits"));
      const bool pair_follows = peek() == '\\' && peek(1) == 'u' && has(5);
      if (cp >= kSurrogateLo && cp < kLowSurrogateLo && pair_follows) {
        uint32_t low = 0;
        bool hex = true;
        for (size_t k = 2; k < 6; ++k) {
          hex = hex && hex_value(peek(k)) >= 0;
          if (hex) low = low * 16 + static_cast<uint32_t>(hex_value(peek(k)));
        }
        if (hex && low >= kLowSurrogateLo && low <= kSurrogateHi) {
          i_ += 6;
          cp = 0x10000 + ((cp - kSurrogateLo) << 10) + (low - kLowSurrogateLo);
        }
      }
    }
    PAGODA_RETURN_IF_ERROR(check_scalar(pos, cp));
    return Escape{Escape::Kind::kCodePoint, cp, {}};
  }

  Result<uint32_t> parse_hex(size_t pos, size_t num_digits, std::string_view what) {
    uint32_t v = 0;
    for (size_t k = 0; k < num_digits; ++k) {
      if (at_end() || hex_value(peek()) < 0) return error(pos, what);
      v = v * 16 + static_cast<uint32_t>(hex_value(p_[i_++]));
    }
    return v;
  }

  Status check_scalar(size_t pos, uint32_t cp) const {
    if (cp > kMaxCodePoint) return error(pos, "code point above U+10FFFF");
    if (cp >= kSurrogateLo && cp <= kSurrogateHi) {
      return error(pos, "a lone surrogate code point has no UTF-8 encoding");
    }
    return Status::Ok();
  }

  // At a possible quantifier: * + ? {n} {n,} {,m} {n,m} (Python's forms),
  // each optionally lazy (a trailing '?', same language). Returns nullopt and
  // consumes nothing when there is none; a '{' that does not complete one is
  // a literal, as in Python.
  Result<std::optional<Quantifier>> parse_quantifier() {
    if (at_end()) return std::optional<Quantifier>();
    Quantifier q;
    q.pos = i_;
    const uint32_t c = peek();
    if (c == '*' || c == '+' || c == '?') {
      ++i_;
      q.min = c == '+' ? 1 : 0;
      q.max = c == '?' ? 1 : kUnbounded;
    } else if (c == '{') {
      std::optional<Quantifier> braces;
      PAGODA_ASSIGN_OR_RETURN(braces, parse_braces());
      if (!braces) return braces;
      q = *braces;
    } else {
      return std::optional<Quantifier>();
    }
    if (!at_end() && peek() == '?') {
      ++i_;
    } else if (!at_end() && peek() == '+') {
      return error(i_, "possessive quantifiers are not supported");
    }
    return std::optional<Quantifier>(q);
  }

  Result<std::optional<Quantifier>> parse_braces() {
    const size_t start = i_;
    size_t j = i_ + 1;
    auto digits = [&](size_t& k) {
      const size_t from = k;
      while (k < p_.size() && is_digit(p_[k])) ++k;
      return k - from;
    };
    const size_t lo_begin = j;
    const size_t num_lo = digits(j);
    size_t hi_begin = j;
    size_t num_hi = 0;
    const bool comma = j < p_.size() && p_[j] == ',';
    if (comma) {
      hi_begin = ++j;
      num_hi = digits(j);
    }
    if (j >= p_.size() || p_[j] != '}' || (num_lo == 0 && !comma)) {
      return std::optional<Quantifier>();
    }
    Quantifier q;
    q.pos = start;
    PAGODA_ASSIGN_OR_RETURN(q.min, count_value(start, lo_begin, num_lo, 0));
    PAGODA_ASSIGN_OR_RETURN(q.max,
                            count_value(start, hi_begin, num_hi, comma ? kUnbounded : q.min));
    if (q.min > q.max) return error(start, "min repeat greater than max repeat");
    i_ = j + 1;
    return std::optional<Quantifier>(q);
  }

  // The decimal count at p_[begin, begin + len) of the quantifier at `pos`, or
  // `absent` when len == 0.
  Result<uint32_t> count_value(size_t pos, size_t begin, size_t len, uint32_t absent) {
    if (len == 0) return absent;
    uint64_t v = 0;
    for (size_t k = begin; k < begin + len; ++k) {
      v = v * 10 + (p_[k] - '0');
      if (v > kMaxRegexRepeat) {
        return error(pos, fmt::format("repeat count above the limit of {}", kMaxRegexRepeat));
      }
    }
    return static_cast<uint32_t>(v);
  }

  std::vector<uint32_t> p_;
  size_t i_ = 0;
  std::set<std::string> group_names_;
};

// Rebuilds `node` without anchors, refusing one that is not at the start
// (at_start: nothing can be matched before this node) or end of the match.
Result<RegexNodePtr> resolve_anchors(const Parser& parser, const RegexNodePtr& node, bool at_start,
                                     bool at_end) {
  switch (node->kind) {
    case Kind::kStartAnchor:
      if (!at_start) {
        return parser.error(node->pos,
                            "'^' is only supported at the start (the match is always "
                            "whole)");
      }
      return make_empty();
    case Kind::kEndAnchor:
      if (!at_end) {
        return parser.error(node->pos,
                            "'$' is only supported at the end (the match is always "
                            "whole)");
      }
      return make_empty();
    case Kind::kSeq: {
      const std::vector<RegexNodePtr>& items = node->children;
      auto is_anchor = [](const RegexNodePtr& n) {
        return n->kind == Kind::kStartAnchor || n->kind == Kind::kEndAnchor;
      };
      size_t first_solid = 0;  // items before it are all anchors
      while (first_solid < items.size() && is_anchor(items[first_solid])) ++first_solid;
      size_t last_solid = items.size();  // items from it on are all anchors
      while (last_solid > 0 && is_anchor(items[last_solid - 1])) --last_solid;
      std::vector<RegexNodePtr> out;
      for (size_t k = 0; k < items.size(); ++k) {
        PAGODA_ASSIGN_OR_RETURN(RegexNodePtr item,
                                resolve_anchors(parser, items[k], at_start && k <= first_solid,
                                                at_end && k + 1 >= last_solid));
        out.push_back(std::move(item));
      }
      return make_seq(std::move(out));
    }
    case Kind::kAlt: {
      std::vector<RegexNodePtr> out;
      for (const RegexNodePtr& b : node->children) {
        PAGODA_ASSIGN_OR_RETURN(RegexNodePtr branch, resolve_anchors(parser, b, at_start, at_end));
        out.push_back(std::move(branch));
      }
      return make_alt(std::move(out));
    }
    case Kind::kRepeat: {
      // A second iteration follows the first: only an optional body keeps its place.
      const bool once = node->max <= 1;
      PAGODA_ASSIGN_OR_RETURN(RegexNodePtr body, resolve_anchors(parser, node->children[0],
                                                                 at_start && once, at_end && once));
      return make_repeat(std::move(body), node->min, node->max);
    }
    default:
      return node;
  }
}

}  // namespace

Result<RegexNodePtr> parse_regex(std::string_view pattern) {
  std::vector<uint32_t> code_points;
  code_points.reserve(pattern.size());
  for (size_t i = 0; i < pattern.size();) {
    size_t prefix = 0;
    if (valid_sequence_len(pattern, i, &prefix) == 0) {
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("regex at position {}: invalid UTF-8", code_points.size()));
    }
    code_points.push_back(next_code_point(pattern, i));
  }
  Parser parser(std::move(code_points));
  PAGODA_ASSIGN_OR_RETURN(RegexNodePtr tree, parser.parse());
  PAGODA_ASSIGN_OR_RETURN(RegexNodePtr resolved, resolve_anchors(parser, tree, true, true));
  if (is_nothing(*resolved)) return parser.error(0, "the pattern matches no string");
  return resolved;
}

}  // namespace pagoda::grammar
