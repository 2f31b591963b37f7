// Python sequence indexing and slicing (obj[i], obj[a:b:c]) for strings
// (by code point), lists, tuples and ranges.
#pragma once

#include <cstdint>
#include <optional>

#include "jinja/value.h"

namespace pagoda::jinja {

// obj[start:stop:step]; each bound is None or an int. Throws like Python.
Value slice_value(const Value& obj, const Value& start, const Value& stop, const Value& step);

// Normalizes a possibly negative index into [0, size); nullopt when out of range.
std::optional<size_t> normalize_index(int64_t index, size_t size);

// Python's slice clamping of [start, end) bounds (None → default) for
// str.find-style arguments; returns code-point positions.
void clamp_bounds(const Value* start, const Value* end, size_t size, size_t& lo, size_t& hi);

}  // namespace pagoda::jinja
