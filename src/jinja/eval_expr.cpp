// Expression evaluation of the Interpreter.
#include "jinja/error.h"
#include "jinja/filters.h"
#include "jinja/interpreter.h"
#include "jinja/limits.h"
#include "jinja/slicing.h"
#include "jinja/tests.h"

namespace pagoda::jinja {
namespace {

// A literal: what jinja2's optimizer can evaluate at compile time.
bool is_constant(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kConst:
      return true;
    case ExprKind::kList:
    case ExprKind::kTuple:
    case ExprKind::kDict:
      for (const ExprPtr& c : e.children) {
        if (!is_constant(*c)) return false;
      }
      return true;
    default:
      return false;
  }
}

}  // namespace

Value Interpreter::lookup(std::string_view name) {
  for (Frame* f = frame_.get(); f != nullptr; f = f->parent.get()) {
    if (Value* v = f->find_local(name)) return *v;
  }
  auto it = context_.find(std::string(name));
  if (it != context_.end()) return it->second;
  return Value::undefined("'" + std::string(name) + "' is undefined");
}

Value Interpreter::eval(const Expr& e) {
  DepthGuard guard(eval_depth_, kMaxEvalDepth, "statements and expressions");
  pos_ = e.pos;
  switch (e.kind) {
    case ExprKind::kConst:
      return e.constant;
    case ExprKind::kName:
      return lookup(e.name);
    case ExprKind::kList:
    case ExprKind::kTuple:
      return eval_sequence(e);
    case ExprKind::kDict:
      return eval_dict(e);
    case ExprKind::kGetattr: {
      Value obj = eval(*e.children[0]);
      pos_ = e.pos;
      return getattr(obj, e.name);
    }
    case ExprKind::kGetitem:
      return eval_getitem(e);
    case ExprKind::kCall:
      return eval_call(e, nullptr);
    case ExprKind::kFilter:
      return eval_filter(e, nullptr);
    case ExprKind::kTest:
      return eval_test(e);
    case ExprKind::kNot:
      return Value::boolean(!truthy(eval(*e.children[0])));
    case ExprKind::kNeg:
    case ExprKind::kPos: {
      Value v = eval(*e.children[0]);
      pos_ = e.pos;
      return e.kind == ExprKind::kNeg ? negate(v) : unary_plus(v);
    }
    case ExprKind::kBinary:
      return eval_binary(e);
    case ExprKind::kCompare:
      return eval_compare(e);
    case ExprKind::kAnd: {
      Value left = eval(*e.children[0]);
      return truthy(left) ? eval(*e.children[1]) : left;
    }
    case ExprKind::kOr: {
      Value left = eval(*e.children[0]);
      return truthy(left) ? left : eval(*e.children[1]);
    }
    case ExprKind::kConcat:
      return eval_concat(e);
    case ExprKind::kCondExpr:
      if (truthy(eval(*e.children[0]))) return eval(*e.children[1]);
      if (e.children[2]) return eval(*e.children[2]);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.pos.line) +
                              " evaluated to false and no else section was defined.");
    case ExprKind::kSlice:
    case ExprKind::kNamespaceRef:
      break;
  }
  fail(ErrorKind::kSyntax, "invalid expression", e.pos);
}

Value Interpreter::eval_sequence(const Expr& e) {
  ValueList items;
  items.reserve(e.children.size());
  for (const ExprPtr& c : e.children) items.push_back(eval(*c));
  return e.kind == ExprKind::kList ? Value::list(std::move(items)) : Value::tuple(std::move(items));
}

Value Interpreter::eval_binary(const Expr& e) {
  Value a = eval(*e.children[0]);
  Value b = eval(*e.children[1]);
  pos_ = e.pos;
  Value r = binary_op(e.op, a, b);
  if (r.is_string()) count_bytes(r.str().size());
  return r;
}

// a ~ b ~ ...: jinja2 joins the str() of every operand.
Value Interpreter::eval_concat(const Expr& e) {
  std::string out;
  for (const ExprPtr& c : e.children) {
    append_str(out, eval(*c));
    if (out.size() > kMaxStringBytes) {
      fail(ErrorKind::kLimit, "string exceeds " + std::to_string(kMaxStringBytes) + " bytes");
    }
  }
  count_bytes(out.size());
  return Value::string(std::move(out));
}

Value Interpreter::eval_dict(const Expr& e) {
  Dict d;
  for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
    Value key = eval(*e.children[i]);
    Value value = eval(*e.children[i + 1]);
    check_hashable(key);
    d.set(std::move(key), std::move(value));
  }
  return Value::dict(std::move(d));
}

Value Interpreter::eval_getitem(const Expr& e) {
  Value obj = eval(*e.children[0]);
  const Expr& key = *e.children[1];
  if (key.kind != ExprKind::kSlice) {
    Value k = eval(key);
    pos_ = e.pos;
    return getitem(obj, k);
  }
  Value parts[3];
  bool constant = is_constant(*e.children[0]);
  for (int i = 0; i < 3; ++i) {
    parts[i] = key.children[i] ? eval(*key.children[i]) : Value::none();
    constant = constant && (!key.children[i] || is_constant(*key.children[i]));
  }
  pos_ = e.pos;
  try {
    return slice_value(obj, parts[0], parts[1], parts[2]);
  } catch (const JinjaError& err) {
    // jinja2 folds constant expressions at compile time through the
    // sandbox's getitem, which turns a TypeError into an undefined value.
    if (!constant || err.kind() != ErrorKind::kType) throw;
    return Value::undefined(object_type_repr(obj) + " has no element slice");
  }
}

CallArgs Interpreter::eval_args(const CallSpec& spec) {
  CallArgs args;
  args.positional.reserve(spec.args.size());
  for (const ExprPtr& a : spec.args) args.positional.push_back(eval(*a));
  for (const Keyword& k : spec.kwargs) args.keyword.emplace_back(k.name, eval(*k.value));
  if (spec.dyn_args) {
    for (Value& v : iterate(eval(*spec.dyn_args))) args.positional.push_back(std::move(v));
  }
  if (spec.dyn_kwargs) {
    Value d = eval(*spec.dyn_kwargs);
    if (!d.is_dict()) {
      fail(ErrorKind::kType, "argument after ** must be a mapping, not " + type_name(d));
    }
    for (const auto& [k, v] : d.dict().entries) {
      if (!k.is_string()) fail(ErrorKind::kType, "keywords must be strings");
      args.keyword.emplace_back(k.str(), v);
    }
  }
  for (size_t i = 0; i < args.keyword.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (args.keyword[i].first == args.keyword[j].first) {
        fail(ErrorKind::kType,
             "got multiple values for keyword argument '" + args.keyword[i].first + "'");
      }
    }
  }
  return args;
}

Value Interpreter::eval_call(const Expr& e, const Value* caller) {
  Value fn = eval(*e.children[0]);
  CallArgs args = eval_args(e.call);
  if (caller != nullptr) args.keyword.emplace_back("caller", *caller);
  pos_ = e.pos;
  return call(fn, args);
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) fail_undefined(callee);
  if (callee.is_object() && callee.obj().is_callable()) return callee.obj().call(*this, args);
  fail(ErrorKind::kType, "'" + type_name(callee) + "' object is not callable");
}

Value Interpreter::eval_filter(const Expr& e, const Value* input) {
  Value value;
  const Expr* base = e.children[0].get();
  if (base == nullptr) {
    value = *input;
  } else if (base->kind == ExprKind::kFilter && input != nullptr) {
    value = eval_filter(*base, input);
  } else {
    value = eval(*base);
  }
  CallArgs args = eval_args(e.call);
  pos_ = e.pos;
  if (!e.known) fail(ErrorKind::kType, "No filter named '" + e.name + "' found.");
  return apply_filter(e.name, value, args);
}

Value Interpreter::eval_test(const Expr& e) {
  Value value = eval(*e.children[0]);
  CallArgs args = eval_args(e.call);
  pos_ = e.pos;
  if (!e.known) fail(ErrorKind::kType, "No test named '" + e.name + "' found.");
  return Value::boolean(apply_test(e.name, value, args));
}

Value Interpreter::eval_compare(const Expr& e) {
  Value left = eval(*e.children[0]);
  for (size_t i = 0; i < e.compare_ops.size(); ++i) {
    Value right = eval(*e.children[i + 1]);
    pos_ = e.pos;
    if (!compare(e.compare_ops[i], left, right)) return Value::boolean(false);
    left = std::move(right);
  }
  return Value::boolean(true);
}

Value Interpreter::apply_filter(std::string_view name, const Value& value, CallArgs& args) {
  FilterFn fn = find_filter(name);
  if (fn == nullptr) {
    if (is_known_filter(name)) {
      fail(ErrorKind::kUnsupported, "the '" + std::string(name) + "' filter is not supported");
    }
    fail(ErrorKind::kType, "No filter named '" + std::string(name) + "' found.");
  }
  return fn(*this, value, args);
}

bool Interpreter::apply_test(std::string_view name, const Value& value, CallArgs& args) {
  TestFn fn = find_test(name);
  if (fn == nullptr) {
    if (is_known_test(name)) {
      fail(ErrorKind::kUnsupported, "the '" + std::string(name) + "' test is not supported");
    }
    fail(ErrorKind::kType, "No test named '" + std::string(name) + "' found.");
  }
  return fn(*this, value, args);
}

}  // namespace pagoda::jinja
