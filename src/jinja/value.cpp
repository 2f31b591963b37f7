#include "jinja/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>

#include "jinja/error.h"
#include "jinja/unicode.h"

namespace pagoda::jinja {
namespace {

// Containers nest at most this deep: bounds the recursion of printing,
// comparing, serializing and destroying values (Python's own limit is ~1000).
constexpr int kMaxNesting = 512;

[[noreturn]] void fail_nesting() {
  fail(ErrorKind::kLimit, "values nested deeper than " + std::to_string(kMaxNesting) + " levels");
}

void check_depth(int depth) {
  if (depth > kMaxNesting) fail_nesting();
}

bool numbers_equal(const Value& a, const Value& b) {
  if (a.is_int() && b.is_int()) return a.as_int() == b.as_int();
  const Value& f = a.is_float() ? a : b;
  const Value& o = a.is_float() ? b : a;
  if (o.is_float()) return f.as_float() == o.as_float();
  // int vs float: exact comparison like Python.
  double d = f.as_float();
  if (!std::isfinite(d) || d != std::floor(d)) return false;
  if (d < -9.3e18 || d > 9.3e18) return false;
  return static_cast<int64_t>(d) == o.as_int() && static_cast<double>(o.as_int()) == d;
}

bool equal_impl(const Value& a, const Value& b, int depth);

bool lists_equal(const ValueList& a, const ValueList& b, int depth) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!equal_impl(a[i], b[i], depth + 1)) return false;
  }
  return true;
}

// Set equality (dict_keys, dict_items): same size and every element present.
bool sets_equal(const ValueList& a, const ValueList& b, int depth) {
  if (a.size() != b.size()) return false;
  for (const Value& x : a) {
    bool found = false;
    for (const Value& y : b) {
      if (equal_impl(x, y, depth + 1)) {
        found = true;
        break;
      }
    }
    if (!found) return false;
  }
  return true;
}

bool equal_impl(const Value& a, const Value& b, int depth) {
  check_depth(depth);
  if (a.is_number() && b.is_number()) return numbers_equal(a, b);
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case ValueType::kUndefined:
    case ValueType::kNone:
      return true;
    case ValueType::kString:
      return a.str() == b.str();
    case ValueType::kList:
    case ValueType::kTuple:
      return lists_equal(a.items(), b.items(), depth);
    case ValueType::kView: {
      const Sequence& x = a.seq();
      const Sequence& y = b.seq();
      if (x.view != y.view) return false;
      if (x.view == ViewKind::kRange) return lists_equal(x.items, y.items, depth);
      if (x.view == ViewKind::kDictValues) return &x == &y;
      return sets_equal(x.items, y.items, depth);
    }
    case ValueType::kDict: {
      const Dict& x = a.dict();
      const Dict& y = b.dict();
      if (x.entries.size() != y.entries.size()) return false;
      for (const auto& [k, v] : x.entries) {
        const Value* other = y.find(k);
        if (other == nullptr || !equal_impl(v, *other, depth + 1)) return false;
      }
      return true;
    }
    case ValueType::kIterator:
      return &a.iter_state() == &b.iter_state();
    case ValueType::kObject:
      return &a.obj() == &b.obj();
    default:
      return false;
  }
}

void append_int(std::string& out, int64_t i) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof(buf), i);
  out.append(buf, r.ptr);
}

void append_repr_impl(std::string& out, const Value& v, int depth);

void append_items(std::string& out, const ValueList& items, int depth) {
  for (size_t i = 0; i < items.size(); ++i) {
    if (i) out += ", ";
    append_repr_impl(out, items[i], depth + 1);
  }
}

void append_view_repr(std::string& out, const Sequence& s, int depth) {
  switch (s.view) {
    case ViewKind::kRange:
      out += "range(";
      append_int(out, s.range_start);
      out += ", ";
      append_int(out, s.range_stop);
      if (s.range_step != 1) {
        out += ", ";
        append_int(out, s.range_step);
      }
      out += ")";
      return;
    case ViewKind::kDictKeys:
      out += "dict_keys([";
      break;
    case ViewKind::kDictValues:
      out += "dict_values([";
      break;
    case ViewKind::kDictItems:
      out += "dict_items([";
      break;
  }
  append_items(out, s.items, depth);
  out += "])";
}

void append_repr_impl(std::string& out, const Value& v, int depth) {
  check_depth(depth);
  switch (v.type()) {
    case ValueType::kUndefined:
      out += "Undefined";
      return;
    case ValueType::kString:
      if (v.is_safe()) {
        out += "Markup(" + repr_string(v.str()) + ")";
      } else {
        out += repr_string(v.str());
      }
      return;
    case ValueType::kList:
      out += "[";
      append_items(out, v.items(), depth);
      out += "]";
      return;
    case ValueType::kTuple:
      out += "(";
      append_items(out, v.items(), depth);
      if (v.items().size() == 1) out += ",";
      out += ")";
      return;
    case ValueType::kView:
      append_view_repr(out, v.seq(), depth);
      return;
    case ValueType::kDict: {
      out += "{";
      bool first = true;
      for (const auto& [k, val] : v.dict().entries) {
        if (!first) out += ", ";
        first = false;
        append_repr_impl(out, k, depth + 1);
        out += ": ";
        append_repr_impl(out, val, depth + 1);
      }
      out += "}";
      return;
    }
    case ValueType::kIterator:
      out += "<" + v.iter_state().type_name + " object>";
      return;
    case ValueType::kObject:
      out += v.obj().repr();
      return;
    default:
      append_str(out, v);
  }
}

int value_depth(const Value& v) {
  switch (v.type()) {
    case ValueType::kList:
    case ValueType::kTuple:
    case ValueType::kView:
      return v.seq().depth;
    case ValueType::kDict:
      return v.dict().depth;
    case ValueType::kIterator:
      return v.iter_state().depth;
    default:
      return 0;
  }
}

// 1 + the deepest item; fails beyond kMaxNesting so that no value is deep
// enough to overflow the stack when it is printed or destroyed.
int nesting_of(const ValueList& items) {
  int depth = 0;
  for (const Value& v : items) depth = std::max(depth, value_depth(v));
  if (depth + 1 > kMaxNesting) fail_nesting();
  return depth + 1;
}

}  // namespace

Value::Value() : Value(ValueType::kUndefined, std::shared_ptr<const UndefinedInfo>()) {}

Value Value::undefined(std::string message, bool security) {
  return Value(ValueType::kUndefined,
               std::make_shared<const UndefinedInfo>(UndefinedInfo{std::move(message), security}));
}
Value Value::none() {
  return Value(ValueType::kNone, std::monostate());
}
Value Value::boolean(bool b) {
  return Value(ValueType::kBool, b);
}
Value Value::integer(int64_t i) {
  return Value(ValueType::kInt, i);
}
Value Value::floating(double d) {
  return Value(ValueType::kFloat, d);
}
Value Value::string(std::string s, bool safe) {
  Value v(ValueType::kString, std::move(s));
  v.safe_ = safe;
  return v;
}
Value Value::list(ValueList items) {
  Sequence seq{std::move(items)};
  seq.depth = nesting_of(seq.items);
  return Value(ValueType::kList, std::make_shared<const Sequence>(std::move(seq)));
}
Value Value::tuple(ValueList items) {
  Sequence seq{std::move(items)};
  seq.depth = nesting_of(seq.items);
  return Value(ValueType::kTuple, std::make_shared<const Sequence>(std::move(seq)));
}
Value Value::group(Value grouper, Value list) {
  Sequence seq{ValueList{std::move(grouper), std::move(list)}};
  seq.depth = nesting_of(seq.items);
  seq.is_group = true;
  return Value(ValueType::kTuple, std::make_shared<const Sequence>(std::move(seq)));
}
Value Value::view(Sequence seq) {
  seq.depth = nesting_of(seq.items);
  return Value(ValueType::kView, std::make_shared<const Sequence>(std::move(seq)));
}
Value Value::dict(Dict d) {
  int depth = 0;
  for (const auto& [k, v] : d.entries) depth = std::max({depth, value_depth(k), value_depth(v)});
  if (depth + 1 > kMaxNesting) fail_nesting();
  d.depth = depth + 1;
  return Value(ValueType::kDict, std::make_shared<const Dict>(std::move(d)));
}
Value Value::iterator(ValueList items, std::string type_name) {
  auto state = std::make_shared<IteratorState>();
  state->depth = nesting_of(items);
  state->items = std::move(items);
  state->type_name = std::move(type_name);
  return Value(ValueType::kIterator, std::move(state));
}
Value Value::object(std::shared_ptr<Object> obj) {
  return Value(ValueType::kObject, std::move(obj));
}

int64_t Value::as_int() const {
  return type_ == ValueType::kBool ? (std::get<bool>(data_) ? 1 : 0) : std::get<int64_t>(data_);
}

double Value::as_float() const {
  return type_ == ValueType::kFloat ? std::get<double>(data_) : static_cast<double>(as_int());
}

const UndefinedInfo& Value::undefined_info() const {
  static const UndefinedInfo kAnonymous{"value is undefined", false};
  const auto& p = std::get<std::shared_ptr<const UndefinedInfo>>(data_);
  return p ? *p : kAnonymous;
}

const Value* Dict::find(const Value& key) const {
  if (key.is_string()) return find(key.str());
  for (const auto& [k, v] : entries) {
    if (py_equal(k, key)) return &v;
  }
  return nullptr;
}

const Value* Dict::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k.is_string() && k.str() == key) return &v;
  }
  return nullptr;
}

void Dict::set(Value key, Value value) {
  for (auto& [k, v] : entries) {
    if (py_equal(k, key)) {
      v = std::move(value);
      return;
    }
  }
  entries.emplace_back(std::move(key), std::move(value));
}

std::string Object::repr() const {
  return "<" + type_name() + " object>";
}
bool Object::get_attr(std::string_view, Value&) const {
  return false;
}
bool Object::set_attr(std::string_view, const Value&) {
  return false;
}
Value Object::call(Interpreter&, CallArgs&) {
  fail(ErrorKind::kType, "'" + type_name() + "' object is not callable");
}

bool truthy(const Value& v) {
  switch (v.type()) {
    case ValueType::kUndefined:
    case ValueType::kNone:
      return false;
    case ValueType::kBool:
      return v.as_bool();
    case ValueType::kInt:
      return v.as_int() != 0;
    case ValueType::kFloat:
      return v.as_float() != 0.0;
    case ValueType::kString:
      return !v.str().empty();
    case ValueType::kList:
    case ValueType::kTuple:
    case ValueType::kView:
      return !v.items().empty();
    case ValueType::kDict:
      return !v.dict().entries.empty();
    default:
      return true;
  }
}

bool py_equal(const Value& a, const Value& b) {
  return equal_impl(a, b, 0);
}

std::string type_name(const Value& v) {
  switch (v.type()) {
    case ValueType::kUndefined:
      return "Undefined";
    case ValueType::kNone:
      return "NoneType";
    case ValueType::kBool:
      return "bool";
    case ValueType::kInt:
      return "int";
    case ValueType::kFloat:
      return "float";
    case ValueType::kString:
      return v.is_safe() ? "Markup" : "str";
    case ValueType::kList:
      return "list";
    case ValueType::kTuple:
      return "tuple";
    case ValueType::kView:
      switch (v.seq().view) {
        case ViewKind::kDictKeys:
          return "dict_keys";
        case ViewKind::kDictValues:
          return "dict_values";
        case ViewKind::kDictItems:
          return "dict_items";
        case ViewKind::kRange:
          return "range";
      }
      return "range";
    case ValueType::kDict:
      return "dict";
    case ValueType::kIterator:
      return v.iter_state().type_name;
    case ValueType::kObject:
      return v.obj().type_name();
  }
  return "object";
}

std::string object_type_repr(const Value& v) {
  if (v.is_none()) return "None";
  if (v.is_string() && v.is_safe()) return "markupsafe.Markup object";
  return type_name(v) + " object";
}

void append_str(std::string& out, const Value& v) {
  switch (v.type()) {
    case ValueType::kUndefined:
      return;
    case ValueType::kNone:
      out += "None";
      return;
    case ValueType::kBool:
      out += v.as_bool() ? "True" : "False";
      return;
    case ValueType::kInt:
      append_int(out, v.as_int());
      return;
    case ValueType::kFloat:
      out += float_repr(v.as_float());
      return;
    case ValueType::kString:
      out += v.str();
      return;
    default:
      append_repr_impl(out, v, 0);
  }
}

void append_repr(std::string& out, const Value& v) {
  append_repr_impl(out, v, 0);
}

std::string to_str(const Value& v) {
  if (v.is_string()) return v.str();
  std::string out;
  append_str(out, v);
  return out;
}

std::string repr(const Value& v) {
  std::string out;
  append_repr_impl(out, v, 0);
  return out;
}

std::string repr_string(std::string_view s) {
  bool has_single = s.find('\'') != std::string_view::npos;
  bool has_double = s.find('"') != std::string_view::npos;
  char quote = has_single && !has_double ? '"' : '\'';
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back(quote);
  size_t pos = 0;
  while (pos < s.size()) {
    size_t start = pos;
    char32_t cp = unicode::next_code_point(s, pos);
    if (cp == static_cast<char32_t>(quote) || cp == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(cp));
    } else if (cp == '\t') {
      out += "\\t";
    } else if (cp == '\n') {
      out += "\\n";
    } else if (cp == '\r') {
      out += "\\r";
    } else if (unicode::is_printable(cp)) {
      out.append(s.substr(start, pos - start));
    } else {
      unicode::append_py_escape(out, cp);
    }
  }
  out.push_back(quote);
  return out;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string_view sci(buf, r.ptr - buf);
  std::string out;
  if (sci[0] == '-') {
    out.push_back('-');
    sci.remove_prefix(1);
  }
  size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(0, e_pos)) {
    if (c != '.') digits.push_back(c);
  }
  int exponent = std::atoi(std::string(sci.substr(e_pos + 1)).c_str());
  int num_digits = static_cast<int>(digits.size());
  if (exponent < -4 || exponent >= 16) {
    out.push_back(digits[0]);
    if (num_digits > 1) {
      out.push_back('.');
      out.append(digits, 1, std::string::npos);
    }
    char ebuf[16];
    std::snprintf(ebuf, sizeof(ebuf), "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
    out += ebuf;
    return out;
  }
  int decpt = exponent + 1;  // digits before the decimal point
  if (decpt <= 0) {
    out += "0.";
    out.append(static_cast<size_t>(-decpt), '0');
    out += digits;
  } else if (decpt >= num_digits) {
    out += digits;
    out.append(static_cast<size_t>(decpt - num_digits), '0');
    out += ".0";
  } else {
    out.append(digits, 0, decpt);
    out.push_back('.');
    out.append(digits, decpt, std::string::npos);
  }
  return out;
}

void check_hashable(const Value& v) {
  switch (v.type()) {
    case ValueType::kList:
    case ValueType::kDict:
      fail(ErrorKind::kType, "unhashable type: '" + type_name(v) + "'");
    case ValueType::kView:
      if (v.seq().view != ViewKind::kRange) {
        fail(ErrorKind::kType, "unhashable type: '" + type_name(v) + "'");
      }
      return;
    case ValueType::kTuple:
      for (const Value& item : v.items()) check_hashable(item);
      return;
    default:
      return;
  }
}

int64_t py_len(const Value& v) {
  switch (v.type()) {
    case ValueType::kUndefined:
      return 0;
    case ValueType::kString:
      return static_cast<int64_t>(unicode::num_code_points(v.str()));
    case ValueType::kList:
    case ValueType::kTuple:
    case ValueType::kView:
      return static_cast<int64_t>(v.items().size());
    case ValueType::kDict:
      return static_cast<int64_t>(v.dict().entries.size());
    default:
      fail(ErrorKind::kType, "object of type '" + type_name(v) + "' has no len()");
  }
}

ValueList iterate(const Value& v) {
  switch (v.type()) {
    case ValueType::kUndefined:
      return {};
    case ValueType::kString: {
      ValueList out;
      const std::string& s = v.str();
      size_t pos = 0;
      while (pos < s.size()) {
        size_t start = pos;
        unicode::next_code_point(s, pos);
        out.push_back(Value::string(
            s.substr(start, pos - start)));  // str.__iter__ yields str, even for Markup
      }
      return out;
    }
    case ValueType::kList:
    case ValueType::kTuple:
    case ValueType::kView:
      return v.items();
    case ValueType::kDict: {
      ValueList out;
      out.reserve(v.dict().entries.size());
      for (const auto& kv : v.dict().entries) out.push_back(kv.first);
      return out;
    }
    case ValueType::kIterator: {
      IteratorState& st = v.iter_state();
      ValueList out(st.items.begin() + static_cast<std::ptrdiff_t>(st.pos), st.items.end());
      st.pos = st.items.size();
      return out;
    }
    default:
      fail(ErrorKind::kType, "'" + type_name(v) + "' object is not iterable");
  }
}

void fail_undefined(const Value& v) {
  const UndefinedInfo& info = v.undefined_info();
  fail(info.security ? ErrorKind::kSecurity : ErrorKind::kUndefined, info.message);
}

}  // namespace pagoda::jinja
