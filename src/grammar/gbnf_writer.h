// Building GBNF text (llama.cpp's grammar syntax, read by parse_gbnf) from
// code: a set of named rules, and the escaping of literals and character
// classes. Used by the converters that emit GBNF (JSON Schema, regex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pagoda::grammar {

// `bytes` as a GBNF literal "..." matching exactly those bytes (valid UTF-8
// stays as is; quotes, backslashes, control bytes and bytes >= 0x80 that are
// not part of valid UTF-8 are escaped).
std::string gbnf_literal(std::string_view bytes);

// Code point `cp` written for use inside a character class [...]: ASCII
// letters, digits and plain punctuation as themselves, everything else (and
// the class syntax characters \ ] [ ^ -) as \xNN, \uNNNN or \UNNNNNNNN.
std::string gbnf_class_char(uint32_t cp);

class GbnfRuleSet;

// A parenthesised alternation matching exactly the strings `texts` (valid
// UTF-8, at least one, none empty), factored by common prefixes so that the
// matcher, which follows a bounded number of parses at once, never tracks
// more than one alternative per prefix: "( \"item-\" ( \"1\" | \"2\" ) )".
// Groups nested deeper than 32 become rules named from `hint` in `rules`.
std::string gbnf_literal_alternatives(std::vector<std::string> texts, std::string_view hint,
                                      GbnfRuleSet& rules);

// An ordered set of rules `name ::= body`. Names are [a-zA-Z0-9-]+ and unique;
// text() writes the rules in the order they were first defined or reserved.
class GbnfRuleSet {
 public:
  // Marks names as taken without defining them (names a caller defines later,
  // or fixed names that generated names must avoid).
  void reserve(std::string_view name);
  bool has(std::string_view name) const { return index_.count(std::string(name)) > 0; }
  bool is_defined(std::string_view name) const;
  // Whether a taken name starts with `prefix`.
  bool has_name_with_prefix(std::string_view prefix) const;

  // A free name derived from `hint`: characters outside [a-zA-Z0-9-] become
  // '-', long hints are cut, and "-2", "-3"... is appended until it is free.
  // The name is reserved.
  std::string fresh_name(std::string_view hint);

  // Defines (or redefines a reserved) rule; returns `name`.
  std::string define(std::string_view name, std::string body);

  // Total bytes of the rules' text so far (a size guard for the callers).
  size_t num_bytes() const { return num_bytes_; }
  size_t num_rules() const { return rules_.size(); }

  // "name ::= body\n" for every defined rule, in order.
  std::string text() const;

 private:
  struct Rule {
    std::string name;
    std::string body;
    bool defined = false;
  };
  std::vector<Rule> rules_;
  std::unordered_map<std::string, size_t> index_;  // name -> position in rules_
  size_t num_bytes_ = 0;
};

}  // namespace pagoda::grammar
