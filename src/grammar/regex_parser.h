// Regular expression syntax -> RegexNode tree: the subset of ECMAScript and
// Python syntax that JSON Schema `pattern` and vLLM's guided_regex users write
// (docs/structured-output.md, "Regular expressions", lists it). The match is
// always whole, so ^ / \A are accepted only where nothing can precede them and
// $ / \Z only where nothing can follow; the tree returned has no anchors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/result.h"
#include "grammar/gbnf_parser.h"
#include "grammar/regex_ast.h"

namespace pagoda::grammar {

// Limits that keep hostile patterns cheap: every bounded quantifier count, the
// grammar elements one repeat expands to as GBNF (gbnf_repeat_elements, under
// parse_gbnf's own limit), the depth of nested groups
// (the parser recurses once per group), and the size of the tree with every
// repeat unrolled (RegexNode::expanded_size), which bounds the whole grammar.
constexpr uint32_t kMaxRegexRepeat = 10000;
constexpr uint64_t kMaxRegexRepeatElements = kMaxRepeatElements;
constexpr size_t kMaxRegexGroupDepth = 200;
constexpr uint64_t kMaxRegexExpandedSize = 100000;

// Parses UTF-8 `pattern`. Errors: kInvalidArgument "regex at position P: <what>"
// with P the 0-based code-point offset in the pattern (as Python's re reports);
// also for valid regexes outside the subset (backreferences, lookaround, word
// boundaries, inline flags) and for a pattern that matches no string at all.
Result<RegexNodePtr> parse_regex(std::string_view pattern);

}  // namespace pagoda::grammar
