// Executes a parsed template: frames and scoping as jinja2 compiles them,
// Python semantics for every operation, the immutable sandbox's attribute
// rules, and the resource limits of limits.h. One Interpreter renders once;
// it is not shared between threads (the Program it reads is).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "jinja/ast.h"
#include "jinja/value.h"

namespace pagoda::jinja {

// The variables of one frame (a template, loop iteration, macro call, ...).
// Lookups fall back to the parent frame, then to the render context.
struct Frame {
  explicit Frame(std::shared_ptr<Frame> parent_frame) : parent(std::move(parent_frame)) {}
  Value* find_local(std::string_view name);
  void set(std::string_view name, Value value);

  std::shared_ptr<Frame> parent;
  std::vector<std::pair<std::string, Value>> vars;
};

class Macro;

class Interpreter {
 public:
  // `context`: globals and render variables (render variables last win).
  Interpreter(const Program& program, std::unordered_map<std::string, Value> context);
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Throws JinjaError.
  std::string render();

  // ---- services for builtins (filters, tests, methods, globals) ----
  Value call(const Value& callee, CallArgs& args);
  Value apply_filter(std::string_view name, const Value& value, CallArgs& args);
  bool apply_test(std::string_view name, const Value& value, CallArgs& args);
  // jinja2 sandbox getattr (obj.name) and getitem (obj[key]).
  Value getattr(const Value& obj, std::string_view name);
  Value getitem(const Value& obj, const Value& key);
  // Charges one step (loop iteration, macro call) of the render budget.
  void count_step();
  // Charges bytes of newly built strings against the render budget.
  void count_bytes(size_t n);
  // Namespaces created by the template; emptied after the render so that
  // reference cycles through them are freed.
  void track_namespace(std::shared_ptr<Object> ns) { namespaces_.push_back(std::move(ns)); }
  Value invoke_macro(const Macro& macro, CallArgs& args);
  // Renders a recursive loop's body over `iterable` (loop(...) calls).
  std::string run_recursive_loop(const Stmt& loop, std::shared_ptr<Frame> parent,
                                 const Value& iterable, int depth);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  // Counts one level of nesting against `limit` for its lifetime.
  class DepthGuard {
   public:
    DepthGuard(int& depth, int limit, const char* what);
    ~DepthGuard() { --depth_; }
    DepthGuard(const DepthGuard&) = delete;
    DepthGuard& operator=(const DepthGuard&) = delete;

   private:
    int& depth_;
  };
  class OutputCapture;

  // Statements (interpreter.cpp).
  Flow exec_block(const StmtList& body);
  Flow exec(const Stmt& s);
  Flow run_loop(const Stmt& s, ValueList items, int depth, std::shared_ptr<Frame> parent);
  Flow exec_capture_block(const Stmt& s);
  Flow exec_with(const Stmt& s);
  void assign(const Target& target, const Value& value);
  Value make_macro(const Stmt& s, const std::string& name);
  std::shared_ptr<Frame> push_frame(std::shared_ptr<Frame> parent, const FrameNames& undefined);
  void write(std::string_view text);

  // Expressions (eval_expr.cpp).
  Value eval(const Expr& e);
  Value eval_getitem(const Expr& e);
  Value eval_call(const Expr& e, const Value* caller);
  Value eval_filter(const Expr& e, const Value* input);
  Value eval_test(const Expr& e);
  Value eval_compare(const Expr& e);
  Value eval_dict(const Expr& e);
  Value eval_sequence(const Expr& e);
  Value eval_binary(const Expr& e);
  Value eval_concat(const Expr& e);
  CallArgs eval_args(const CallSpec& spec);
  Value lookup(std::string_view name);

  const Program& program_;
  std::unordered_map<std::string, Value> context_;
  std::shared_ptr<Frame> frame_;       // the current frame
  std::shared_ptr<Frame> root_frame_;  // the template's top-level frame
  std::string* out_ = nullptr;         // where output goes (captures swap it)
  SourcePos pos_;                      // position of the construct being evaluated
  int eval_depth_ = 0;
  int call_depth_ = 0;
  int64_t steps_ = 0;
  uint64_t bytes_built_ = 0;
  std::vector<std::shared_ptr<Object>> namespaces_;
  std::vector<std::shared_ptr<Frame>> captured_frames_;  // frames closed over by macros
};

}  // namespace pagoda::jinja
