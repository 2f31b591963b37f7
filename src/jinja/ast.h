// The syntax tree of a template (what jinja2.nodes describes), produced by
// the parser and annotated by the scope analysis. Immutable once built, so
// one tree serves concurrent renders.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "jinja/error.h"
#include "jinja/operators.h"
#include "jinja/value.h"

namespace pagoda::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using StmtList = std::vector<StmtPtr>;

enum class ExprKind {
  kConst,         // constant
  kName,          // name
  kList,          // children: items
  kTuple,         // children: items
  kDict,          // children: key0, value0, key1, value1, ...
  kGetattr,       // children: [object]; name: attribute
  kGetitem,       // children: [object, key]
  kSlice,         // children: [start, stop, step], each may be null; only as a kGetitem key
  kCall,          // children: [callee]; call: arguments
  kFilter,        // children: [value] (null inside {% filter %} / {% set %} blocks); name; call
  kTest,          // children: [value]; name; call
  kNot,           // children: [operand]
  kNeg,           // children: [operand]
  kPos,           // children: [operand]
  kBinary,        // children: [left, right]; op
  kCompare,       // children: [first, operand1, ...]; compare_ops: one per operand
  kAnd,           // children: [left, right]
  kOr,            // children: [left, right]
  kConcat,        // children: operands of ~
  kCondExpr,      // children: [test, then, else (may be null)]
  kNamespaceRef,  // name.attr as an assignment target only; name, children[0]: kName
};

struct Keyword {
  std::string name;
  ExprPtr value;
};

// Arguments of a call, filter or test: f(a, b, k=v, *args, **kwargs).
struct CallSpec {
  std::vector<ExprPtr> args;
  std::vector<Keyword> kwargs;
  ExprPtr dyn_args;    // may be null
  ExprPtr dyn_kwargs;  // may be null
};

struct Expr {
  ExprKind kind = ExprKind::kConst;
  SourcePos pos;
  Value constant;  // kConst
  std::string name;
  BinaryOp op = BinaryOp::kAdd;
  std::vector<CompareOp> compare_ops;
  std::vector<ExprPtr> children;
  CallSpec call;
  // kFilter / kTest: false when jinja2 would only fail at run time for an
  // unknown name (inside an if or an inline if); set by the scope analysis.
  bool known = true;
  int depth = 1;  // height of this subtree; the parser bounds it (limits.h)
};

// An assignment target: a name, a namespace attribute (ns.attr) or a tuple.
struct Target {
  enum class Kind { kName, kNamespaceAttr, kTuple };
  Kind kind = Kind::kName;
  std::string name;           // kName / kNamespaceAttr: the variable
  std::string attr;           // kNamespaceAttr
  std::vector<Target> items;  // kTuple
  SourcePos pos;
};

// A macro's or call block's parameters; defaults belong to the last params.
struct Signature {
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;
  bool catch_varargs = false;  // the body reads `varargs`
  bool catch_kwargs = false;   // the body reads `kwargs`
  bool uses_caller = false;    // the body reads `caller`
};

// Names a new frame starts with as undefined: jinja2 shadows them in that
// frame even where an outer scope or the context defines them.
using FrameNames = std::vector<std::string>;

enum class StmtKind {
  kText,         // text
  kPrint,        // expr
  kIf,           // branches (test, body); else_body
  kFor,          // target, expr: iterable, filter: loop `if` test (may be null), body,
                 // else_body, recursive; frame: body, else_frame: else
  kSet,          // target = expr
  kSetBlock,     // target, filter (may be null), body; frame
  kMacro,        // name, signature, body; frame
  kCallBlock,    // expr: the call, signature (of `caller`), body; frame
  kFilterBlock,  // filter, body; frame
  kWith,         // with_targets = with_values, body; frame
  kBlock,        // name, scoped, body; frame
  kScope,        // body in a new frame: {% generation %}; frame
  kBreak,
  kContinue,
  kUnsupported,  // include / import / from / extends: fail when executed; text: message
};

struct IfBranch {
  ExprPtr test;
  StmtList body;
};

struct Stmt {
  StmtKind kind = StmtKind::kText;
  SourcePos pos;
  std::string text;
  ExprPtr expr;
  ExprPtr filter;
  Target target;
  std::vector<IfBranch> branches;
  StmtList body;
  StmtList else_body;
  bool recursive = false;
  bool scoped = false;
  std::string name;
  Signature signature;
  std::vector<Target> with_targets;
  std::vector<ExprPtr> with_values;
  FrameNames frame;
  FrameNames else_frame;
};

struct Program {
  StmtList body;
  FrameNames frame;  // of the template's root frame
};

}  // namespace pagoda::jinja
