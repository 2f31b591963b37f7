// Regular expression -> GBNF text (llama.cpp's grammar syntax, read by parse_gbnf).
#pragma once

#include <string>
#include <string_view>

#include "core/result.h"

namespace pagoda::grammar {

// GBNF rules defining `rule_name` (helper rules named "<rule_name>-<number>")
// that match exactly the strings the regex fully matches. Syntax and
// semantics: the ECMAScript/Python subset of docs/structured-output.md
// ("Regular expressions"); limits in grammar/regex_parser.h. The text uses
// only literals, code-point classes (never a surrogate, so every class has a
// UTF-8 form), rule references and the operators | * + ? {m} {m,} {m,n}; it
// has no recursion, and nothing repeated without bound can match the empty
// string. Errors: kInvalidArgument "regex at position P: <what>" (P counts
// code points from 0), or "regex rule name '<name>' ..." for a name that is
// not [a-zA-Z0-9-]+.
Result<std::string> regex_to_gbnf(std::string_view pattern, std::string_view rule_name);

}  // namespace pagoda::grammar
