// Expression grammar of jinja2's parser (parse_expression and below).
#include <algorithm>

#include "jinja/limits.h"
#include "jinja/parser_impl.h"

namespace pagoda::jinja {
namespace {

bool compare_op_of(const Token& t, CompareOp& op) {
  if (t.type != TokenType::kOperator) return false;
  if (t.text == "==")
    op = CompareOp::kEq;
  else if (t.text == "!=")
    op = CompareOp::kNe;
  else if (t.text == "<")
    op = CompareOp::kLt;
  else if (t.text == "<=")
    op = CompareOp::kLe;
  else if (t.text == ">")
    op = CompareOp::kGt;
  else if (t.text == ">=")
    op = CompareOp::kGe;
  else
    return false;
  return true;
}

ExprPtr binary(BinaryOp op, ExprPtr left, ExprPtr right, SourcePos pos) {
  ExprPtr e = make_expr(ExprKind::kBinary, pos);
  e->op = op;
  e->children.push_back(std::move(left));
  e->children.push_back(std::move(right));
  return seal(std::move(e));
}

ExprPtr pair_node(ExprKind kind, ExprPtr left, ExprPtr right, SourcePos pos) {
  ExprPtr e = make_expr(kind, pos);
  e->children.push_back(std::move(left));
  e->children.push_back(std::move(right));
  return seal(std::move(e));
}

}  // namespace

ExprPtr make_expr(ExprKind kind, SourcePos pos) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  e->pos = pos;
  return e;
}

ExprPtr seal(ExprPtr e) {
  int depth = 0;
  auto see = [&depth](const ExprPtr& c) {
    if (c) depth = std::max(depth, c->depth);
  };
  for (const ExprPtr& c : e->children) see(c);
  for (const ExprPtr& a : e->call.args) see(a);
  for (const Keyword& k : e->call.kwargs) see(k.value);
  see(e->call.dyn_args);
  see(e->call.dyn_kwargs);
  e->depth = depth + 1;
  if (e->depth > kMaxExprDepth) {
    fail(ErrorKind::kLimit,
         "expression nested deeper than " + std::to_string(kMaxExprDepth) + " levels", e->pos);
  }
  return e;
}

Parser::DepthGuard::DepthGuard(Parser& p) : p_(p) {
  if (++p_.depth_ > kMaxParseDepth) {
    --p_.depth_;
    fail(ErrorKind::kLimit,
         "template nested deeper than " + std::to_string(kMaxParseDepth) + " levels",
         p_.current().pos);
  }
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  DepthGuard guard(*this);
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  SourcePos pos = current().pos;
  ExprPtr expr1 = parse_or();
  while (skip_name("if")) {
    ExprPtr expr2 = parse_or();
    ExprPtr expr3;
    if (skip_name("else")) expr3 = parse_condexpr();
    ExprPtr e = make_expr(ExprKind::kCondExpr, pos);
    e->children.push_back(std::move(expr2));
    e->children.push_back(std::move(expr1));
    e->children.push_back(std::move(expr3));
    expr1 = seal(std::move(e));
    pos = current().pos;
  }
  return expr1;
}

ExprPtr Parser::parse_or() {
  SourcePos pos = current().pos;
  ExprPtr left = parse_and();
  while (skip_name("or")) {
    ExprPtr right = parse_and();
    left = pair_node(ExprKind::kOr, std::move(left), std::move(right), pos);
    pos = current().pos;
  }
  return left;
}

ExprPtr Parser::parse_and() {
  SourcePos pos = current().pos;
  ExprPtr left = parse_not();
  while (skip_name("and")) {
    ExprPtr right = parse_not();
    left = pair_node(ExprKind::kAnd, std::move(left), std::move(right), pos);
    pos = current().pos;
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    DepthGuard guard(*this);
    SourcePos pos = next().pos;
    ExprPtr e = make_expr(ExprKind::kNot, pos);
    e->children.push_back(parse_not());
    return seal(std::move(e));
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  SourcePos pos = current().pos;
  ExprPtr expr = parse_math1();
  ExprPtr node;
  while (true) {
    CompareOp op;
    if (compare_op_of(current(), op)) {
      next();
    } else if (skip_name("in")) {
      op = CompareOp::kIn;
    } else if (is_name("not") && look().type == TokenType::kName && look().text == "in") {
      next();
      next();
      op = CompareOp::kNotIn;
    } else {
      break;
    }
    if (!node) {
      node = make_expr(ExprKind::kCompare, pos);
      node->children.push_back(std::move(expr));
    }
    node->compare_ops.push_back(op);
    node->children.push_back(parse_math1());
  }
  if (!node) return expr;
  return seal(std::move(node));
}

ExprPtr Parser::parse_math1() {
  SourcePos pos = current().pos;
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    BinaryOp op = next().text == "+" ? BinaryOp::kAdd : BinaryOp::kSub;
    ExprPtr right = parse_concat();
    left = binary(op, std::move(left), std::move(right), pos);
    pos = current().pos;
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  SourcePos pos = current().pos;
  ExprPtr first = parse_math2();
  if (!is_op("~")) return first;
  ExprPtr e = make_expr(ExprKind::kConcat, pos);
  e->children.push_back(std::move(first));
  while (skip_op("~")) e->children.push_back(parse_math2());
  return seal(std::move(e));
}

ExprPtr Parser::parse_math2() {
  SourcePos pos = current().pos;
  ExprPtr left = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    BinaryOp op = is_op("*")    ? BinaryOp::kMul
                  : is_op("/")  ? BinaryOp::kDiv
                  : is_op("//") ? BinaryOp::kFloorDiv
                                : BinaryOp::kMod;
    next();
    ExprPtr right = parse_pow();
    left = binary(op, std::move(left), std::move(right), pos);
    pos = current().pos;
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  SourcePos pos = current().pos;
  ExprPtr left = parse_unary();
  while (skip_op("**")) {
    ExprPtr right = parse_unary();
    left = binary(BinaryOp::kPow, std::move(left), std::move(right), pos);
    pos = current().pos;
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  DepthGuard guard(*this);
  SourcePos pos = current().pos;
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    ExprKind kind = next().text == "-" ? ExprKind::kNeg : ExprKind::kPos;
    node = make_expr(kind, pos);
    node->children.push_back(parse_unary(false));
    node = seal(std::move(node));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary(bool with_namespace) {
  DepthGuard guard(*this);
  const Token& token = current();
  SourcePos pos = token.pos;
  if (token.type == TokenType::kName) {
    std::string name = next().text;
    ExprPtr e = make_expr(ExprKind::kConst, pos);
    if (name == "true" || name == "True" || name == "false" || name == "False") {
      e->constant = Value::boolean(name == "true" || name == "True");
    } else if (name == "none" || name == "None") {
      e->constant = Value::none();
    } else if (with_namespace && is_op(".")) {
      next();
      e->kind = ExprKind::kNamespaceRef;
      e->name = expect_name().text;
      ExprPtr base = make_expr(ExprKind::kName, pos);
      base->name = name;
      e->children.push_back(std::move(base));
      e = seal(std::move(e));
    } else {
      e->kind = ExprKind::kName;
      e->name = name;
    }
    return e;
  }
  if (token.type == TokenType::kString) {
    std::string text;
    while (current().type == TokenType::kString) text += next().text;
    ExprPtr e = make_expr(ExprKind::kConst, pos);
    e->constant = Value::string(std::move(text));
    return e;
  }
  if (token.type == TokenType::kInteger || token.type == TokenType::kFloat) {
    Token t = next();
    ExprPtr e = make_expr(ExprKind::kConst, pos);
    e->constant = t.type == TokenType::kInteger ? Value::integer(t.int_value)
                                                : Value::floating(t.float_value);
    return e;
  }
  if (is_op("(")) {
    next();
    ExprPtr e = parse_tuple(false, true, {}, true);
    expect_op(")");
    return e;
  }
  if (is_op("[")) return parse_list();
  if (is_op("{")) return parse_dict();
  fail_here("unexpected '" + describe_token(token) + "'");
}

ExprPtr Parser::parse_tuple(bool simplified, bool with_condexpr,
                            std::initializer_list<std::string_view> extra_end,
                            bool explicit_parentheses, bool with_namespace) {
  SourcePos pos = current().pos;
  std::vector<ExprPtr> args;
  bool is_tuple = false;
  while (true) {
    if (!args.empty()) expect_op(",");
    if (is_tuple_end(extra_end)) break;
    args.push_back(simplified ? parse_primary(with_namespace) : parse_expression(with_condexpr));
    if (is_op(",")) {
      is_tuple = true;
    } else {
      break;
    }
    pos = current().pos;
  }
  if (!is_tuple) {
    if (!args.empty()) return std::move(args[0]);
    if (!explicit_parentheses) {
      fail_here("Expected an expression, got '" + describe_token(current()) + "'");
    }
  }
  ExprPtr e = make_expr(ExprKind::kTuple, pos);
  e->children = std::move(args);
  return seal(std::move(e));
}

ExprPtr Parser::parse_list() {
  SourcePos pos = expect_op("[").pos;
  ExprPtr e = make_expr(ExprKind::kList, pos);
  while (!is_op("]")) {
    if (!e->children.empty()) expect_op(",");
    if (is_op("]")) break;
    e->children.push_back(parse_expression());
  }
  expect_op("]");
  return seal(std::move(e));
}

ExprPtr Parser::parse_dict() {
  SourcePos pos = expect_op("{").pos;
  ExprPtr e = make_expr(ExprKind::kDict, pos);
  while (!is_op("}")) {
    if (!e->children.empty()) expect_op(",");
    if (is_op("}")) break;
    e->children.push_back(parse_expression());
    expect_op(":");
    e->children.push_back(parse_expression());
  }
  expect_op("}");
  return seal(std::move(e));
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (is_op(".") || is_op("[")) {
      node = parse_subscript(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (is_op("|")) {
      node = parse_filter(std::move(node));
    } else if (is_name("is")) {
      node = parse_test(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  DepthGuard guard(*this);
  Token token = next();
  if (token.text == ".") {
    Token attr = next();
    if (attr.type == TokenType::kName) {
      ExprPtr e = make_expr(ExprKind::kGetattr, token.pos);
      e->name = attr.text;
      e->children.push_back(std::move(node));
      return seal(std::move(e));
    }
    if (attr.type != TokenType::kInteger)
      fail(ErrorKind::kSyntax, "expected name or number", attr.pos);
    ExprPtr key = make_expr(ExprKind::kConst, attr.pos);
    key->constant = Value::integer(attr.int_value);
    ExprPtr e = make_expr(ExprKind::kGetitem, token.pos);
    e->children.push_back(std::move(node));
    e->children.push_back(std::move(key));
    return seal(std::move(e));
  }
  std::vector<ExprPtr> args;
  while (!is_op("]")) {
    if (!args.empty()) expect_op(",");
    args.push_back(parse_subscribed());
  }
  expect_op("]");
  ExprPtr e = make_expr(ExprKind::kGetitem, token.pos);
  e->children.push_back(std::move(node));
  if (args.size() == 1) {
    e->children.push_back(std::move(args[0]));
  } else {
    ExprPtr t = make_expr(ExprKind::kTuple, token.pos);
    t->children = std::move(args);
    e->children.push_back(seal(std::move(t)));
  }
  return seal(std::move(e));
}

ExprPtr Parser::parse_subscribed() {
  SourcePos pos = current().pos;
  std::vector<ExprPtr> args;
  if (is_op(":")) {
    next();
    args.push_back(nullptr);
  } else {
    ExprPtr node = parse_expression();
    if (!is_op(":")) return node;
    next();
    args.push_back(std::move(node));
  }
  if (is_op(":")) {
    args.push_back(nullptr);
  } else if (!is_op("]") && !is_op(",")) {
    args.push_back(parse_expression());
  } else {
    args.push_back(nullptr);
  }
  if (is_op(":")) {
    next();
    if (!is_op("]") && !is_op(",")) {
      args.push_back(parse_expression());
    } else {
      args.push_back(nullptr);
    }
  } else {
    args.push_back(nullptr);
  }
  ExprPtr e = make_expr(ExprKind::kSlice, pos);
  e->children = std::move(args);
  return seal(std::move(e));
}

CallSpec Parser::parse_call_args() {
  Token open = expect_op("(");
  CallSpec call;
  bool require_comma = false;
  auto ensure = [&](bool ok) {
    if (!ok) fail(ErrorKind::kSyntax, "invalid syntax for function call expression", open.pos);
  };
  while (!is_op(")")) {
    if (require_comma) {
      expect_op(",");
      if (is_op(")")) break;
    }
    if (is_op("*")) {
      ensure(!call.dyn_args && !call.dyn_kwargs);
      next();
      call.dyn_args = parse_expression();
    } else if (is_op("**")) {
      ensure(!call.dyn_kwargs);
      next();
      call.dyn_kwargs = parse_expression();
    } else if (current().type == TokenType::kName && look().type == TokenType::kOperator &&
               look().text == "=") {
      ensure(!call.dyn_kwargs);
      std::string key = next().text;
      next();
      call.kwargs.push_back(Keyword{key, parse_expression()});
    } else {
      ensure(!call.dyn_args && !call.dyn_kwargs && call.kwargs.empty());
      call.args.push_back(parse_expression());
    }
    require_comma = true;
  }
  expect_op(")");
  return call;
}

ExprPtr Parser::parse_call(ExprPtr node) {
  SourcePos pos = current().pos;
  ExprPtr e = make_expr(ExprKind::kCall, pos);
  e->call = parse_call_args();
  e->children.push_back(std::move(node));
  return seal(std::move(e));
}

ExprPtr Parser::parse_filter(ExprPtr node, bool start_inline) {
  while (is_op("|") || start_inline) {
    if (!start_inline) next();
    Token token = expect_name();
    std::string name = token.text;
    while (skip_op(".")) name += "." + expect_name().text;
    ExprPtr e = make_expr(ExprKind::kFilter, token.pos);
    e->name = std::move(name);
    if (is_op("(")) e->call = parse_call_args();
    e->children.push_back(std::move(node));
    node = seal(std::move(e));
    start_inline = false;
  }
  return node;
}

ExprPtr Parser::parse_test(ExprPtr node) {
  Token token = next();  // `is`
  bool negated = skip_name("not");
  std::string name = expect_name().text;
  while (skip_op(".")) name += "." + expect_name().text;
  ExprPtr e = make_expr(ExprKind::kTest, token.pos);
  e->name = std::move(name);
  const Token& cur = current();
  bool arg_start = cur.type == TokenType::kName || cur.type == TokenType::kString ||
                   cur.type == TokenType::kInteger || cur.type == TokenType::kFloat || is_op("[") ||
                   is_op("{");
  if (is_op("(")) {
    e->call = parse_call_args();
  } else if (arg_start && !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) fail_here("You cannot chain multiple tests with is");
    e->call.args.push_back(parse_postfix(parse_primary()));
  }
  e->children.push_back(std::move(node));
  e = seal(std::move(e));
  if (!negated) return e;
  ExprPtr n = make_expr(ExprKind::kNot, token.pos);
  n->children.push_back(std::move(e));
  return seal(std::move(n));
}

}  // namespace pagoda::jinja
