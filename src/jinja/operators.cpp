#include "jinja/operators.h"

#include <cmath>
#include <limits>

#include "jinja/error.h"
#include "jinja/limits.h"
#include "jinja/py_format.h"

namespace pagoda::jinja {
namespace {

[[noreturn]] void fail_operands(const char* op, const Value& a, const Value& b) {
  fail(ErrorKind::kType, std::string("unsupported operand type(s) for ") + op + ": '" +
                             type_name(a) + "' and '" + type_name(b) + "'");
}

void check_defined(const Value& a, const Value& b) {
  if (a.is_undefined()) fail_undefined(a);
  if (b.is_undefined()) fail_undefined(b);
}

Value int_result(bool overflow, int64_t r) {
  if (overflow) fail(ErrorKind::kUnsupported, "integer overflow (integers are 64-bit here)");
  return Value::integer(r);
}

Value repeat_string(const Value& s, int64_t n) {
  if (n <= 0) return Value::string("", s.is_safe());
  const std::string& text = s.str();
  if (!text.empty() && static_cast<uint64_t>(n) > kMaxStringBytes / text.size()) {
    fail(ErrorKind::kLimit,
         "string repetition exceeds " + std::to_string(kMaxStringBytes) + " bytes");
  }
  std::string out;
  out.reserve(text.size() * static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out += text;
  return Value::string(std::move(out), s.is_safe());
}

Value repeat_list(const Value& l, int64_t n) {
  ValueList out;
  if (n > 0) {
    const ValueList& items = l.items();
    if (!items.empty() && static_cast<uint64_t>(n) > kMaxListItems / items.size()) {
      fail(ErrorKind::kLimit,
           "list repetition exceeds " + std::to_string(kMaxListItems) + " items");
    }
    out.reserve(items.size() * static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), items.begin(), items.end());
  }
  return l.type() == ValueType::kTuple ? Value::tuple(std::move(out)) : Value::list(std::move(out));
}

Value add(const Value& a, const Value& b) {
  if (a.is_int() && b.is_int()) {
    int64_t r;
    bool overflow = __builtin_add_overflow(a.as_int(), b.as_int(), &r);
    return int_result(overflow, r);
  }
  if (a.is_number() && b.is_number()) return Value::floating(a.as_float() + b.as_float());
  if (a.is_string() && b.is_string()) {
    if (a.str().size() + b.str().size() > kMaxStringBytes) {
      fail(ErrorKind::kLimit, "string exceeds " + std::to_string(kMaxStringBytes) + " bytes");
    }
    if (a.is_safe() && !b.is_safe()) return Value::string(a.str() + html_escape(b.str()), true);
    if (b.is_safe() && !a.is_safe()) return Value::string(html_escape(a.str()) + b.str(), true);
    return Value::string(a.str() + b.str(), a.is_safe());
  }
  if (a.type() == b.type() && (a.type() == ValueType::kList || a.type() == ValueType::kTuple)) {
    if (a.items().size() + b.items().size() > kMaxListItems) {
      fail(ErrorKind::kLimit, "list exceeds " + std::to_string(kMaxListItems) + " items");
    }
    ValueList out = a.items();
    out.insert(out.end(), b.items().begin(), b.items().end());
    return a.type() == ValueType::kTuple ? Value::tuple(std::move(out))
                                         : Value::list(std::move(out));
  }
  if (a.is_string() && !a.is_safe()) {
    fail(ErrorKind::kType, "can only concatenate str (not \"" + type_name(b) + "\") to str");
  }
  if (a.type() == ValueType::kList) {
    fail(ErrorKind::kType, "can only concatenate list (not \"" + type_name(b) + "\") to list");
  }
  fail_operands("+", a, b);
}

Value multiply(const Value& a, const Value& b) {
  if (a.is_int() && b.is_int()) {
    int64_t r;
    bool overflow = __builtin_mul_overflow(a.as_int(), b.as_int(), &r);
    return int_result(overflow, r);
  }
  if (a.is_number() && b.is_number()) return Value::floating(a.as_float() * b.as_float());
  if (a.is_string() && b.is_int()) return repeat_string(a, b.as_int());
  if (b.is_string() && a.is_int()) return repeat_string(b, a.as_int());
  bool a_list = a.type() == ValueType::kList || a.type() == ValueType::kTuple;
  bool b_list = b.type() == ValueType::kList || b.type() == ValueType::kTuple;
  if (a_list && b.is_int()) return repeat_list(a, b.as_int());
  if (b_list && a.is_int()) return repeat_list(b, a.as_int());
  fail_operands("*", a, b);
}

// CPython's float divmod: the quotient rounded toward -inf and the
// remainder with the sign of the divisor.
void float_divmod(double x, double y, double& floordiv, double& mod) {
  mod = std::fmod(x, y);
  double div = (x - mod) / y;
  if (mod != 0.0) {
    if ((y < 0) != (mod < 0)) {
      mod += y;
      div -= 1.0;
    }
  } else {
    mod = std::copysign(0.0, y);
  }
  if (div != 0.0) {
    floordiv = std::floor(div);
    if (div - floordiv > 0.5) floordiv += 1.0;
  } else {
    floordiv = std::copysign(0.0, x / y);
  }
}

Value divide_family(BinaryOp op, const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) fail_operands(binary_op_symbol(op), a, b);
  if (op == BinaryOp::kDiv) {
    if (b.as_float() == 0.0) fail(ErrorKind::kType, "division by zero");
    if (a.is_int() && b.is_int()) {
      // Python divides ints exactly then rounds once; long double is exact enough here.
      return Value::floating(static_cast<double>(static_cast<long double>(a.as_int()) /
                                                 static_cast<long double>(b.as_int())));
    }
    return Value::floating(a.as_float() / b.as_float());
  }
  if (a.is_int() && b.is_int()) {
    int64_t x = a.as_int(), y = b.as_int();
    if (y == 0) fail(ErrorKind::kType, "integer division or modulo by zero");
    if (x == std::numeric_limits<int64_t>::min() && y == -1) {
      if (op == BinaryOp::kMod) return Value::integer(0);
      fail(ErrorKind::kUnsupported, "integer overflow (integers are 64-bit here)");
    }
    int64_t q = x / y, r = x % y;
    if (r != 0 && ((r < 0) != (y < 0))) {
      q -= 1;
      r += y;
    }
    return Value::integer(op == BinaryOp::kFloorDiv ? q : r);
  }
  double y = b.as_float();
  if (y == 0.0) {
    fail(ErrorKind::kType,
         op == BinaryOp::kFloorDiv ? "float floor division by zero" : "float modulo");
  }
  double floordiv, mod;
  float_divmod(a.as_float(), y, floordiv, mod);
  return Value::floating(op == BinaryOp::kFloorDiv ? floordiv : mod);
}

Value power(const Value& a, const Value& b) {
  if (!a.is_number() || !b.is_number()) fail_operands("** or pow()", a, b);
  if (a.is_int() && b.is_int() && b.as_int() >= 0) {
    int64_t base = a.as_int(), exp = b.as_int(), result = 1;
    while (exp > 0) {
      if (exp & 1) {
        if (__builtin_mul_overflow(result, base, &result)) int_result(true, 0);
      }
      exp >>= 1;
      if (exp > 0 && __builtin_mul_overflow(base, base, &base)) int_result(true, 0);
    }
    return Value::integer(result);
  }
  double x = a.as_float(), y = b.as_float();
  if (x == 0.0 && y < 0.0) fail(ErrorKind::kType, "0.0 cannot be raised to a negative power");
  if (x < 0.0 && y != std::floor(y)) {
    fail(ErrorKind::kUnsupported, "complex numbers are not supported");
  }
  double r = std::pow(x, y);
  if (std::isinf(r) && std::isfinite(x) && std::isfinite(y)) {
    fail(ErrorKind::kType, "(34, 'Numerical result out of range')");
  }
  return Value::floating(r);
}

template <typename T>
bool apply_order(CompareOp op, const T& x, const T& y) {
  switch (op) {
    case CompareOp::kLt:
      return x < y;
    case CompareOp::kLe:
      return x <= y;
    case CompareOp::kGt:
      return x > y;
    case CompareOp::kGe:
      return x >= y;
    default:
      return false;
  }
}

const char* order_symbol(CompareOp op) {
  switch (op) {
    case CompareOp::kLt:
      return "<";
    case CompareOp::kLe:
      return "<=";
    case CompareOp::kGt:
      return ">";
    default:
      return ">=";
  }
}

bool order(CompareOp op, const Value& a, const Value& b, int depth) {
  if (depth > 512) fail(ErrorKind::kLimit, "comparison nested too deeply");
  check_defined(a, b);
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return apply_order(op, a.as_int(), b.as_int());
    if (std::isnan(a.as_float()) || std::isnan(b.as_float())) return false;
    long double x = a.is_int() ? static_cast<long double>(a.as_int()) : a.as_float();
    long double y = b.is_int() ? static_cast<long double>(b.as_int()) : b.as_float();
    return apply_order(op, x, y);
  }
  if (a.is_string() && b.is_string()) return apply_order(op, a.str(), b.str());
  if (a.type() == b.type() && (a.type() == ValueType::kList || a.type() == ValueType::kTuple)) {
    const ValueList& x = a.items();
    const ValueList& y = b.items();
    size_t n = std::min(x.size(), y.size());
    for (size_t i = 0; i < n; ++i) {
      if (!py_equal(x[i], y[i])) return order(op, x[i], y[i], depth + 1);
    }
    return apply_order(op, x.size(), y.size());
  }
  fail(ErrorKind::kType, std::string("'") + order_symbol(op) +
                             "' not supported between instances of '" + type_name(a) + "' and '" +
                             type_name(b) + "'");
}

}  // namespace

const char* binary_op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSub:
      return "-";
    case BinaryOp::kMul:
      return "*";
    case BinaryOp::kDiv:
      return "/";
    case BinaryOp::kFloorDiv:
      return "//";
    case BinaryOp::kMod:
      return "%";
    case BinaryOp::kPow:
      return "**";
  }
  return "?";
}

Value binary_op(BinaryOp op, const Value& a, const Value& b) {
  if (op == BinaryOp::kMod && a.is_string()) {
    // str.__mod__ formats any right operand, undefined included.
    return Value::string(percent_format(a.str(), b, a.is_safe()), a.is_safe());
  }
  check_defined(a, b);
  switch (op) {
    case BinaryOp::kAdd:
      return add(a, b);
    case BinaryOp::kSub:
      if (a.is_int() && b.is_int()) {
        int64_t r;
        bool overflow = __builtin_sub_overflow(a.as_int(), b.as_int(), &r);
        return int_result(overflow, r);
      }
      if (a.is_number() && b.is_number()) return Value::floating(a.as_float() - b.as_float());
      fail_operands("-", a, b);
    case BinaryOp::kMul:
      return multiply(a, b);
    case BinaryOp::kMod:
      return divide_family(op, a, b);
    case BinaryOp::kDiv:
    case BinaryOp::kFloorDiv:
      return divide_family(op, a, b);
    case BinaryOp::kPow:
      return power(a, b);
  }
  fail(ErrorKind::kType, "bad operator");
}

Value negate(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_int()) {
    if (v.as_int() == std::numeric_limits<int64_t>::min()) int_result(true, 0);
    return Value::integer(-v.as_int());
  }
  if (v.is_float()) return Value::floating(-v.as_float());
  fail(ErrorKind::kType, "bad operand type for unary -: '" + type_name(v) + "'");
}

Value unary_plus(const Value& v) {
  if (v.is_undefined()) fail_undefined(v);
  if (v.is_int()) return Value::integer(v.as_int());
  if (v.is_float()) return v;
  fail(ErrorKind::kType, "bad operand type for unary +: '" + type_name(v) + "'");
}

bool contains(const Value& container, const Value& item) {
  switch (container.type()) {
    case ValueType::kUndefined:
      return false;
    case ValueType::kString:
      if (!item.is_string()) {
        fail(ErrorKind::kType,
             "'in <string>' requires string as left operand, not " + type_name(item));
      }
      return container.str().find(item.str()) != std::string::npos;
    case ValueType::kDict:
      check_hashable(item);
      return container.dict().find(item) != nullptr;
    case ValueType::kView:
      if (container.seq().view == ViewKind::kDictKeys) check_hashable(item);
      [[fallthrough]];
    case ValueType::kList:
    case ValueType::kTuple:
      for (const Value& v : container.items()) {
        if (py_equal(v, item)) return true;
      }
      return false;
    case ValueType::kIterator: {
      IteratorState& st = container.iter_state();
      while (st.pos < st.items.size()) {
        if (py_equal(st.items[st.pos++], item)) return true;
      }
      return false;
    }
    default:
      fail(ErrorKind::kType, "argument of type '" + type_name(container) + "' is not iterable");
  }
}

bool compare(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::kEq:
      return py_equal(a, b);
    case CompareOp::kNe:
      return !py_equal(a, b);
    case CompareOp::kIn:
      return contains(b, a);
    case CompareOp::kNotIn:
      return !contains(b, a);
    default:
      return order(op, a, b, 0);
  }
}

bool less_than(const Value& a, const Value& b) {
  return order(CompareOp::kLt, a, b, 0);
}

std::string html_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '\'':
        out += "&#39;";
        break;
      case '"':
        out += "&#34;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

Value escape_value(const Value& v) {
  if (v.is_string() && v.is_safe()) return v;
  return Value::string(html_escape(to_str(v)), true);
}

}  // namespace pagoda::jinja
