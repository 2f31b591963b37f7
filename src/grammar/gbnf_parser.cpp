#include "grammar/gbnf_parser.h"

#include <map>
#include <optional>
#include <unordered_map>

#include "core/utf8.h"
#include "grammar/utf8_ranges.h"

namespace pagoda::grammar {

namespace {

using Kind = Element::Kind;
using Sequence = std::vector<Element>;
using Alternatives = std::vector<Sequence>;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src) {}

  Result<Grammar> parse(std::string_view root_name) {
    skip_space(true);
    while (!at_end()) PAGODA_RETURN_IF_ERROR(parse_rule());
    for (uint32_t r = 0; r < g_.rules.size(); ++r) {
      if (!defined_[r]) {
        return make_error(ErrorCode::kInvalidArgument,
                          "grammar: rule '" + g_.rules[r].name + "' is referenced but not defined");
      }
    }
    auto root = ids_.find(std::string(root_name));
    if (root == ids_.end()) {
      return make_error(ErrorCode::kInvalidArgument,
                        "grammar: no rule '" + std::string(root_name) + "'");
    }
    g_.root = root->second;
    PAGODA_RETURN_IF_ERROR(check_open_repetitions());
    PAGODA_RETURN_IF_ERROR(finalize_grammar(g_));
    return std::move(g_);
  }

 private:
  struct OpenRepetition {
    Sequence item;
    size_t offset;
  };

  bool at_end() const { return pos_ >= src_.size(); }
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
  }

  Error error_at(size_t offset, const std::string& what) const {
    size_t line = 1, line_start = 0;
    for (size_t i = 0; i < offset && i < src_.size(); ++i) {
      if (src_[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    return make_error(ErrorCode::kInvalidArgument,
                      "grammar line " + std::to_string(line) + ", column " +
                          std::to_string(offset - line_start + 1) + ": " + what);
  }

  // Spaces, tabs and comments; newlines too when newline_ok.
  void skip_space(bool newline_ok) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n' && peek() != '\r') ++pos_;
      } else if (newline_ok && (c == '\n' || c == '\r')) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string_view parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    return src_.substr(start, pos_ - start);
  }

  uint32_t rule_id(std::string_view name) {
    auto [it, inserted] =
        ids_.try_emplace(std::string(name), static_cast<uint32_t>(g_.rules.size()));
    if (inserted) {
      g_.rules.push_back({std::string(name), {}});
      defined_.push_back(0);
    }
    return it->second;
  }

  uint32_t new_helper(const std::string& base) {
    g_.rules.push_back({base + "_" + std::to_string(g_.rules.size()), {}, /*helper=*/true});
    defined_.push_back(1);
    return static_cast<uint32_t>(g_.rules.size() - 1);
  }

  void set_alternatives(uint32_t rule, const Alternatives& alts) {
    for (const Sequence& seq : alts) {
      g_.rules[rule].alternatives.push_back(static_cast<uint32_t>(g_.elements.size()));
      g_.elements.insert(g_.elements.end(), seq.begin(), seq.end());
      g_.elements.push_back({Kind::kEnd, 0});
    }
  }

  Element bytes_element(const ByteSet& set) {
    auto [it, inserted] =
        set_ids_.try_emplace(set.words, static_cast<uint32_t>(g_.byte_sets.size()));
    if (inserted) g_.byte_sets.push_back(set);
    return {Kind::kBytes, it->second};
  }

  Element byte_element(uint8_t b) {
    ByteSet set;
    set.add(b);
    return bytes_element(set);
  }

  // One element matching exactly the code points of `ranges`: a byte set for
  // ASCII, else a reference to a helper rule of UTF-8 sequences (shared by
  // equal classes).
  Element class_element(const std::string& rule, std::vector<CodePointRange> ranges, bool negate) {
    ranges = normalize_ranges(std::move(ranges), negate);
    if (!ranges.empty() && ranges.back().hi < 0x80) {
      ByteSet set;
      for (const CodePointRange& r : ranges) {
        set.add_range(static_cast<uint8_t>(r.lo), static_cast<uint8_t>(r.hi));
      }
      return bytes_element(set);
    }
    auto found = class_rules_.find(ranges);
    if (found != class_rules_.end()) return {Kind::kRef, found->second};
    // Sequences differing only in their lead byte share one alternative.
    std::map<std::vector<ByteRange>, ByteSet> by_tail;
    for (const ByteSequence& seq : utf8_sequences(ranges)) {
      ByteSet& lead = by_tail[std::vector<ByteRange>(seq.begin() + 1, seq.end())];
      lead.add_range(seq[0].first, seq[0].second);
    }
    Alternatives alts;
    for (const auto& [tail, lead] : by_tail) {
      Sequence seq{bytes_element(lead)};
      for (const ByteRange& r : tail) {
        ByteSet set;
        set.add_range(r.first, r.second);
        seq.push_back(bytes_element(set));
      }
      alts.push_back(std::move(seq));
    }
    const uint32_t id = new_helper(rule);
    set_alternatives(id, alts);
    class_rules_.emplace(std::move(ranges), id);
    return {Kind::kRef, id};
  }

  // One code point at pos_ (not at the end): an escape or raw UTF-8.
  Result<uint32_t> parse_char() {
    const size_t start = pos_;
    if (peek() != '\\') {
      size_t prefix = 0;
      const size_t len = valid_sequence_len(src_, pos_, &prefix);
      if (len == 0) return error_at(start, "invalid UTF-8");
      size_t i = pos_;
      const uint32_t cp = next_code_point(src_, i);
      pos_ = i;
      return cp;
    }
    if (pos_ + 1 >= src_.size()) return error_at(start, "escape at the end of the grammar");
    const char e = src_[pos_ + 1];
    pos_ += 2;
    int digits = 0;
    switch (e) {
      case 'n':
        return uint32_t{'\n'};
      case 'r':
        return uint32_t{'\r'};
      case 't':
        return uint32_t{'\t'};
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
        return static_cast<uint32_t>(e);
      case 'x':
        digits = 2;
        break;
      case 'u':
        digits = 4;
        break;
      case 'U':
        digits = 8;
        break;
      default:
        return error_at(start, std::string("unknown escape '\\") + e + "'");
    }
    uint64_t cp = 0;
    for (int k = 0; k < digits; ++k) {
      const int v = hex_value(peek());
      if (at_end() || v < 0) {
        return error_at(start,
                        std::string("\\") + e + " needs " + std::to_string(digits) + " hex digits");
      }
      cp = cp * 16 + static_cast<uint64_t>(v);
      ++pos_;
    }
    if (cp > kMaxCodePoint) return error_at(start, "code point beyond U+10FFFF");
    return static_cast<uint32_t>(cp);
  }

  Status parse_literal(Sequence& seq) {
    const size_t start = pos_++;
    while (!at_end() && peek() != '"') {
      const size_t at = pos_;
      PAGODA_ASSIGN_OR_RETURN(uint32_t cp, parse_char());
      if (cp >= 0xD800 && cp <= 0xDFFF) return error_at(at, "a surrogate is not a character");
      std::string bytes;
      append_utf8(bytes, cp);
      for (char b : bytes) seq.push_back(byte_element(static_cast<uint8_t>(b)));
    }
    if (at_end()) return error_at(start, "unterminated literal");
    ++pos_;
    return Status::Ok();
  }

  Status parse_class(const std::string& rule, Sequence& seq) {
    const size_t start = pos_++;
    const bool negate = peek() == '^' && !at_end();
    if (negate) ++pos_;
    std::vector<CodePointRange> ranges;
    while (!at_end() && peek() != ']') {
      const size_t at = pos_;
      PAGODA_ASSIGN_OR_RETURN(uint32_t lo, parse_char());
      uint32_t hi = lo;
      if (peek() == '-' && pos_ + 1 < src_.size() && src_[pos_ + 1] != ']') {
        ++pos_;
        PAGODA_ASSIGN_OR_RETURN(hi, parse_char());
        if (hi < lo) return error_at(at, "character range ends before it starts");
      }
      ranges.push_back({lo, hi});
    }
    if (at_end()) return error_at(start, "unterminated character class");
    ++pos_;
    seq.push_back(class_element(rule, std::move(ranges), negate));
    return Status::Ok();
  }

  // {m}, {m,}, {m,n} at pos_.
  Status parse_braces(size_t& min, std::optional<size_t>& max) {
    const size_t start = pos_++;
    auto number = [&](size_t& out) -> bool {
      skip_space(false);
      if (at_end() || peek() < '0' || peek() > '9') return false;
      out = 0;
      while (!at_end() && peek() >= '0' && peek() <= '9') {
        out = out * 10 + static_cast<size_t>(peek() - '0');
        if (out > kMaxRepeatElements) out = kMaxRepeatElements + 1;  // refused by repeat()
        ++pos_;
      }
      skip_space(false);
      return true;
    };
    if (!number(min)) return error_at(start, "expecting a number after '{'");
    max = min;
    if (peek() == ',') {
      ++pos_;
      size_t n = 0;
      max = number(n) ? std::optional<size_t>(n) : std::nullopt;
      if (max && *max < min) return error_at(start, "repetition maximum below its minimum");
    }
    if (peek() != '}') return error_at(start, "expecting '}'");
    ++pos_;
    return Status::Ok();
  }

  // Replaces seq[item_start, end) (the repeated item) by its repetition
  // min..max times (no max: unbounded) as helper rules:
  // x{m,} = x..x R with R ::= x R | "";  x{m,n} = x..x O with O ::= x O' | "".
  Status repeat(const std::string& rule, Sequence& seq, size_t item_start, size_t min,
                std::optional<size_t> max, size_t offset) {
    Sequence item(seq.begin() + static_cast<std::ptrdiff_t>(item_start), seq.end());
    seq.resize(item_start);
    if (item.empty()) return Status::Ok();
    const size_t optional = max ? *max - min : 1;
    const size_t cost = item.size() * min + optional * (item.size() + 3);
    if (min > kMaxRepeatElements || optional > kMaxRepeatElements || cost > kMaxRepeatElements) {
      return error_at(offset, "repetition expands to more than " +
                                  std::to_string(kMaxRepeatElements) + " elements");
    }
    budget_ += cost;
    if (budget_ > kMaxGrammarElements) {
      return error_at(offset, "grammar expands to more than " +
                                  std::to_string(kMaxGrammarElements) + " elements");
    }
    for (size_t k = 0; k < min; ++k) seq.insert(seq.end(), item.begin(), item.end());
    if (!max) {
      const uint32_t r = new_helper(rule);
      Sequence again = item;
      again.push_back({Kind::kRef, r});
      set_alternatives(r, {again, {}});
      seq.push_back({Kind::kRef, r});
      open_repetitions_.push_back({std::move(item), offset});
      return Status::Ok();
    }
    std::optional<uint32_t> inner;
    for (size_t k = 0; k < optional; ++k) {
      const uint32_t o = new_helper(rule);
      Sequence more = item;
      if (inner) more.push_back({Kind::kRef, *inner});
      set_alternatives(o, {more, {}});
      inner = o;
    }
    if (inner) seq.push_back({Kind::kRef, *inner});
    return Status::Ok();
  }

  Result<Sequence> parse_sequence(const std::string& rule, bool nested) {
    Sequence seq;
    constexpr size_t kNone = SIZE_MAX;
    size_t item_start = kNone;  // start of the last item, which a repetition applies to
    while (!at_end()) {
      const size_t at = pos_;
      const char c = peek();
      if (c == '"') {
        item_start = seq.size();
        PAGODA_RETURN_IF_ERROR(parse_literal(seq));
      } else if (c == '[') {
        item_start = seq.size();
        PAGODA_RETURN_IF_ERROR(parse_class(rule, seq));
      } else if (is_name_char(c)) {
        item_start = seq.size();
        const std::string_view name = parse_name();
        seq.push_back({Kind::kRef, rule_id(name)});
      } else if (c == '(') {
        if (++depth_ > kMaxNesting) {
          return error_at(at, "groups nested deeper than " + std::to_string(kMaxNesting));
        }
        ++pos_;
        skip_space(true);
        PAGODA_ASSIGN_OR_RETURN(Alternatives alts, parse_alternates(rule, true));
        if (peek() != ')' || at_end()) return error_at(at, "expecting ')' to close this group");
        ++pos_;
        --depth_;
        item_start = seq.size();
        if (alts.size() == 1) {
          seq.insert(seq.end(), alts[0].begin(), alts[0].end());
        } else {
          const uint32_t g = new_helper(rule);
          set_alternatives(g, alts);
          seq.push_back({Kind::kRef, g});
        }
      } else if (c == '.') {
        ++pos_;
        item_start = seq.size();
        seq.push_back(class_element(rule, {{0, kMaxCodePoint}}, false));
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (item_start == kNone) {
          return error_at(at, std::string("nothing to repeat before '") + c + "'");
        }
        size_t min = c == '+' ? 1 : 0;
        std::optional<size_t> max;
        if (c == '?') max = 1;
        if (c == '{') {
          PAGODA_RETURN_IF_ERROR(parse_braces(min, max));
        } else {
          ++pos_;
        }
        PAGODA_RETURN_IF_ERROR(repeat(rule, seq, item_start, min, max, at));
        if (item_start == seq.size()) item_start = kNone;  // the repetition matches nothing
      } else if (c == '<' || c == '!') {
        return error_at(at, "token references (<...>, !<...>) are not supported");
      } else {
        break;
      }
      skip_space(nested);
    }
    return seq;
  }

  Result<Alternatives> parse_alternates(const std::string& rule, bool nested) {
    Alternatives alts;
    PAGODA_ASSIGN_OR_RETURN(Sequence first, parse_sequence(rule, nested));
    alts.push_back(std::move(first));
    while (!at_end() && peek() == '|') {
      ++pos_;
      skip_space(true);
      PAGODA_ASSIGN_OR_RETURN(Sequence next, parse_sequence(rule, nested));
      alts.push_back(std::move(next));
    }
    return alts;
  }

  Status parse_rule() {
    const size_t start = pos_;
    const std::string name(parse_name());
    if (name.empty()) return error_at(start, "expecting a rule name");
    skip_space(false);
    if (src_.substr(pos_, 3) != "::=") return error_at(pos_, "expecting '::=' after the rule name");
    pos_ += 3;
    skip_space(true);
    const uint32_t id = rule_id(name);
    if (defined_[id]) return error_at(start, "rule '" + name + "' is defined twice");
    defined_[id] = 1;
    PAGODA_ASSIGN_OR_RETURN(Alternatives alts, parse_alternates(name, false));
    set_alternatives(id, alts);
    if (!at_end()) {
      if (peek() == '\r') {
        ++pos_;
        if (peek() == '\n') ++pos_;
      } else if (peek() == '\n') {
        ++pos_;
      } else {
        return error_at(pos_, std::string("unexpected '") + peek() + "'");
      }
    }
    skip_space(true);
    return Status::Ok();
  }

  // x*, x+ and x{m,} of an item that can be empty would loop without
  // consuming input (llama.cpp refuses them too).
  Status check_open_repetitions() const {
    const std::vector<uint8_t> nullable = compute_nullable(g_);
    for (const OpenRepetition& rep : open_repetitions_) {
      bool empty_ok = true;
      for (const Element& e : rep.item)
        empty_ok = empty_ok && e.kind == Kind::kRef && nullable[e.value];
      if (empty_ok) return error_at(rep.offset, "the repeated item can match the empty string");
    }
    return Status::Ok();
  }

  std::string_view src_;
  size_t pos_ = 0;
  int depth_ = 0;
  size_t budget_ = 0;  // elements added by repetitions
  Grammar g_;
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<uint8_t> defined_;  // by rule
  std::map<std::array<uint64_t, 4>, uint32_t> set_ids_;
  std::map<std::vector<CodePointRange>, uint32_t> class_rules_;
  std::vector<OpenRepetition> open_repetitions_;
};

}  // namespace

Result<Grammar> parse_gbnf(std::string_view text, std::string_view root) {
  return Parser(text).parse(root);
}

Result<std::shared_ptr<const Grammar>> parse_gbnf_shared(std::string_view text,
                                                         std::string_view root) {
  PAGODA_ASSIGN_OR_RETURN(Grammar g, parse_gbnf(text, root));
  return std::shared_ptr<const Grammar>(std::make_shared<Grammar>(std::move(g)));
}

}  // namespace pagoda::grammar
