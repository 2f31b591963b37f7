#include "jinja/tests.h"

#include <unordered_map>

#include "jinja/call_args.h"
#include "jinja/error.h"
#include "jinja/filters.h"
#include "jinja/methods.h"
#include "jinja/operators.h"

namespace pagoda::jinja {
namespace {

const Value& one_arg(const CallArgs& args, const char* name) {
  expect_no_kwargs(name, args);
  if (args.positional.size() != 1) {
    fail(ErrorKind::kType, std::string(name) + "() takes exactly one argument (" +
                               std::to_string(args.positional.size()) + " given)");
  }
  return args.positional[0];
}

void no_args(const CallArgs& args, const char* name) {
  expect_no_kwargs(name, args);
  if (!args.positional.empty()) fail(ErrorKind::kType, std::string(name) + "() takes no arguments");
}

bool t_defined(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "defined");
  return !v.is_undefined();
}
bool t_undefined(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "undefined");
  return v.is_undefined();
}
bool t_none(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "none");
  return v.is_none();
}
bool t_boolean(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "boolean");
  return v.is_bool();
}
bool t_false(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "false");
  return v.is_bool() && !v.as_bool();
}
bool t_true(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "true");
  return v.is_bool() && v.as_bool();
}
bool t_integer(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "integer");
  return v.type() == ValueType::kInt;
}
bool t_float(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "float");
  return v.is_float();
}
bool t_number(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "number");
  return v.is_number();
}
bool t_string(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "string");
  return v.is_string();
}
bool t_mapping(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "mapping");
  return v.is_dict();
}
bool t_escaped(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "escaped");
  return v.is_string() && v.is_safe();
}

bool t_sequence(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "sequence");
  switch (v.type()) {
    case ValueType::kUndefined:
    case ValueType::kString:
    case ValueType::kList:
    case ValueType::kTuple:
    case ValueType::kDict:
      return true;
    case ValueType::kView:
      return v.seq().view == ViewKind::kRange;
    default:
      return false;
  }
}

bool t_iterable(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "iterable");
  switch (v.type()) {
    case ValueType::kUndefined:
    case ValueType::kString:
    case ValueType::kList:
    case ValueType::kTuple:
    case ValueType::kView:
    case ValueType::kDict:
    case ValueType::kIterator:
      return true;
    case ValueType::kObject:
      return v.obj().type_name() == "LoopContext";
    default:
      return false;
  }
}

bool t_callable(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "callable");
  return v.is_undefined() || (v.is_object() && v.obj().is_callable());
}

bool t_lower(Interpreter& interp, const Value& v, CallArgs& a) {
  no_args(a, "lower");
  Value method;
  find_str_method(Value::string(to_str(v)), "islower", method);
  CallArgs none;
  return method.obj().call(interp, none).as_bool();
}

bool t_upper(Interpreter& interp, const Value& v, CallArgs& a) {
  no_args(a, "upper");
  Value method;
  find_str_method(Value::string(to_str(v)), "isupper", method);
  CallArgs none;
  return method.obj().call(interp, none).as_bool();
}

bool is_zero(const Value& v) {
  return py_equal(v, Value::integer(0));
}

bool t_odd(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "odd");
  return py_equal(binary_op(BinaryOp::kMod, v, Value::integer(2)), Value::integer(1));
}

bool t_even(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "even");
  return is_zero(binary_op(BinaryOp::kMod, v, Value::integer(2)));
}

bool t_divisibleby(Interpreter&, const Value& v, CallArgs& a) {
  BoundArgs b("divisibleby", a, {"num"});
  if (!b.has(0))
    fail(ErrorKind::kType, "test_divisibleby() missing 1 required positional argument: 'num'");
  return is_zero(binary_op(BinaryOp::kMod, v, b.get(0)));
}

// `is sameas`: Python identity. Singletons and small ints are shared in
// CPython; containers and objects compare by pointer.
bool t_sameas(Interpreter&, const Value& v, CallArgs& a) {
  const Value& other = one_arg(a, "sameas");
  if (v.type() != other.type()) return false;
  switch (v.type()) {
    case ValueType::kNone:
      return true;
    case ValueType::kBool:
      return v.as_bool() == other.as_bool();
    case ValueType::kInt:
      return v.as_int() == other.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    case ValueType::kList:
    case ValueType::kTuple:
    case ValueType::kView:
      return &v.seq() == &other.seq();
    case ValueType::kDict:
      return &v.dict() == &other.dict();
    case ValueType::kObject:
      return &v.obj() == &other.obj();
    default:
      return false;
  }
}

bool t_in(Interpreter&, const Value& v, CallArgs& a) {
  return contains(one_arg(a, "in"), v);
}
bool t_eq(Interpreter&, const Value& v, CallArgs& a) {
  return compare(CompareOp::kEq, v, one_arg(a, "eq"));
}
bool t_ne(Interpreter&, const Value& v, CallArgs& a) {
  return compare(CompareOp::kNe, v, one_arg(a, "ne"));
}
bool t_lt(Interpreter&, const Value& v, CallArgs& a) {
  return compare(CompareOp::kLt, v, one_arg(a, "lt"));
}
bool t_le(Interpreter&, const Value& v, CallArgs& a) {
  return compare(CompareOp::kLe, v, one_arg(a, "le"));
}
bool t_gt(Interpreter&, const Value& v, CallArgs& a) {
  return compare(CompareOp::kGt, v, one_arg(a, "gt"));
}
bool t_ge(Interpreter&, const Value& v, CallArgs& a) {
  return compare(CompareOp::kGe, v, one_arg(a, "ge"));
}

bool t_filter(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "filter");
  check_hashable(v);
  return v.is_string() && is_known_filter(v.str());
}

bool t_test(Interpreter&, const Value& v, CallArgs& a) {
  no_args(a, "test");
  check_hashable(v);
  return v.is_string() && is_known_test(v.str());
}

const std::unordered_map<std::string_view, TestFn>& test_table() {
  static const std::unordered_map<std::string_view, TestFn> table = {
      {"defined", t_defined},
      {"undefined", t_undefined},
      {"none", t_none},
      {"boolean", t_boolean},
      {"false", t_false},
      {"true", t_true},
      {"integer", t_integer},
      {"float", t_float},
      {"number", t_number},
      {"string", t_string},
      {"mapping", t_mapping},
      {"escaped", t_escaped},
      {"sequence", t_sequence},
      {"iterable", t_iterable},
      {"callable", t_callable},
      {"lower", t_lower},
      {"upper", t_upper},
      {"odd", t_odd},
      {"even", t_even},
      {"divisibleby", t_divisibleby},
      {"sameas", t_sameas},
      {"in", t_in},
      {"==", t_eq},
      {"eq", t_eq},
      {"equalto", t_eq},
      {"!=", t_ne},
      {"ne", t_ne},
      {"<", t_lt},
      {"lt", t_lt},
      {"lessthan", t_lt},
      {"<=", t_le},
      {"le", t_le},
      {">", t_gt},
      {"gt", t_gt},
      {"greaterthan", t_gt},
      {">=", t_ge},
      {"ge", t_ge},
      {"filter", t_filter},
      {"test", t_test},
  };
  return table;
}

}  // namespace

TestFn find_test(std::string_view name) {
  auto it = test_table().find(name);
  return it == test_table().end() ? nullptr : it->second;
}

bool is_known_test(std::string_view name) {
  return find_test(name) != nullptr;
}

}  // namespace pagoda::jinja
