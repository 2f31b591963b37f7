#include "jinja/scope_analysis.h"

#include <map>
#include <set>

#include "jinja/filters.h"
#include "jinja/tests.h"

namespace pagoda::jinja {
namespace {

// jinja2.idtracking.Symbols: the names a frame refers to and how each is
// initialised when the frame starts.
class Symbols {
 public:
  enum class Load { kParam, kResolve, kAlias, kUndefined };

  explicit Symbols(const Symbols* parent) : parent_(parent) {}

  bool find_ref(const std::string& name) const {
    for (const Symbols* s = this; s != nullptr; s = s->parent_) {
      if (s->refs_.count(name)) return true;
    }
    return false;
  }

  void store(const std::string& name) {
    stores_.insert(name);
    if (refs_.count(name)) return;
    refs_[name] = parent_ != nullptr && parent_->find_ref(name) ? Load::kAlias : Load::kUndefined;
  }

  void declare_parameter(const std::string& name) {
    stores_.insert(name);
    refs_[name] = Load::kParam;
  }

  void load(const std::string& name) {
    if (!find_ref(name)) refs_[name] = Load::kResolve;
  }

  void branch_update(const std::vector<Symbols>& branches) {
    std::set<std::string> new_stores;
    for (const Symbols& b : branches) {
      for (const std::string& n : b.stores_) {
        if (!stores_.count(n)) new_stores.insert(n);
      }
    }
    for (const Symbols& b : branches) {
      for (const auto& [n, l] : b.refs_) refs_[n] = l;
      stores_.insert(b.stores_.begin(), b.stores_.end());
    }
    for (const std::string& n : new_stores) {
      refs_[n] = parent_ != nullptr && parent_->find_ref(n) ? Load::kAlias : Load::kResolve;
    }
  }

  FrameNames undefined_names() const {
    FrameNames out;
    for (const auto& [n, l] : refs_) {
      if (l == Load::kUndefined) out.push_back(n);
    }
    return out;
  }

 private:
  const Symbols* parent_;
  std::map<std::string, Load> refs_;
  std::set<std::string> stores_;
};

// jinja2's FrameSymbolVisitor: the direct content of one frame.
void visit_expr(const Expr* e, Symbols& sym);

void visit_call(const CallSpec& call, Symbols& sym) {
  for (const ExprPtr& a : call.args) visit_expr(a.get(), sym);
  for (const Keyword& k : call.kwargs) visit_expr(k.value.get(), sym);
  visit_expr(call.dyn_args.get(), sym);
  visit_expr(call.dyn_kwargs.get(), sym);
}

void visit_expr(const Expr* e, Symbols& sym) {
  if (e == nullptr) return;
  if (e->kind == ExprKind::kName) {
    sym.load(e->name);
    return;
  }
  for (const ExprPtr& c : e->children) visit_expr(c.get(), sym);
  visit_call(e->call, sym);
}

void visit_target(const Target& t, Symbols& sym, bool as_param) {
  switch (t.kind) {
    case Target::Kind::kName:
      if (as_param) {
        sym.declare_parameter(t.name);
      } else {
        sym.store(t.name);
      }
      return;
    case Target::Kind::kNamespaceAttr:
      sym.load(t.name);
      return;
    case Target::Kind::kTuple:
      for (const Target& item : t.items) visit_target(item, sym, as_param);
      return;
  }
}

void visit_stmts(const StmtList& body, Symbols& sym);

void visit_if(const Stmt& s, Symbols& sym) {
  visit_expr(s.branches[0].test.get(), sym);
  std::vector<Symbols> parts;
  parts.push_back(sym);
  visit_stmts(s.branches[0].body, parts.back());
  Symbols elifs = sym;
  for (size_t i = 1; i < s.branches.size(); ++i) {
    visit_expr(s.branches[i].test.get(), elifs);
    std::vector<Symbols> inner{elifs, elifs, elifs};
    visit_stmts(s.branches[i].body, inner[0]);
    elifs.branch_update(inner);
  }
  parts.push_back(std::move(elifs));
  parts.push_back(sym);
  visit_stmts(s.else_body, parts.back());
  sym.branch_update(parts);
}

void visit_stmt(const Stmt& s, Symbols& sym) {
  switch (s.kind) {
    case StmtKind::kPrint:
    case StmtKind::kFor:
    case StmtKind::kCallBlock:
    case StmtKind::kUnsupported:
      visit_expr(s.expr.get(), sym);
      return;
    case StmtKind::kIf:
      visit_if(s, sym);
      return;
    case StmtKind::kSet:
      visit_expr(s.expr.get(), sym);
      visit_target(s.target, sym, false);
      return;
    case StmtKind::kSetBlock:
      visit_target(s.target, sym, false);
      return;
    case StmtKind::kMacro:
      sym.store(s.name);
      return;
    case StmtKind::kFilterBlock:
      visit_expr(s.filter.get(), sym);
      return;
    case StmtKind::kWith:
      for (const ExprPtr& v : s.with_values) visit_expr(v.get(), sym);
      return;
    default:
      return;
  }
}

void visit_stmts(const StmtList& body, Symbols& sym) {
  for (const StmtPtr& s : body) visit_stmt(*s, sym);
}

// jinja2.visitor find_undeclared(children, {caller, kwargs, varargs}).
class UndeclaredFinder {
 public:
  std::set<std::string> names{"caller", "kwargs", "varargs"};
  std::set<std::string> undeclared;

  void expr(const Expr* e) {
    if (e == nullptr) return;
    if (e->kind == ExprKind::kName) {
      if (names.count(e->name)) undeclared.insert(e->name);
      return;
    }
    for (const ExprPtr& c : e->children) expr(c.get());
    for (const ExprPtr& a : e->call.args) expr(a.get());
    for (const Keyword& k : e->call.kwargs) expr(k.value.get());
    expr(e->call.dyn_args.get());
    expr(e->call.dyn_kwargs.get());
  }
  void target(const Target& t) {
    if (t.kind == Target::Kind::kTuple) {
      for (const Target& i : t.items) target(i);
    } else if (t.kind == Target::Kind::kName) {
      names.erase(t.name);
    } else if (names.count(t.name)) {
      undeclared.insert(t.name);
    }
  }
  void signature(const Signature& sig) {
    for (const std::string& p : sig.params) names.erase(p);
    for (const ExprPtr& d : sig.defaults) expr(d.get());
  }
  void stmts(const StmtList& body) {
    for (const StmtPtr& s : body) stmt(*s);
  }
  void stmt(const Stmt& s) {
    switch (s.kind) {
      case StmtKind::kBlock:
        return;
      case StmtKind::kFor:
        target(s.target);
        expr(s.expr.get());
        stmts(s.body);
        stmts(s.else_body);
        expr(s.filter.get());
        return;
      case StmtKind::kIf:
        for (const IfBranch& b : s.branches) {
          expr(b.test.get());
          stmts(b.body);
        }
        stmts(s.else_body);
        return;
      case StmtKind::kSet:
        target(s.target);
        expr(s.expr.get());
        return;
      case StmtKind::kSetBlock:
        target(s.target);
        expr(s.filter.get());
        stmts(s.body);
        return;
      case StmtKind::kMacro:
        names.erase(s.name);
        signature(s.signature);
        stmts(s.body);
        return;
      case StmtKind::kCallBlock:
        expr(s.expr.get());
        signature(s.signature);
        stmts(s.body);
        return;
      case StmtKind::kFilterBlock:
        stmts(s.body);
        expr(s.filter.get());
        return;
      case StmtKind::kWith:
        for (const Target& t : s.with_targets) target(t);
        for (const ExprPtr& v : s.with_values) expr(v.get());
        stmts(s.body);
        return;
      default:
        expr(s.expr.get());
        stmts(s.body);
    }
  }
};

void analyze_frame(const StmtList& body, Symbols& sym);
void analyze_children(const StmtList& body, const Symbols& sym);

void analyze_for(Stmt& s, const Symbols& sym) {
  Symbols loop(&sym);
  visit_target(s.target, loop, true);
  visit_stmts(s.body, loop);
  loop.declare_parameter("loop");
  s.frame = loop.undefined_names();
  analyze_children(s.body, loop);
  Symbols else_sym(&sym);
  analyze_frame(s.else_body, else_sym);
  s.else_frame = else_sym.undefined_names();
}

// A macro or a call block's `caller`: parameters, then caller / kwargs /
// varargs when the body reads them (jinja2's macro_body).
void analyze_macro(Stmt& s, const Symbols& sym) {
  UndeclaredFinder finder;
  finder.signature(s.signature);
  finder.stmts(s.body);
  s.signature.uses_caller = finder.undeclared.count("caller") > 0;
  s.signature.catch_kwargs = finder.undeclared.count("kwargs") > 0;
  s.signature.catch_varargs = finder.undeclared.count("varargs") > 0;
  Symbols inner(&sym);
  for (const std::string& p : s.signature.params) inner.declare_parameter(p);
  for (const ExprPtr& d : s.signature.defaults) visit_expr(d.get(), inner);
  visit_stmts(s.body, inner);
  if (s.signature.uses_caller) inner.declare_parameter("caller");
  if (s.signature.catch_kwargs) inner.declare_parameter("kwargs");
  if (s.signature.catch_varargs) inner.declare_parameter("varargs");
  s.frame = inner.undefined_names();
  analyze_children(s.body, inner);
}

// Analyzes the frames that the statements of `body` open (parent: sym).
void analyze_children(const StmtList& body, const Symbols& sym) {
  for (const StmtPtr& sp : body) {
    Stmt& s = *sp;
    switch (s.kind) {
      case StmtKind::kIf:
        for (const IfBranch& b : s.branches) analyze_children(b.body, sym);
        analyze_children(s.else_body, sym);
        break;
      case StmtKind::kFor:
        analyze_for(s, sym);
        break;
      case StmtKind::kMacro:
      case StmtKind::kCallBlock:
        analyze_macro(s, sym);
        break;
      case StmtKind::kFilterBlock: {
        Symbols inner(&sym);
        visit_expr(s.filter.get(), inner);
        analyze_frame(s.body, inner);
        s.frame = inner.undefined_names();
        break;
      }
      case StmtKind::kWith: {
        Symbols inner(&sym);
        for (const Target& t : s.with_targets) visit_target(t, inner, true);
        analyze_frame(s.body, inner);
        s.frame = inner.undefined_names();
        break;
      }
      case StmtKind::kSetBlock:
      case StmtKind::kScope: {
        Symbols inner(&sym);
        analyze_frame(s.body, inner);
        s.frame = inner.undefined_names();
        break;
      }
      case StmtKind::kBlock: {
        Symbols inner(nullptr);  // blocks render in a fresh top-level frame
        analyze_frame(s.body, inner);
        s.frame = inner.undefined_names();
        break;
      }
      default:
        break;
    }
  }
}

void analyze_frame(const StmtList& body, Symbols& sym) {
  visit_stmts(body, sym);
  analyze_children(body, sym);
}

// Unknown filter/test names and misplaced break/continue.
class Validator {
 public:
  void stmts(const StmtList& body, bool soft, bool in_loop) {
    for (const StmtPtr& s : body) stmt(*s, soft, in_loop);
  }

 private:
  void expr(Expr* e, bool soft) {
    if (e == nullptr) return;
    if (e->kind == ExprKind::kFilter || e->kind == ExprKind::kTest) {
      bool known = e->kind == ExprKind::kFilter ? is_known_filter(e->name) : is_known_test(e->name);
      if (!known && !soft) {
        fail(ErrorKind::kSyntax,
             std::string("No ") + (e->kind == ExprKind::kFilter ? "filter" : "test") + " named '" +
                 e->name + "'.",
             e->pos);
      }
      e->known = known;
    }
    bool child_soft = soft || e->kind == ExprKind::kCondExpr;
    for (ExprPtr& c : e->children) expr(c.get(), child_soft);
    for (ExprPtr& a : e->call.args) expr(a.get(), child_soft);
    for (Keyword& k : e->call.kwargs) expr(k.value.get(), child_soft);
    expr(e->call.dyn_args.get(), child_soft);
    expr(e->call.dyn_kwargs.get(), child_soft);
  }

  void stmt(Stmt& s, bool soft, bool in_loop) {
    switch (s.kind) {
      case StmtKind::kBreak:
      case StmtKind::kContinue:
        if (!in_loop) {
          fail(ErrorKind::kSyntax,
               std::string("'") + (s.kind == StmtKind::kBreak ? "break" : "continue") +
                   "' outside loop",
               s.pos);
        }
        return;
      case StmtKind::kIf:
        for (IfBranch& b : s.branches) {
          expr(b.test.get(), true);
          stmts(b.body, true, in_loop);
        }
        stmts(s.else_body, true, in_loop);
        return;
      case StmtKind::kFor:
        expr(s.expr.get(), soft);
        expr(s.filter.get(), false);
        stmts(s.body, false, true);
        stmts(s.else_body, false, in_loop);
        return;
      case StmtKind::kMacro:
        for (ExprPtr& d : s.signature.defaults) expr(d.get(), false);
        stmts(s.body, false, false);
        return;
      case StmtKind::kCallBlock:
        expr(s.expr.get(), soft);
        for (ExprPtr& d : s.signature.defaults) expr(d.get(), false);
        stmts(s.body, false, false);
        return;
      case StmtKind::kFilterBlock:
      case StmtKind::kSetBlock:
        expr(s.filter.get(), false);
        stmts(s.body, false, in_loop);
        return;
      case StmtKind::kWith:
        for (ExprPtr& v : s.with_values) expr(v.get(), soft);
        stmts(s.body, false, in_loop);
        return;
      case StmtKind::kBlock:
      case StmtKind::kScope:
        stmts(s.body, false, false);
        return;
      default:
        expr(s.expr.get(), soft);
        stmts(s.body, soft, in_loop);
    }
  }
};

}  // namespace

void analyze_scopes(Program& program) {
  Validator().stmts(program.body, false, false);
  Symbols root(nullptr);
  analyze_frame(program.body, root);
  program.frame = root.undefined_names();
}

}  // namespace pagoda::jinja
