// The object values of templates: namespace(), the loop variable, macros,
// and native callables (globals and bound methods).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/ast.h"
#include "jinja/value.h"

namespace pagoda::jinja {

struct Frame;

// jinja2.utils.Namespace as transformers' TemplateNamespace: attributes set
// with {% set ns.attr = value %}; names starting with '_' are refused.
class Namespace : public Object {
 public:
  std::string type_name() const override { return "Namespace"; }
  std::string repr() const override;
  bool get_attr(std::string_view name, Value& out) const override;
  bool set_attr(std::string_view name, const Value& value) override;
  void clear() { attrs_.clear(); }

 private:
  std::vector<std::pair<std::string, Value>> attrs_;
  mutable bool in_repr_ = false;
};

// A callable implemented in C++: a global function or a bound method.
class NativeFunction : public Object {
 public:
  using Fn = std::function<Value(Interpreter&, CallArgs&)>;
  NativeFunction(std::string name, std::string type, Fn fn)
      : name_(std::move(name)), type_(std::move(type)), fn_(std::move(fn)) {}
  std::string type_name() const override { return type_; }
  std::string repr() const override { return "<" + type_ + " " + name_ + ">"; }
  bool is_callable() const override { return true; }
  Value call(Interpreter& interp, CallArgs& args) override { return fn_(interp, args); }

 private:
  std::string name_;
  std::string type_;
  Fn fn_;
};

Value make_native(std::string name, NativeFunction::Fn fn,
                  std::string type = "builtin_function_or_method");

// jinja2.runtime.LoopContext: the `loop` variable of a for loop.
class LoopObject : public Object {
 public:
  LoopObject(ValueList items, int depth, const Stmt* recursive_loop, std::shared_ptr<Frame> parent)
      : items_(std::move(items)),
        depth_(depth),
        recursive_loop_(recursive_loop),
        parent_(std::move(parent)) {}
  std::string type_name() const override { return "LoopContext"; }
  std::string repr() const override;
  bool get_attr(std::string_view name, Value& out) const override;
  bool is_callable() const override { return true; }
  Value call(Interpreter& interp, CallArgs& args) override;

  const ValueList& items() const { return items_; }
  void set_index(size_t i) { index0_ = i; }

 private:
  ValueList items_;
  size_t index0_ = 0;
  int depth_;
  const Stmt* recursive_loop_;  // the for statement when it is `recursive`
  std::shared_ptr<Frame> parent_;
  std::shared_ptr<ValueList> last_changed_ = std::make_shared<ValueList>();
  std::shared_ptr<bool> changed_called_ = std::make_shared<bool>(false);
};

// A {% macro %} or the `caller` of a {% call %} block.
class Macro : public Object {
 public:
  Macro(const Stmt* def, std::string name, std::shared_ptr<Frame> closure)
      : def_(def), name_(std::move(name)), closure_(std::move(closure)) {}
  std::string type_name() const override { return "Macro"; }
  std::string repr() const override { return "<Macro '" + name_ + "'>"; }
  bool get_attr(std::string_view name, Value& out) const override;
  bool is_callable() const override { return true; }
  Value call(Interpreter& interp, CallArgs& args) override;

  const Stmt& def() const { return *def_; }
  const std::string& name() const { return name_; }
  const std::shared_ptr<Frame>& closure() const { return closure_; }

 private:
  const Stmt* def_;
  std::string name_;
  std::shared_ptr<Frame> closure_;
};

}  // namespace pagoda::jinja
