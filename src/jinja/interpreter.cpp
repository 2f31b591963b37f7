// Statement execution, frames and macro calls of the Interpreter.
#include "jinja/interpreter.h"

#include "jinja/error.h"
#include "jinja/limits.h"
#include "jinja/objects.h"

namespace pagoda::jinja {

Value* Frame::find_local(std::string_view name) {
  for (auto& [k, v] : vars) {
    if (k == name) return &v;
  }
  return nullptr;
}

void Frame::set(std::string_view name, Value value) {
  if (Value* v = find_local(name)) {
    *v = std::move(value);
    return;
  }
  vars.emplace_back(std::string(name), std::move(value));
}

Interpreter::DepthGuard::DepthGuard(int& depth, int limit, const char* what) : depth_(depth) {
  if (++depth_ > limit) {
    --depth_;
    fail(ErrorKind::kLimit, std::string(what) + " nested deeper than " + std::to_string(limit));
  }
}

// Redirects the interpreter's output into a local buffer for its lifetime.
class Interpreter::OutputCapture {
 public:
  explicit OutputCapture(Interpreter& in) : in_(in), saved_(in.out_) { in_.out_ = &buffer_; }
  ~OutputCapture() { in_.out_ = saved_; }
  std::string take() { return std::move(buffer_); }

 private:
  Interpreter& in_;
  std::string* saved_;
  std::string buffer_;
};

namespace {

// Restores the interpreter's current frame when a scope ends (also on throw).
class FrameSwap {
 public:
  FrameSwap(std::shared_ptr<Frame>& slot, std::shared_ptr<Frame> next)
      : slot_(slot), saved_(std::move(slot)) {
    slot_ = std::move(next);
  }
  ~FrameSwap() { slot_ = std::move(saved_); }

 private:
  std::shared_ptr<Frame>& slot_;
  std::shared_ptr<Frame> saved_;
};

}  // namespace

Interpreter::Interpreter(const Program& program, std::unordered_map<std::string, Value> context)
    : program_(program), context_(std::move(context)) {}

Interpreter::~Interpreter() {
  // Break the reference cycles a render may leave: frames ↔ macros and
  // namespaces that contain themselves.
  for (auto& ns : namespaces_) static_cast<Namespace*>(ns.get())->clear();
  for (auto& f : captured_frames_) f->vars.clear();
  if (root_frame_) root_frame_->vars.clear();
}

std::string Interpreter::render() {
  std::string out;
  out_ = &out;
  root_frame_ = push_frame(nullptr, program_.frame);
  frame_ = root_frame_;
  try {
    exec_block(program_.body);
  } catch (JinjaError& e) {
    e.set_pos_if_unknown(pos_);
    throw;
  }
  out_ = nullptr;
  return out;
}

std::shared_ptr<Frame> Interpreter::push_frame(std::shared_ptr<Frame> parent,
                                               const FrameNames& undefined) {
  auto f = std::make_shared<Frame>(std::move(parent));
  for (const std::string& name : undefined) {
    f->vars.emplace_back(name, Value::undefined("'" + name + "' is undefined"));
  }
  return f;
}

void Interpreter::write(std::string_view text) {
  if (out_->size() + text.size() > kMaxOutputBytes) {
    fail(ErrorKind::kLimit, "output exceeds " + std::to_string(kMaxOutputBytes) + " bytes", pos_);
  }
  out_->append(text);
}

void Interpreter::count_step() {
  if (++steps_ > kMaxLoopSteps) {
    fail(ErrorKind::kLimit,
         "more than " + std::to_string(kMaxLoopSteps) + " loop iterations and macro calls", pos_);
  }
}

void Interpreter::count_bytes(size_t n) {
  bytes_built_ += n;
  if (bytes_built_ > kMaxBytesBuilt) {
    fail(ErrorKind::kLimit,
         "template built more than " + std::to_string(kMaxBytesBuilt) + " bytes of strings", pos_);
  }
}

Interpreter::Flow Interpreter::exec_block(const StmtList& body) {
  for (const StmtPtr& s : body) {
    Flow f = exec(*s);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s) {
  DepthGuard guard(eval_depth_, kMaxEvalDepth, "statements and expressions");
  pos_ = s.pos;
  switch (s.kind) {
    case StmtKind::kText:
      write(s.text);
      return Flow::kNormal;
    case StmtKind::kPrint: {
      Value v = eval(*s.expr);
      write(v.is_string() ? v.str() : to_str(v));
      return Flow::kNormal;
    }
    case StmtKind::kIf:
      for (const IfBranch& b : s.branches) {
        if (truthy(eval(*b.test))) return exec_block(b.body);
      }
      return exec_block(s.else_body);
    case StmtKind::kFor: {
      Value iterable = eval(*s.expr);
      ValueList items = iterate(iterable);
      return run_loop(s, std::move(items), 1, frame_);
    }
    case StmtKind::kSet:
      assign(s.target, eval(*s.expr));
      return Flow::kNormal;
    case StmtKind::kSetBlock:
    case StmtKind::kFilterBlock:
      return exec_capture_block(s);
    case StmtKind::kMacro:
      frame_->set(s.name, make_macro(s, s.name));
      return Flow::kNormal;
    case StmtKind::kCallBlock: {
      Value caller = make_macro(s, "caller");
      write(to_str(eval_call(*s.expr, &caller)));
      return Flow::kNormal;
    }
    case StmtKind::kWith:
      return exec_with(s);
    case StmtKind::kBlock:
    case StmtKind::kScope: {
      std::shared_ptr<Frame> parent =
          s.kind == StmtKind::kBlock && !s.scoped ? root_frame_ : frame_;
      FrameSwap swap(frame_, push_frame(std::move(parent), s.frame));
      exec_block(s.body);  // break / continue cannot cross these (scope analysis)
      return Flow::kNormal;
    }
    case StmtKind::kBreak:
      return Flow::kBreak;
    case StmtKind::kContinue:
      return Flow::kContinue;
    case StmtKind::kUnsupported:
      fail(s.body.empty() && s.text.rfind("no loader", 0) == 0 ? ErrorKind::kType
                                                               : ErrorKind::kUnsupported,
           s.text, s.pos);
  }
  return Flow::kNormal;
}

// A macro closes over the current frame; that frame is remembered so that
// the frame ↔ macro reference cycle is broken after the render.
Value Interpreter::make_macro(const Stmt& s, const std::string& name) {
  if (captured_frames_.empty() || captured_frames_.back() != frame_) {
    captured_frames_.push_back(frame_);
  }
  return Value::object(std::make_shared<Macro>(&s, name, frame_));
}

Interpreter::Flow Interpreter::run_loop(const Stmt& s, ValueList items, int depth,
                                        std::shared_ptr<Frame> parent) {
  if (s.filter) {
    ValueList kept;
    for (Value& item : items) {
      count_step();
      FrameSwap swap(frame_, push_frame(parent, {}));
      assign(s.target, item);
      if (truthy(eval(*s.filter))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  const size_t n = items.size();
  auto loop =
      std::make_shared<LoopObject>(std::move(items), depth, s.recursive ? &s : nullptr, parent);
  const Value loop_value = Value::object(loop);
  for (size_t i = 0; i < n; ++i) {
    count_step();
    FrameSwap swap(frame_, push_frame(parent, s.frame));
    frame_->set("loop", loop_value);
    loop->set_index(i);
    assign(s.target, loop->items()[i]);
    if (exec_block(s.body) == Flow::kBreak) break;
  }
  if (n == 0 && !s.else_body.empty()) {
    FrameSwap swap(frame_, push_frame(parent, s.else_frame));
    return exec_block(s.else_body);
  }
  return Flow::kNormal;
}

std::string Interpreter::run_recursive_loop(const Stmt& loop, std::shared_ptr<Frame> parent,
                                            const Value& iterable, int depth) {
  DepthGuard guard(call_depth_, kMaxCallDepth, "macro calls and recursive loops");
  OutputCapture capture(*this);
  run_loop(loop, iterate(iterable), depth, std::move(parent));
  return capture.take();
}

// {% set x %}...{% endset %} and {% filter f %}...{% endfilter %}: the body
// renders in a new frame into a buffer; break/continue leave it unfinished.
Interpreter::Flow Interpreter::exec_capture_block(const Stmt& s) {
  std::string text;
  Value result;
  {
    FrameSwap swap(frame_, push_frame(frame_, s.frame));
    Flow flow;
    {
      OutputCapture capture(*this);
      flow = exec_block(s.body);
      text = capture.take();
    }
    if (flow != Flow::kNormal) return flow;
    result = Value::string(std::move(text));
    if (s.filter) result = eval_filter(*s.filter, &result);
  }
  pos_ = s.pos;
  if (s.kind == StmtKind::kSetBlock) {
    assign(s.target, result);
  } else {
    write(to_str(result));
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec_with(const Stmt& s) {
  ValueList values;
  for (const ExprPtr& v : s.with_values) values.push_back(eval(*v));
  FrameSwap swap(frame_, push_frame(frame_, s.frame));
  for (size_t i = 0; i < values.size(); ++i) assign(s.with_targets[i], values[i]);
  return exec_block(s.body);
}

void Interpreter::assign(const Target& target, const Value& value) {
  switch (target.kind) {
    case Target::Kind::kName:
      frame_->set(target.name, value);
      return;
    case Target::Kind::kNamespaceAttr: {
      Value ns = lookup(target.name);
      if (!ns.is_object() || !ns.obj().set_attr(target.attr, value)) {
        fail(ErrorKind::kType, "cannot assign attribute on non-namespace object", target.pos);
      }
      return;
    }
    case Target::Kind::kTuple: {
      ValueList items = iterate(value);
      if (items.size() < target.items.size()) {
        fail(ErrorKind::kType,
             "not enough values to unpack (expected " + std::to_string(target.items.size()) +
                 ", got " + std::to_string(items.size()) + ")",
             target.pos);
      }
      if (items.size() > target.items.size()) {
        fail(ErrorKind::kType,
             "too many values to unpack (expected " + std::to_string(target.items.size()) + ")",
             target.pos);
      }
      for (size_t i = 0; i < items.size(); ++i) assign(target.items[i], items[i]);
      return;
    }
  }
}

namespace {

// A macro call's arguments bound like jinja2's Macro.__call__.
struct MacroArgs {
  std::vector<Value> values;  // one per parameter
  std::vector<bool> given;
  bool found_caller = false;  // `caller` is a declared parameter that was bound
  Value caller = Value::undefined("No caller defined");
  Dict kwargs;
  ValueList varargs;
};

MacroArgs bind_macro_args(const Macro& macro, CallArgs& args) {
  const Signature& sig = macro.def().signature;
  const size_t n = sig.params.size();
  std::vector<std::pair<std::string, Value>> kwargs = std::move(args.keyword);
  auto take_kwarg = [&kwargs](std::string_view name, Value& out) {
    for (auto it = kwargs.begin(); it != kwargs.end(); ++it) {
      if (it->first == name) {
        out = std::move(it->second);
        kwargs.erase(it);
        return true;
      }
    }
    return false;
  };
  MacroArgs out;
  out.values.resize(n);
  out.given.assign(n, false);
  for (size_t i = 0; i < std::min(n, args.positional.size()); ++i) {
    out.values[i] = args.positional[i];
    out.given[i] = true;
  }
  for (size_t i = args.positional.size(); i < n; ++i) {
    out.given[i] = take_kwarg(sig.params[i], out.values[i]);
  }
  for (size_t i = args.positional.size() < n ? args.positional.size() : 0; i < n; ++i) {
    out.found_caller |= sig.params[i] == "caller";
  }
  if (sig.uses_caller && !out.found_caller) take_kwarg("caller", out.caller);
  if (sig.catch_kwargs) {
    for (auto& [k, v] : kwargs) out.kwargs.set(Value::string(k), std::move(v));
  } else if (!kwargs.empty()) {
    fail(ErrorKind::kType, kwargs.front().first == "caller"
                               ? "macro '" + macro.name() +
                                     "' was invoked with two values for the special caller "
                                     "argument. This is most likely a bug."
                               : "macro '" + macro.name() + "' takes no keyword argument '" +
                                     kwargs.front().first + "'");
  }
  if (args.positional.size() > n) {
    if (!sig.catch_varargs) {
      fail(ErrorKind::kType, "macro '" + macro.name() + "' takes not more than " +
                                 std::to_string(n) + " argument(s)");
    }
    out.varargs.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(n),
                       args.positional.end());
  }
  return out;
}

}  // namespace

Value Interpreter::invoke_macro(const Macro& macro, CallArgs& args) {
  count_step();
  DepthGuard guard(call_depth_, kMaxCallDepth, "macro calls and recursive loops");
  const Stmt& def = macro.def();
  const Signature& sig = def.signature;
  MacroArgs bound = bind_macro_args(macro, args);
  FrameSwap swap(frame_, push_frame(macro.closure(), def.frame));
  if (sig.uses_caller && !bound.found_caller) frame_->set("caller", bound.caller);
  if (sig.catch_kwargs) frame_->set("kwargs", Value::dict(std::move(bound.kwargs)));
  if (sig.catch_varargs) frame_->set("varargs", Value::tuple(std::move(bound.varargs)));
  const size_t n = sig.params.size();
  for (size_t i = 0; i < n; ++i) {
    frame_->set(sig.params[i], bound.given[i] ? bound.values[i]
                                              : Value::undefined("parameter '" + sig.params[i] +
                                                                 "' was not provided"));
  }
  // Missing arguments take their defaults, evaluated in the macro's frame in order.
  const size_t first_default = n - sig.defaults.size();
  for (size_t i = first_default; i < n; ++i) {
    if (!bound.given[i]) frame_->set(sig.params[i], eval(*sig.defaults[i - first_default]));
  }
  OutputCapture capture(*this);
  exec_block(def.body);
  return Value::string(capture.take());
}

}  // namespace pagoda::jinja
