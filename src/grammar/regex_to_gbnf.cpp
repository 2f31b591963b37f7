#include "grammar/regex_to_gbnf.h"

#include <fmt/format.h>

#include <unordered_map>
#include <utility>
#include <vector>

#include "grammar/regex_ast.h"
#include "grammar/regex_parser.h"

namespace pagoda::grammar {

namespace {

using Kind = RegexNode::Kind;

bool is_rule_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

// `cp` as GBNF writes it inside "..." (in_class false) or [...] (in_class
// true): printable ASCII that is not special there as itself, the rest as
// \n \r \t or \xNN / \uNNNN / \UNNNNNNNN (a code point, never a raw byte).
void append_gbnf_char(std::string& out, uint32_t cp, bool in_class) {
  const bool special = in_class ? (cp == '\\' || cp == ']' || cp == '[' || cp == '^' || cp == '-')
                                : (cp == '\\' || cp == '"');
  if (cp >= 0x20 && cp < 0x7F && !special) {
    out.push_back(static_cast<char>(cp));
  } else if (cp == '\n') {
    out += "\\n";
  } else if (cp == '\r') {
    out += "\\r";
  } else if (cp == '\t') {
    out += "\\t";
  } else if (cp < 0x80) {
    out += fmt::format("\\x{:02X}", cp);
  } else if (cp <= 0xFFFF) {
    out += fmt::format("\\u{:04X}", cp);
  } else {
    out += fmt::format("\\U{:08X}", cp);
  }
}

std::string class_text(const RegexCharSet& set) {
  std::string out = "[";
  for (const CodePointRange& r : set.ranges()) {
    append_gbnf_char(out, r.lo, true);
    if (r.hi == r.lo) continue;
    if (r.hi > r.lo + 1) out.push_back('-');
    append_gbnf_char(out, r.hi, true);
  }
  out.push_back(']');
  return out;
}

std::string quantifier_text(uint32_t min, uint32_t max) {
  if (max == kUnbounded) {
    if (min == 0) return "*";
    if (min == 1) return "+";
    return fmt::format("{{{},}}", min);
  }
  if (min == 0 && max == 1) return "?";
  if (min == max) return fmt::format("{{{}}}", min);
  return fmt::format("{{{},{}}}", min, max);
}

// Writes a tree as GBNF rules: the tree's root is `rule_name`; every
// alternation or sequence nested in a sequence, and every repeated group,
// becomes a helper rule, so no rule has parentheses.
class GbnfWriter {
 public:
  explicit GbnfWriter(std::string_view rule_name) : base_(rule_name) {}

  std::string write(const RegexNodePtr& root) {
    rules_.emplace_back();
    rules_[0] = fmt::format("{} ::= {}", base_, expression(root));
    std::string out;
    for (const std::string& rule : rules_) {
      out += rule;
      out.push_back('\n');
    }
    return out;
  }

 private:
  std::string expression(const RegexNodePtr& node) {
    if (node->kind != Kind::kAlt) return sequence(node);
    std::string out;
    for (const RegexNodePtr& branch : node->children) {
      if (!out.empty()) out += " | ";
      out += sequence(branch);
    }
    return out;
  }

  // Items separated by spaces; runs of single code points merge into one literal.
  std::string sequence(const RegexNodePtr& node) {
    std::vector<RegexNodePtr> single{node};
    const std::vector<RegexNodePtr>& items = node->kind == Kind::kSeq ? node->children : single;
    std::vector<std::string> pieces;
    std::string literal;
    auto flush_literal = [&] {
      if (!literal.empty()) pieces.push_back("\"" + literal + "\"");
      literal.clear();
    };
    for (const RegexNodePtr& item : items) {
      if (item->kind == Kind::kChars && item->chars.is_single()) {
        append_gbnf_char(literal, item->chars.first(), false);
        continue;
      }
      std::string text = item_text(item);
      if (text.empty()) continue;
      flush_literal();
      pieces.push_back(std::move(text));
    }
    flush_literal();
    if (pieces.empty()) return "\"\"";
    std::string out;
    for (const std::string& p : pieces) {
      if (!out.empty()) out.push_back(' ');
      out += p;
    }
    return out;
  }

  // One sequence item; "" for one that only matches the empty string.
  std::string item_text(const RegexNodePtr& node) {
    switch (node->kind) {
      case Kind::kChars:
        return class_text(node->chars);
      case Kind::kRepeat:
        return repeat_text(*node);
      case Kind::kSeq:
      case Kind::kAlt:
        return rule_ref(node);
      default:
        return "";
    }
  }

  // A nullable body repeated more than once is rewritten (gbnf_repeat) so
  // the matcher has no empty iteration to loop on and need not guess which
  // copies are empty.
  std::string repeat_text(const RegexNode& node) {
    const GbnfRepeat r = gbnf_repeat(node.children[0], node.min, node.max);
    if (!r.body) return "";
    return atom(r.body) + quantifier_text(r.min, r.max);
  }

  std::string atom(const RegexNodePtr& node) {
    if (node->kind != Kind::kChars) return rule_ref(node);
    if (!node->chars.is_single()) return class_text(node->chars);
    std::string literal = "\"";
    append_gbnf_char(literal, node->chars.first(), false);
    return literal + "\"";
  }

  std::string rule_ref(const RegexNodePtr& node) {
    auto it = names_.find(node.get());
    if (it != names_.end()) return it->second;
    const size_t index = rules_.size();
    std::string name = fmt::format("{}-{}", base_, index);
    names_.emplace(node.get(), name);
    rules_.emplace_back();
    std::string body = expression(node);
    rules_[index] = fmt::format("{} ::= {}", name, body);
    return name;
  }

  std::string base_;
  std::vector<std::string> rules_;                           // rules_[0] defines base_
  std::unordered_map<const RegexNode*, std::string> names_;  // helper rule of each node
};

}  // namespace

Result<std::string> regex_to_gbnf(std::string_view pattern, std::string_view rule_name) {
  bool valid_name = !rule_name.empty();
  for (char c : rule_name) valid_name = valid_name && is_rule_name_char(c);
  if (!valid_name) {
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("regex rule name '{}' is not [a-zA-Z0-9-]+", rule_name));
  }
  PAGODA_ASSIGN_OR_RETURN(RegexNodePtr tree, parse_regex(pattern));
  return GbnfWriter(rule_name).write(tree);
}

}  // namespace pagoda::grammar
