// Methods of dict, list, tuple, dict views and range, and the method lookup
// that the sandboxed getattr uses.
#include <array>

#include "jinja/call_args.h"
#include "jinja/error.h"
#include "jinja/methods.h"
#include "jinja/objects.h"
#include "jinja/slicing.h"

namespace pagoda::jinja {
namespace {

// ImmutableSandboxedEnvironment: methods that modify a list or dict.
constexpr std::array<std::string_view, 8> kUnsafeListMethods = {
    "append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort"};
constexpr std::array<std::string_view, 5> kUnsafeDictMethods = {"clear", "pop", "popitem",
                                                                "setdefault", "update"};

template <size_t N>
bool contains_name(const std::array<std::string_view, N>& names, std::string_view name) {
  for (std::string_view n : names) {
    if (n == name) return true;
  }
  return false;
}

Value bound_method(std::string_view name, std::function<Value(CallArgs&)> fn) {
  return make_native(std::string(name),
                     [fn = std::move(fn)](Interpreter&, CallArgs& args) { return fn(args); });
}

void arity(const CallArgs& args, const std::string& func, size_t lo, size_t hi) {
  expect_no_kwargs(func, args);
  if (args.positional.size() < lo || args.positional.size() > hi) {
    fail(ErrorKind::kType, func + "() takes " + std::to_string(lo) +
                               (lo == hi ? "" : " to " + std::to_string(hi)) + " argument(s) (" +
                               std::to_string(args.positional.size()) + " given)");
  }
}

Value dict_view(const Dict& d, ViewKind kind) {
  Sequence seq;
  seq.view = kind;
  for (const auto& [k, v] : d.entries) {
    if (kind == ViewKind::kDictKeys)
      seq.items.push_back(k);
    else if (kind == ViewKind::kDictValues)
      seq.items.push_back(v);
    else
      seq.items.push_back(Value::tuple({k, v}));
  }
  return Value::view(std::move(seq));
}

bool find_dict_method(const Value& self, std::string_view name, Value& out) {
  if (name == "keys" || name == "values" || name == "items") {
    ViewKind kind = name == "keys"     ? ViewKind::kDictKeys
                    : name == "values" ? ViewKind::kDictValues
                                       : ViewKind::kDictItems;
    out = bound_method(name, [self, kind, n = std::string(name)](CallArgs& args) {
      arity(args, n, 0, 0);
      return dict_view(self.dict(), kind);
    });
    return true;
  }
  if (name == "get") {
    out = bound_method(name, [self](CallArgs& args) {
      arity(args, "get", 1, 2);
      check_hashable(args.positional[0]);
      const Value* v = self.dict().find(args.positional[0]);
      if (v != nullptr) return *v;
      return args.positional.size() > 1 ? args.positional[1] : Value::none();
    });
    return true;
  }
  if (name == "copy") {
    out = bound_method(name, [self](CallArgs& args) {
      arity(args, "copy", 0, 0);
      return Value::dict(self.dict());
    });
    return true;
  }
  return false;
}

Value seq_index(const Value& self, CallArgs& args, const char* type) {
  arity(args, "index", 1, 3);
  const ValueList& items = self.items();
  size_t lo, hi;
  clamp_bounds(args.positional.size() > 1 ? &args.positional[1] : nullptr,
               args.positional.size() > 2 ? &args.positional[2] : nullptr, items.size(), lo, hi);
  for (size_t i = lo; i < hi && i < items.size(); ++i) {
    if (py_equal(items[i], args.positional[0])) return Value::integer(static_cast<int64_t>(i));
  }
  fail(ErrorKind::kType, std::string(type) + ".index(x): x not in " + type);
}

bool find_sequence_method(const Value& self, std::string_view name, Value& out) {
  const char* type = self.type() == ValueType::kTuple  ? "tuple"
                     : self.type() == ValueType::kList ? "list"
                                                       : "range";
  if (name == "index") {
    out = bound_method(name, [self, type](CallArgs& args) { return seq_index(self, args, type); });
    return true;
  }
  if (name == "count") {
    out = bound_method(name, [self](CallArgs& args) {
      arity(args, "count", 1, 1);
      int64_t n = 0;
      for (const Value& v : self.items()) n += py_equal(v, args.positional[0]) ? 1 : 0;
      return Value::integer(n);
    });
    return true;
  }
  if (name == "copy" && self.type() == ValueType::kList) {
    out = bound_method(name, [self](CallArgs& args) {
      arity(args, "copy", 0, 0);
      return Value::list(self.items());
    });
    return true;
  }
  return false;
}

}  // namespace

MethodLookup find_method(const Value& obj, std::string_view name, Value& out) {
  switch (obj.type()) {
    case ValueType::kString:
      return find_str_method(obj, name, out) ? MethodLookup::kFound : MethodLookup::kMissing;
    case ValueType::kDict:
      if (contains_name(kUnsafeDictMethods, name)) return MethodLookup::kUnsafe;
      return find_dict_method(obj, name, out) ? MethodLookup::kFound : MethodLookup::kMissing;
    case ValueType::kList:
      if (contains_name(kUnsafeListMethods, name)) return MethodLookup::kUnsafe;
      return find_sequence_method(obj, name, out) ? MethodLookup::kFound : MethodLookup::kMissing;
    case ValueType::kTuple:
      if (obj.seq().is_group && (name == "grouper" || name == "list")) {
        out = obj.items()[name == "grouper" ? 0 : 1];
        return MethodLookup::kFound;
      }
      return find_sequence_method(obj, name, out) ? MethodLookup::kFound : MethodLookup::kMissing;
    case ValueType::kView: {
      const Sequence& s = obj.seq();
      if (s.view == ViewKind::kRange) {
        if (name == "start" || name == "stop" || name == "step") {
          out = Value::integer(name == "start"  ? s.range_start
                               : name == "stop" ? s.range_stop
                                                : s.range_step);
          return MethodLookup::kFound;
        }
        return find_sequence_method(obj, name, out) ? MethodLookup::kFound : MethodLookup::kMissing;
      }
      return MethodLookup::kMissing;
    }
    default:
      return MethodLookup::kMissing;
  }
}

}  // namespace pagoda::jinja
