// jinja2's sandboxed attribute and item access (SandboxedEnvironment.getattr
// / getitem): obj.name tries the Python attribute first, then obj['name'];
// obj[key] tries the item first, then the attribute of a string key. Misses
// give an Undefined naming the object; unsafe attributes an Undefined that
// raises a SecurityError when used.
#include "jinja/interpreter.h"
#include "jinja/methods.h"
#include "jinja/slicing.h"
#include "jinja/unicode.h"

namespace pagoda::jinja {
namespace {

Value missing_attribute(const Value& obj, std::string_view name) {
  return Value::undefined("'" + object_type_repr(obj) + "' has no attribute '" + std::string(name) +
                          "'");
}

Value missing_item(const Value& obj, const Value& key) {
  if (key.is_string()) return missing_attribute(obj, key.str());
  return Value::undefined(object_type_repr(obj) + " has no element " + repr(key));
}

Value unsafe_attribute(const Value& obj, std::string_view name) {
  return Value::undefined("access to attribute '" + std::string(name) + "' of '" + type_name(obj) +
                              "' object is unsafe.",
                          true);
}

bool is_dunder(std::string_view name) {
  return name.size() > 4 && name.substr(0, 2) == "__" && name.substr(name.size() - 2) == "__";
}

// The Python attribute `name` of obj (methods, object attributes); false
// when obj has none, with `out` unset.
bool python_attribute(const Value& obj, std::string_view name, Value& out) {
  if (is_dunder(name)) {
    out = unsafe_attribute(obj, name);
    return true;
  }
  if (obj.is_object()) return obj.obj().get_attr(name, out);
  switch (find_method(obj, name, out)) {
    case MethodLookup::kFound:
      return true;
    case MethodLookup::kUnsafe:
      out = unsafe_attribute(obj, name);
      return true;
    case MethodLookup::kMissing:
      return false;
  }
  return false;
}

// obj[key] when Python's subscript succeeds; false on KeyError/IndexError/TypeError.
bool python_item(const Value& obj, const Value& key, Value& out) {
  switch (obj.type()) {
    case ValueType::kDict: {
      if (key.type() == ValueType::kList || key.type() == ValueType::kDict) return false;
      const Value* v = obj.dict().find(key);
      if (v == nullptr) return false;
      out = *v;
      return true;
    }
    case ValueType::kList:
    case ValueType::kTuple:
    case ValueType::kView: {
      if (obj.type() == ValueType::kView && obj.seq().view != ViewKind::kRange) return false;
      if (!key.is_int()) return false;
      auto i = normalize_index(key.as_int(), obj.items().size());
      if (!i) return false;
      out = obj.items()[*i];
      return true;
    }
    case ValueType::kString: {
      if (!key.is_int()) return false;
      const std::string& s = obj.str();
      if (unicode::is_ascii(s)) {
        auto i = normalize_index(key.as_int(), s.size());
        if (!i) return false;
        out = Value::string(s.substr(*i, 1), obj.is_safe());
        return true;
      }
      std::u32string u = unicode::to_u32(s);
      auto i = normalize_index(key.as_int(), u.size());
      if (!i) return false;
      out = Value::string(unicode::to_utf8(u.substr(*i, 1)), obj.is_safe());
      return true;
    }
    default:
      return false;
  }
}

}  // namespace

Value Interpreter::getattr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) fail_undefined(obj);
  Value out;
  if (python_attribute(obj, name, out)) return out;
  if (python_item(obj, Value::string(std::string(name)), out)) return out;
  return missing_attribute(obj, name);
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) fail_undefined(obj);
  Value out;
  if (python_item(obj, key, out)) return out;
  if (key.is_string() && python_attribute(obj, key.str(), out)) return out;
  return missing_item(obj, key);
}

}  // namespace pagoda::jinja
