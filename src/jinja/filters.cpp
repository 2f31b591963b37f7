// The filter registry and the filters on single values: default, tojson,
// int, float, abs, round, attr, safe/escape, string, length.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "jinja/call_args.h"
#include "jinja/error.h"
#include "jinja/filters_impl.h"
#include "jinja/json_value.h"
#include "jinja/methods.h"
#include "jinja/operators.h"
#include "jinja/unicode.h"

namespace pagoda::jinja {
namespace {

Value f_default(Interpreter&, const Value& value, CallArgs& args) {
  BoundArgs a("default", args, {"default_value", "boolean"});
  if (value.is_undefined() || (a.flag(1, false) && !truthy(value))) {
    return a.get_or(0, Value::string(""));
  }
  return value;
}

// transformers' tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False).
Value f_tojson(Interpreter&, const Value& value, CallArgs& args) {
  BoundArgs a("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions opt;
  opt.ensure_ascii = a.flag(0, false);
  if (a.has(1) && !a.get(1).is_none()) {
    const Value& indent = a.get(1);
    opt.has_indent = true;
    if (indent.is_string()) {
      opt.indent = indent.str();
    } else if (indent.is_int()) {
      opt.indent =
          std::string(static_cast<size_t>(std::clamp<int64_t>(indent.as_int(), 0, 1000)), ' ');
    } else {
      fail(ErrorKind::kType,
           "can't multiply sequence by non-int of type '" + type_name(indent) + "'");
    }
    opt.item_separator = ",";
  }
  if (a.has(2) && !a.get(2).is_none()) {
    ValueList seps = iterate(a.get(2));
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string()) {
      fail(ErrorKind::kType, "tojson: separators must be a pair of strings");
    }
    opt.item_separator = seps[0].str();
    opt.key_separator = seps[1].str();
  }
  opt.sort_keys = a.flag(3, false);
  return Value::string(json_dumps(value, opt));
}

// Python int(str, base): optional whitespace and sign, digits with single
// underscores between them.
bool parse_py_int(std::string_view s, int base, int64_t& out) {
  std::string t = py_strip(std::string(s), nullptr, true, true);
  size_t i = 0;
  bool neg = false;
  if (i < t.size() && (t[i] == '+' || t[i] == '-')) neg = t[i++] == '-';
  if (i >= t.size() || t[i] == '_') return false;
  std::string digits;
  for (; i < t.size(); ++i) {
    if (t[i] == '_') {
      if (i + 1 >= t.size() || t[i + 1] == '_') return false;
      continue;
    }
    digits.push_back(t[i]);
  }
  for (char c : digits) {
    int d = (c >= '0' && c <= '9')                     ? c - '0'
            : ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') ? (c | 0x20) - 'a' + 10
                                                       : 99;
    if (d >= base) return false;
  }
  errno = 0;
  long long v = std::strtoll(digits.c_str(), nullptr, base);
  if (errno == ERANGE) return false;
  out = neg ? -v : v;
  return true;
}

// Python float(str): whitespace, sign, digits with underscores, inf/nan.
bool parse_py_float(std::string_view s, double& out) {
  std::string t = py_strip(std::string(s), nullptr, true, true);
  std::string lower = py_lower(t);
  std::string body = lower;
  bool neg = false;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    neg = body[0] == '-';
    body.erase(0, 1);
  }
  if (body == "inf" || body == "infinity" || body == "nan") {
    out = body == "nan" ? std::nan("") : HUGE_VAL;
    if (neg) out = -out;
    return true;
  }
  std::string clean;
  for (size_t i = 0; i < t.size(); ++i) {
    char c = t[i];
    if (c == '_') {
      bool ok = i > 0 && i + 1 < t.size() && std::isdigit(static_cast<unsigned char>(t[i - 1])) &&
                std::isdigit(static_cast<unsigned char>(t[i + 1]));
      if (!ok) return false;
      continue;
    }
    if (!(std::isdigit(static_cast<unsigned char>(c)) || c == '.' || c == 'e' || c == 'E' ||
          c == '+' || c == '-')) {
      return false;
    }
    clean.push_back(c);
  }
  if (clean.empty()) return false;
  char* end = nullptr;
  out = std::strtod(clean.c_str(), &end);
  return end == clean.c_str() + clean.size();
}

Value f_int(Interpreter&, const Value& value, CallArgs& args) {
  BoundArgs a("int", args, {"default", "base"});
  Value fallback = a.get_or(0, Value::integer(0));
  int64_t base = a.integer(1, 10);
  if (value.is_undefined()) fail_undefined(value);
  if (value.is_string()) {
    int64_t v;
    if (base >= 2 && base <= 36 && parse_py_int(value.str(), static_cast<int>(base), v)) {
      return Value::integer(v);
    }
    double d;
    if (parse_py_float(value.str(), d) && std::isfinite(d) && std::fabs(d) < 9.2e18) {
      return Value::integer(static_cast<int64_t>(std::trunc(d)));
    }
    return fallback;
  }
  if (value.is_int()) return Value::integer(value.as_int());
  if (value.is_float()) {
    double d = value.as_float();
    if (std::isnan(d)) return fallback;
    if (std::isinf(d)) fail(ErrorKind::kType, "cannot convert float infinity to integer");
    if (std::fabs(d) >= 9.2e18)
      fail(ErrorKind::kUnsupported, "integer overflow (integers are 64-bit here)");
    return Value::integer(static_cast<int64_t>(std::trunc(d)));
  }
  return fallback;
}

Value f_float(Interpreter&, const Value& value, CallArgs& args) {
  BoundArgs a("float", args, {"default"});
  if (value.is_undefined()) fail_undefined(value);
  if (value.is_number()) return Value::floating(value.as_float());
  double d;
  if (value.is_string() && parse_py_float(value.str(), d)) return Value::floating(d);
  return a.get_or(0, Value::floating(0.0));
}

Value f_abs(Interpreter&, const Value& value, CallArgs& args) {
  expect_no_kwargs("abs", args);
  if (!args.positional.empty()) fail(ErrorKind::kType, "abs() takes exactly one argument");
  if (value.is_int()) {
    if (value.as_int() == INT64_MIN) fail(ErrorKind::kUnsupported, "integer overflow");
    return Value::integer(std::abs(value.as_int()));
  }
  if (value.is_float()) return Value::floating(std::fabs(value.as_float()));
  fail(ErrorKind::kType, "bad operand type for abs(): '" + type_name(value) + "'");
}

// Python round(x, n): correctly rounded, ties to even.
double round_half_even(double x, int64_t ndigits) {
  if (!std::isfinite(x)) return x;
  if (ndigits >= 0) {
    if (ndigits > 320) return x;
    char buf[512];
    std::snprintf(buf, sizeof(buf), "%.*f", static_cast<int>(ndigits), x);
    return std::strtod(buf, nullptr);
  }
  if (ndigits < -308) return std::copysign(0.0, x);
  double scale = std::pow(10.0, static_cast<double>(-ndigits));
  double y = x / scale;
  double r = std::nearbyint(y);  // default rounding mode: ties to even
  return r * scale;
}

Value f_round(Interpreter&, const Value& value, CallArgs& args) {
  BoundArgs a("round", args, {"precision", "method"});
  int64_t precision = a.integer(0, 0);
  std::string method = a.string(1, "common");
  if (method != "common" && method != "ceil" && method != "floor") {
    fail(ErrorKind::kType, "method must be common, ceil or floor");
  }
  if (!value.is_number())
    fail(ErrorKind::kType, "type " + type_name(value) + " doesn't define __round__ method");
  if (method == "common") {
    if (value.is_int()) {
      if (precision >= 0) return Value::integer(value.as_int());
      double r = round_half_even(static_cast<double>(value.as_int()), precision);
      return Value::integer(static_cast<int64_t>(r));
    }
    return Value::floating(round_half_even(value.as_float(), precision));
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  double scaled = value.as_float() * scale;
  double r = method == "ceil" ? std::ceil(scaled) : std::floor(scaled);
  return Value::floating(r / scale);
}

Value f_attr(Interpreter& interp, const Value& value, CallArgs& args) {
  BoundArgs a("attr", args, {"name"});
  if (!a.has(0)) fail(ErrorKind::kType, "attr() missing required argument 'name'");
  std::string name = a.string(0, "");
  Value method;
  bool has = value.is_object() ? value.obj().get_attr(name, method)
                               : find_method(value, name, method) != MethodLookup::kMissing;
  if (!has && !value.is_undefined()) {
    return Value::undefined("'" + object_type_repr(value) + "' has no attribute '" + name + "'");
  }
  return interp.getattr(value, name);
}

Value f_safe(Interpreter&, const Value& value, CallArgs& args) {
  expect_no_kwargs("safe", args);
  return Value::string(to_str(value), true);
}

Value f_escape(Interpreter&, const Value& value, CallArgs& args) {
  expect_no_kwargs("escape", args);
  return escape_value(value);
}

Value f_forceescape(Interpreter&, const Value& value, CallArgs& args) {
  expect_no_kwargs("forceescape", args);
  return Value::string(html_escape(to_str(value)), true);
}

Value f_string(Interpreter&, const Value& value, CallArgs& args) {
  expect_no_kwargs("string", args);
  return soft_str(value);
}

Value f_length(Interpreter&, const Value& value, CallArgs& args) {
  expect_no_kwargs("length", args);
  return Value::integer(py_len(value));
}

const FilterTable& filter_table() {
  static const FilterTable table = [] {
    FilterTable t = {
        {"default", f_default}, {"d", f_default},     {"tojson", f_tojson},
        {"int", f_int},         {"float", f_float},   {"abs", f_abs},
        {"round", f_round},     {"attr", f_attr},     {"safe", f_safe},
        {"escape", f_escape},   {"e", f_escape},      {"forceescape", f_forceescape},
        {"string", f_string},   {"length", f_length}, {"count", f_length},
    };
    add_text_filters(t);
    add_sequence_filters(t);
    return t;
  }();
  return table;
}

}  // namespace

AttrGetter::AttrGetter(Interpreter& interp, const Value& attribute, bool ignore_case,
                       Value fallback)
    : interp_(interp), ignore_case_(ignore_case), fallback_(std::move(fallback)) {
  if (attribute.is_none()) return;
  if (!attribute.is_string()) {
    parts_.push_back(attribute);
    return;
  }
  const std::string& s = attribute.str();
  size_t start = 0;
  while (true) {
    size_t dot = s.find('.', start);
    std::string part = s.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    bool digits = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    if (digits && part.size() < 18) {
      parts_.push_back(Value::integer(std::stoll(part)));
    } else {
      parts_.push_back(Value::string(part));
    }
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
}

Value AttrGetter::operator()(const Value& item) const {
  Value v = item;
  for (const Value& part : parts_) {
    v = interp_.getitem(v, part);
    if (!fallback_.is_none() && v.is_undefined()) v = fallback_;
  }
  return ignore_case_ ? ignore_case(v) : v;
}

Value soft_str(const Value& v) {
  return v.is_string() ? v : Value::string(to_str(v));
}

Value ignore_case(const Value& v) {
  return v.is_string() ? Value::string(py_lower(v.str()), v.is_safe()) : v;
}

FilterFn find_filter(std::string_view name) {
  const FilterTable& t = filter_table();
  auto it = t.find(name);
  return it == t.end() ? nullptr : it->second;
}

bool is_known_filter(std::string_view name) {
  static constexpr std::string_view kUnimplemented[] = {"pprint", "random", "urlize", "wordwrap"};
  for (std::string_view n : kUnimplemented) {
    if (n == name) return true;
  }
  return find_filter(name) != nullptr;
}

}  // namespace pagoda::jinja
