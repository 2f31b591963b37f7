// A regex tree (regex_ast.h) as a minimal deterministic automaton over code
// points: what a length bound is multiplied with (json_string_pattern.h), where
// regex_to_gbnf's rules cannot count. Built by Thompson's construction, the
// subset construction (each state's outgoing code points split into disjoint
// sets) and Moore's partition refinement; only states from which an
// accepting state can be reached are kept.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/result.h"
#include "grammar/regex_ast.h"
#include "grammar/regex_char_set.h"

namespace pagoda::grammar {

// Bounds on the work for one regex: the nondeterministic automaton (about
// two states per code-point class of the tree with repeats unrolled) and the
// deterministic one.
constexpr size_t kMaxNfaStates = 50000;
constexpr size_t kMaxDfaStates = 2000;

struct RegexDfa {
  struct Transition {
    RegexCharSet chars;  // non-empty; the sets of one state are disjoint
    uint32_t target = 0;
  };
  struct State {
    std::vector<Transition> transitions;
    bool accepting = false;
  };
  // State 0 is the start. Empty when the regex matches no string.
  std::vector<State> states;
};

// The automaton of `tree` (a parse_regex result, without anchors). Errors
// (kInvalidArgument): "the regex needs more than N automaton states".
Result<RegexDfa> build_regex_dfa(const RegexNodePtr& tree);

}  // namespace pagoda::grammar
