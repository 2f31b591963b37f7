// The runtime values of templates, modelled on the Python objects that
// jinja2 manipulates: None, bool, int (64-bit here), float, str (UTF-8,
// indexed by code point), list, tuple, dict (insertion ordered), dict views
// and range, one-shot iterators (what select/map/reverse return), jinja's
// Undefined, and objects (namespace, loop, macros, callables).
//
// Containers are immutable once built (the sandbox forbids mutation) and
// shared by pointer, so copying a Value is cheap. Namespaces and iterators
// are the mutable exceptions, shared by reference as in Python.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace pagoda::jinja {

class Value;
class Interpreter;
using ValueList = std::vector<Value>;

enum class ValueType : uint8_t {
  kUndefined,
  kNone,
  kBool,
  kInt,
  kFloat,
  kString,
  kList,
  kTuple,
  kView,  // dict_keys / dict_values / dict_items / range: sized, iterable
  kDict,
  kIterator,  // one-shot: no len(), always true
  kObject,
};

enum class ViewKind : uint8_t { kDictKeys, kDictValues, kDictItems, kRange };

struct Sequence {  // the items of a list, tuple or view
  ValueList items;
  ViewKind view = ViewKind::kRange;                         // kView only
  int64_t range_start = 0, range_stop = 0, range_step = 1;  // ViewKind::kRange only
  int depth = 0;          // container nesting, set by the Value factories
  bool is_group = false;  // a groupby result: a (grouper, list) tuple with those attributes
};

struct Dict;
struct IteratorState;
struct UndefinedInfo;
class Object;

class Value {
 public:
  Value();  // an anonymous undefined
  static Value undefined(std::string message, bool security = false);
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value floating(double d);
  static Value string(std::string s, bool safe = false);
  static Value list(ValueList items);
  static Value tuple(ValueList items);
  static Value group(Value grouper, Value list);  // jinja2's _GroupTuple
  static Value view(Sequence seq);
  static Value dict(Dict d);
  static Value iterator(ValueList items, std::string type_name);
  static Value object(std::shared_ptr<Object> obj);

  ValueType type() const { return type_; }
  bool is_undefined() const { return type_ == ValueType::kUndefined; }
  bool is_none() const { return type_ == ValueType::kNone; }
  bool is_string() const { return type_ == ValueType::kString; }
  bool is_bool() const { return type_ == ValueType::kBool; }
  // int or bool (bool is an int subtype in Python)
  bool is_int() const { return type_ == ValueType::kInt || type_ == ValueType::kBool; }
  bool is_number() const { return is_int() || type_ == ValueType::kFloat; }
  bool is_float() const { return type_ == ValueType::kFloat; }
  bool is_sequence_like() const {  // list, tuple or view
    return type_ == ValueType::kList || type_ == ValueType::kTuple || type_ == ValueType::kView;
  }
  bool is_dict() const { return type_ == ValueType::kDict; }
  bool is_object() const { return type_ == ValueType::kObject; }

  bool as_bool() const { return std::get<bool>(data_); }
  int64_t as_int() const;   // int or bool
  double as_float() const;  // any number
  const std::string& str() const { return std::get<std::string>(data_); }
  bool is_safe() const { return safe_; }  // a jinja Markup string
  const Sequence& seq() const { return *std::get<std::shared_ptr<const Sequence>>(data_); }
  const ValueList& items() const { return seq().items; }
  const Dict& dict() const { return *std::get<std::shared_ptr<const Dict>>(data_); }
  IteratorState& iter_state() const { return *std::get<std::shared_ptr<IteratorState>>(data_); }
  Object& obj() const { return *std::get<std::shared_ptr<Object>>(data_); }
  const UndefinedInfo& undefined_info() const;

 private:
  using Data = std::variant<std::monostate, bool, int64_t, double, std::string,
                            std::shared_ptr<const Sequence>, std::shared_ptr<const Dict>,
                            std::shared_ptr<IteratorState>, std::shared_ptr<Object>,
                            std::shared_ptr<const UndefinedInfo>>;
  Value(ValueType type, Data data) : type_(type), data_(std::move(data)) {}

  ValueType type_;
  bool safe_ = false;
  Data data_;
};

struct Dict {
  std::vector<std::pair<Value, Value>> entries;  // insertion order, keys unique under Python ==
  int depth = 0;                                 // container nesting, set by Value::dict

  const Value* find(const Value& key) const;  // nullptr when absent
  const Value* find(std::string_view key) const;
  // Inserts, or replaces the value of an equal key in place (Python dict semantics).
  void set(Value key, Value value);
};

struct IteratorState {
  ValueList items;
  size_t pos = 0;
  std::string type_name;  // Python type: "generator", "list_reverseiterator", ...
  int depth = 0;          // container nesting, set by Value::iterator
};

struct UndefinedInfo {
  std::string message;    // what an operation on it reports
  bool security = false;  // an unsafe attribute: operations raise a SecurityError
};

struct CallArgs {
  ValueList positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

// Namespaces, loops, macros and callables.
class Object {
 public:
  virtual ~Object() = default;
  virtual std::string type_name() const = 0;  // Python type name
  virtual std::string repr() const;           // "<type_name object>" unless overridden
  // Sets `out` and returns true when the attribute exists.
  virtual bool get_attr(std::string_view name, Value& out) const;
  // Namespaces accept attribute assignment; others return false.
  virtual bool set_attr(std::string_view name, const Value& value);
  virtual bool is_callable() const { return false; }
  virtual Value call(Interpreter& interp, CallArgs& args);
};

// Python semantics of the values.
bool truthy(const Value& v);
bool py_equal(const Value& a, const Value& b);
std::string type_name(const Value& v);         // Python type(v).__name__
std::string object_type_repr(const Value& v);  // jinja2.utils.object_type_repr
std::string to_str(const Value& v);            // Python str(v)
std::string repr(const Value& v);              // Python repr(v)
void append_str(std::string& out, const Value& v);
void append_repr(std::string& out, const Value& v);
std::string repr_string(std::string_view s);  // Python repr of a str
std::string float_repr(double d);             // Python repr of a float

// Throws a TypeError-kind JinjaError unless v can be a dict key / set member.
void check_hashable(const Value& v);
// Python len(); throws for values without one.
int64_t py_len(const Value& v);
// The items Python's iter(v) yields (consumes an iterator). Throws for
// values that are not iterable; undefined yields nothing.
ValueList iterate(const Value& v);
// Throws the UndefinedError (or SecurityError) that using `v` raises.
[[noreturn]] void fail_undefined(const Value& v);

}  // namespace pagoda::jinja
