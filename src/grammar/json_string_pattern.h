// JSON Schema "pattern" as GBNF: the content of a JSON string (between the
// quotes, escapes written) whose decoded value the pattern matches, with
// ECMA-262 search semantics as JSON Schema specifies (unanchored: "a" matches
// "xay"; ^ and $ anchor). The regex dialect is regex_to_gbnf's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/result.h"
#include "grammar/gbnf_writer.h"

namespace pagoda::grammar {

// The full-match regex equivalent to searching for `pattern`: each top-level
// alternative gets "[\s\S]*" before it unless it starts with ^ (or \A), and
// after it unless it ends with $ (or \Z).
std::string pattern_search_as_fullmatch(std::string_view pattern);

// Defines in `rules` the rules matching the JSON-escaped content of strings
// the pattern matches (named from `hint`, never colliding with names in
// `rules`); returns the content rule's name. Errors: regex_to_gbnf's
// "regex at position P: <what>" (P counts code points of `pattern`).
Result<std::string> define_pattern_content(std::string_view pattern, std::string_view hint,
                                           GbnfRuleSet& rules);

// Product states (pattern automaton states x string lengths) one length-bounded
// pattern may have: bounds the rules written (about 100 bytes per state).
constexpr size_t kMaxLengthProductStates = 20000;

// Like define_pattern_content, for the strings the pattern matches whose
// length in code points lies within [min_length, max_length] (no upper bound
// when max_length is nullopt): the product of the search form's minimal
// automaton (regex_dfa.h) with a length counter, one rule per (state, length)
// pair from which a matching string of a valid length can still be completed,
// so no prefix the rules admit is a dead end. Errors: the regex's, "the regex
// needs more than N automaton states", "pattern and length bounds need more
// than 20000 automaton states (...)" and "no string of N to M characters
// matches it".
Result<std::string> define_pattern_content_with_length(std::string_view pattern,
                                                       uint64_t min_length,
                                                       std::optional<uint64_t> max_length,
                                                       std::string_view hint, GbnfRuleSet& rules);

}  // namespace pagoda::grammar
