// Shared helpers of the filter implementations (filters*.cpp). Internal.
#pragma once

#include <string_view>
#include <unordered_map>

#include "jinja/filters.h"
#include "jinja/interpreter.h"

namespace pagoda::jinja {

using FilterTable = std::unordered_map<std::string_view, FilterFn>;

void add_text_filters(FilterTable& table);      // filters_text.cpp
void add_sequence_filters(FilterTable& table);  // filters_seq.cpp

// jinja2's make_attrgetter: "a.b.0" looks up a, then b, then 0 (as an int)
// with the sandbox's getitem; `attribute` None is the identity.
class AttrGetter {
 public:
  AttrGetter(Interpreter& interp, const Value& attribute, bool ignore_case = false,
             Value fallback = Value::none());
  Value operator()(const Value& item) const;

 private:
  Interpreter& interp_;
  ValueList parts_;
  bool ignore_case_;
  Value fallback_;  // replaces undefined results unless None
};

// Python str(), except that strings (and Markup) pass through (soft_str).
Value soft_str(const Value& v);
// Lowercases str values (ignore_case), others unchanged.
Value ignore_case(const Value& v);

}  // namespace pagoda::jinja
