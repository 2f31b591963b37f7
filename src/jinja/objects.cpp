#include "jinja/objects.h"

#include "jinja/error.h"
#include "jinja/interpreter.h"

namespace pagoda::jinja {

std::string Namespace::repr() const {
  if (in_repr_) return "<Namespace {...}>";
  in_repr_ = true;
  std::string out = "<Namespace {";
  try {
    for (size_t i = 0; i < attrs_.size(); ++i) {
      if (i) out += ", ";
      out += repr_string(attrs_[i].first) + ": ";
      append_repr(out, attrs_[i].second);
    }
  } catch (...) {
    in_repr_ = false;
    throw;
  }
  in_repr_ = false;
  return out + "}>";
}

bool Namespace::get_attr(std::string_view name, Value& out) const {
  for (const auto& [k, v] : attrs_) {
    if (k == name) {
      out = v;
      return true;
    }
  }
  return false;
}

bool Namespace::set_attr(std::string_view name, const Value& value) {
  if (!name.empty() && name[0] == '_') {
    fail(ErrorKind::kSecurity,
         "Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
             std::string(name) + "'. Please rename the attribute.");
  }
  for (auto& [k, v] : attrs_) {
    if (k == name) {
      v = value;
      return true;
    }
  }
  attrs_.emplace_back(std::string(name), value);
  return true;
}

Value make_native(std::string name, NativeFunction::Fn fn, std::string type) {
  return Value::object(
      std::make_shared<NativeFunction>(std::move(name), std::move(type), std::move(fn)));
}

std::string LoopObject::repr() const {
  return "<LoopContext " + std::to_string(index0_ + 1) + "/" + std::to_string(items_.size()) + ">";
}

bool LoopObject::get_attr(std::string_view name, Value& out) const {
  const int64_t n = static_cast<int64_t>(items_.size());
  const int64_t i = static_cast<int64_t>(index0_);
  if (name == "index0")
    out = Value::integer(i);
  else if (name == "index")
    out = Value::integer(i + 1);
  else if (name == "revindex")
    out = Value::integer(n - i);
  else if (name == "revindex0")
    out = Value::integer(n - i - 1);
  else if (name == "first")
    out = Value::boolean(i == 0);
  else if (name == "last")
    out = Value::boolean(i + 1 == n);
  else if (name == "length")
    out = Value::integer(n);
  else if (name == "depth")
    out = Value::integer(depth_);
  else if (name == "depth0")
    out = Value::integer(depth_ - 1);
  else if (name == "previtem") {
    out = i == 0 ? Value::undefined("there is no previous item") : items_[index0_ - 1];
  } else if (name == "nextitem") {
    out = i + 1 >= n ? Value::undefined("there is no next item") : items_[index0_ + 1];
  } else if (name == "cycle") {
    int64_t index = i;
    out = make_native(
        "cycle",
        [index](Interpreter&, CallArgs& args) {
          if (!args.keyword.empty())
            fail(ErrorKind::kType, "cycle() got an unexpected keyword argument");
          if (args.positional.empty()) fail(ErrorKind::kType, "no items for cycling given");
          return args.positional[static_cast<size_t>(index) % args.positional.size()];
        },
        "method");
  } else if (name == "changed") {
    auto last = last_changed_;
    auto called = changed_called_;
    out = make_native(
        "changed",
        [last, called](Interpreter&, CallArgs& args) {
          ValueList now = args.positional;
          bool differs = !*called || !py_equal(Value::tuple(now), Value::tuple(*last));
          *called = true;
          if (differs) *last = std::move(now);
          return Value::boolean(differs);
        },
        "method");
  } else {
    return false;
  }
  return true;
}

Value LoopObject::call(Interpreter& interp, CallArgs& args) {
  if (recursive_loop_ == nullptr) {
    fail(ErrorKind::kType,
         "Tried to call non recursive loop.  Maybe you forgot the 'recursive' modifier.");
  }
  if (args.positional.size() != 1 || !args.keyword.empty()) {
    fail(ErrorKind::kType, "loop() takes exactly one argument");
  }
  return Value::string(
      interp.run_recursive_loop(*recursive_loop_, parent_, args.positional[0], depth_ + 1));
}

bool Macro::get_attr(std::string_view name, Value& out) const {
  if (name == "name") {
    out = Value::string(name_);
    return true;
  }
  if (name == "arguments") {
    ValueList params;
    for (const std::string& p : def_->signature.params) params.push_back(Value::string(p));
    out = Value::tuple(std::move(params));
    return true;
  }
  if (name == "catch_kwargs" || name == "catch_varargs" || name == "caller") {
    const Signature& sig = def_->signature;
    out = Value::boolean(name == "catch_kwargs"    ? sig.catch_kwargs
                         : name == "catch_varargs" ? sig.catch_varargs
                                                   : sig.uses_caller);
    return true;
  }
  return false;
}

Value Macro::call(Interpreter& interp, CallArgs& args) {
  return interp.invoke_macro(*this, args);
}

}  // namespace pagoda::jinja
