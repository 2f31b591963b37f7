// Python semantics of the template operators: arithmetic (+ - * / // % **),
// unary minus/plus, rich comparisons and membership (in).
#pragma once

#include "jinja/value.h"

namespace pagoda::jinja {

enum class BinaryOp { kAdd, kSub, kMul, kDiv, kFloorDiv, kMod, kPow };
enum class CompareOp { kEq, kNe, kLt, kLe, kGt, kGe, kIn, kNotIn };

const char* binary_op_symbol(BinaryOp op);

// Throws a JinjaError (kType, kUndefined, kLimit) where Python would raise.
Value binary_op(BinaryOp op, const Value& a, const Value& b);
Value negate(const Value& v);
Value unary_plus(const Value& v);
bool compare(CompareOp op, const Value& a, const Value& b);
// Python `item in container`.
bool contains(const Value& container, const Value& item);
// Python `a < b` (what sort() uses).
bool less_than(const Value& a, const Value& b);

// markupsafe.escape of a string's text.
std::string html_escape(std::string_view s);
// markupsafe.escape(v): a Markup string (unchanged if v already is one).
Value escape_value(const Value& v);

}  // namespace pagoda::jinja
