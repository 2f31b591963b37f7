// llama.cpp's GBNF syntax (grammars/README.md of llama.cpp) -> a finalized
// byte-level Grammar (grammar.h).
//
//   rules     name ::= alternatives, names [a-zA-Z0-9_-]+; a newline ends a
//             rule except inside ( ) and after | or ::=
//   literals  "..." with escapes \n \r \t \\ \" \[ \] \- \xNN \uNNNN \UNNNNNNNN
//             (code points, encoded as UTF-8)
//   classes   [a-z0-9_] and [^...] over code points; . is any code point
//   groups    ( alternatives ), repetition * + ? {m} {m,} {m,n}
//   comments  # to the end of the line
// Every referenced rule must be defined once; the root rule must exist.
// Refused with an error: left recursion, a repetition whose item can be
// empty (* + {m,}), repetitions expanding past kMaxRepeatElements, groups
// nested deeper than kMaxNesting, llama.cpp's token syntax (<...>, !<...>).
#pragma once

#include <memory>
#include <string_view>

#include "core/result.h"
#include "grammar/grammar.h"

namespace pagoda::grammar {

inline constexpr size_t kMaxRepeatElements = 10'000;
inline constexpr int kMaxNesting = 100;

// Errors: kInvalidArgument "grammar line L, column C: <what>", "grammar: rule
// 'x' is referenced but not defined", "grammar: no rule 'root'", or
// finalize_grammar's errors.
Result<Grammar> parse_gbnf(std::string_view text, std::string_view root = "root");

// parse_gbnf into the shared form the matcher holds.
Result<std::shared_ptr<const Grammar>> parse_gbnf_shared(std::string_view text,
                                                         std::string_view root = "root");

}  // namespace pagoda::grammar
