// JSON Schema "pattern" as GBNF: the content of a JSON string (between the
// quotes, escapes written) whose decoded value the pattern matches, with
// ECMA-262 search semantics as JSON Schema specifies (unanchored: "a" matches
// "xay"; ^ and $ anchor). The regex dialect is regex_to_gbnf's.
#pragma once

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

}  // namespace pagoda::grammar
