// Statement grammar of jinja2's parser, plus the token-stream helpers.
#include "jinja/parser.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "jinja/parser_impl.h"
#include "jinja/scope_analysis.h"

namespace pagoda::jinja {
namespace {

bool in_list(const std::vector<std::string>& list, std::string_view s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

StmtPtr make_stmt(StmtKind kind, SourcePos pos) {
  auto s = std::make_unique<Stmt>();
  s->kind = kind;
  s->pos = pos;
  return s;
}

std::string quoted(std::string_view s) {
  return "'" + std::string(s) + "'";
}

}  // namespace

// ---- token stream ----------------------------------------------------------

Token Parser::next() {
  Token t = tokens_[index_];
  if (index_ + 1 < tokens_.size()) ++index_;
  return t;
}

bool Parser::is_op(std::string_view op) const {
  return current().type == TokenType::kOperator && current().text == op;
}

bool Parser::is_name(std::string_view name) const {
  return current().type == TokenType::kName && current().text == name;
}

bool Parser::skip_op(std::string_view op) {
  if (!is_op(op)) return false;
  next();
  return true;
}

bool Parser::skip_name(std::string_view name) {
  if (!is_name(name)) return false;
  next();
  return true;
}

void Parser::fail_here(const std::string& message) const {
  fail(ErrorKind::kSyntax, message, current().pos);
}

void Parser::fail_expected(std::string_view expected) const {
  if (current().type == TokenType::kEof) {
    fail_here("unexpected end of template, expected '" + std::string(expected) + "'.");
  }
  fail_here("expected token '" + std::string(expected) + "', got '" + describe_token(current()) +
            "'");
}

Token Parser::expect_op(std::string_view op) {
  if (!is_op(op)) fail_expected(op);
  return next();
}

Token Parser::expect_name(std::string_view name) {
  if (current().type != TokenType::kName || (!name.empty() && current().text != name)) {
    fail_expected(name.empty() ? "name" : name);
  }
  return next();
}

Token Parser::expect_type(TokenType type, std::string_view description) {
  if (current().type != type) fail_expected(description);
  return next();
}

bool Parser::is_tuple_end(std::initializer_list<std::string_view> extra_end) const {
  const Token& t = current();
  if (t.type == TokenType::kVariableEnd || t.type == TokenType::kBlockEnd || is_op(")")) {
    return true;
  }
  for (std::string_view name : extra_end) {
    if (is_name(name)) return true;
  }
  return false;
}

// ---- statements ------------------------------------------------------------

Program Parser::parse() {
  Program program;
  program.body = subparse(nullptr);
  analyze_scopes(program);
  return program;
}

void Parser::fail_unknown_tag(const std::string& name, SourcePos pos,
                              const std::vector<std::vector<std::string>>& stack) const {
  std::set<std::string> expected;
  for (const auto& tokens : stack) expected.insert(tokens.begin(), tokens.end());
  std::string currently;
  if (!stack.empty()) {
    for (const std::string& t : stack.back()) {
      if (!currently.empty()) currently += " or ";
      currently += quoted(t);
    }
  }
  std::string message = name.empty() ? "Unexpected end of template."
                                     : "Encountered unknown tag " + quoted(name) + ".";
  if (!currently.empty()) {
    if (!name.empty() && expected.count(name)) {
      message +=
          " You probably made a nesting mistake. Jinja is expecting this tag, but currently "
          "looking for " +
          currently + ".";
    } else {
      message += " Jinja was looking for the following tags: " + currently + ".";
    }
  }
  if (!tag_stack_.empty()) {
    message += " The innermost block that needs to be closed is " + quoted(tag_stack_.back()) + ".";
  }
  fail(ErrorKind::kSyntax, message, pos);
}

void Parser::fail_eof(const std::vector<std::string>* end_tokens) const {
  std::vector<std::vector<std::string>> stack = end_token_stack_;
  if (end_tokens != nullptr) stack.push_back(*end_tokens);
  fail_unknown_tag("", current().pos, stack);
}

StmtList Parser::subparse(const std::vector<std::string>* end_tokens) {
  DepthGuard guard(*this);
  StmtList body;
  if (end_tokens != nullptr) end_token_stack_.push_back(*end_tokens);
  while (current().type != TokenType::kEof) {
    const Token& token = current();
    if (token.type == TokenType::kData) {
      StmtPtr s = make_stmt(StmtKind::kText, token.pos);
      s->text = next().text;
      body.push_back(std::move(s));
    } else if (token.type == TokenType::kVariableBegin) {
      SourcePos pos = next().pos;
      StmtPtr s = make_stmt(StmtKind::kPrint, pos);
      s->expr = parse_tuple();
      expect_type(TokenType::kVariableEnd, "end of print statement");
      body.push_back(std::move(s));
    } else if (token.type == TokenType::kBlockBegin) {
      next();
      if (end_tokens != nullptr && current().type == TokenType::kName &&
          in_list(*end_tokens, current().text)) {
        end_token_stack_.pop_back();
        return body;
      }
      body.push_back(parse_statement());
      expect_type(TokenType::kBlockEnd, "end of statement block");
    } else {
      fail_here("internal parsing error");
    }
  }
  if (end_tokens != nullptr) end_token_stack_.pop_back();
  return body;
}

StmtList Parser::parse_statements(std::vector<std::string> end_tokens, bool drop_needle) {
  skip_op(":");
  expect_type(TokenType::kBlockEnd, "end of statement block");
  StmtList result = subparse(&end_tokens);
  if (current().type == TokenType::kEof) fail_eof(&end_tokens);
  if (drop_needle) next();
  return result;
}

StmtPtr Parser::parse_statement() {
  const Token& token = current();
  if (token.type != TokenType::kName) fail(ErrorKind::kSyntax, "tag name expected", token.pos);
  const std::string tag = token.text;
  static const std::set<std::string, std::less<>> kKnown = {
      "for", "if",   "block",      "extends", "print",  "macro", "include",  "from",      "import",
      "set", "with", "autoescape", "call",    "filter", "break", "continue", "generation"};
  if (!kKnown.count(tag)) fail_unknown_tag(tag, token.pos, end_token_stack_);
  tag_stack_.push_back(tag);
  StmtPtr s;
  if (tag == "for")
    s = parse_for();
  else if (tag == "if")
    s = parse_if();
  else if (tag == "set")
    s = parse_set();
  else if (tag == "macro")
    s = parse_macro();
  else if (tag == "call")
    s = parse_call_block();
  else if (tag == "filter")
    s = parse_filter_block();
  else if (tag == "with")
    s = parse_with();
  else if (tag == "block")
    s = parse_block();
  else if (tag == "print")
    s = parse_print();
  else if (tag == "break" || tag == "continue") {
    SourcePos pos = next().pos;
    s = make_stmt(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, pos);
  } else if (tag == "generation") {
    SourcePos pos = next().pos;
    s = make_stmt(StmtKind::kScope, pos);
    s->body = parse_statements({"endgeneration"}, true);
  } else {
    s = parse_unsupported(tag);
  }
  tag_stack_.pop_back();
  return s;
}

StmtPtr Parser::parse_set() {
  SourcePos pos = next().pos;
  Target target = parse_assign_target(true, false, {}, true);
  if (skip_op("=")) {
    StmtPtr s = make_stmt(StmtKind::kSet, pos);
    s->target = std::move(target);
    s->expr = parse_tuple();
    return s;
  }
  StmtPtr s = make_stmt(StmtKind::kSetBlock, pos);
  s->target = std::move(target);
  s->filter = parse_filter(nullptr);
  s->body = parse_statements({"endset"}, true);
  return s;
}

StmtPtr Parser::parse_for() {
  SourcePos pos = expect_name("for").pos;
  StmtPtr s = make_stmt(StmtKind::kFor, pos);
  s->target = parse_assign_target(true, false, {"in"});
  expect_name("in");
  s->expr = parse_tuple(false, false, {"recursive"});
  if (skip_name("if")) s->filter = parse_expression();
  s->recursive = skip_name("recursive");
  s->body = parse_statements({"endfor", "else"}, false);
  if (next().text != "endfor") s->else_body = parse_statements({"endfor"}, true);
  return s;
}

StmtPtr Parser::parse_if() {
  SourcePos pos = expect_name("if").pos;
  StmtPtr s = make_stmt(StmtKind::kIf, pos);
  while (true) {
    IfBranch branch;
    branch.test = parse_tuple(false, false);
    branch.body = parse_statements({"elif", "else", "endif"}, false);
    s->branches.push_back(std::move(branch));
    Token token = next();
    if (token.text == "elif") continue;
    if (token.text == "else") s->else_body = parse_statements({"endif"}, true);
    break;
  }
  return s;
}

StmtPtr Parser::parse_with() {
  SourcePos pos = next().pos;
  StmtPtr s = make_stmt(StmtKind::kWith, pos);
  while (current().type != TokenType::kBlockEnd) {
    if (!s->with_targets.empty()) expect_op(",");
    s->with_targets.push_back(parse_assign_target());
    expect_op("=");
    s->with_values.push_back(parse_expression());
  }
  s->body = parse_statements({"endwith"}, true);
  return s;
}

StmtPtr Parser::parse_block() {
  SourcePos pos = next().pos;
  StmtPtr s = make_stmt(StmtKind::kBlock, pos);
  s->name = expect_name().text;
  s->scoped = skip_name("scoped");
  bool required = skip_name("required");
  if (is_op("-")) {
    fail_here(
        "Block names in Jinja have to be valid Python identifiers and may not contain hyphens, use "
        "an underscore instead.");
  }
  s->body = parse_statements({"endblock"}, true);
  if (required) {
    for (const StmtPtr& b : s->body) {
      bool blank = b->kind == StmtKind::kText &&
                   std::all_of(b->text.begin(), b->text.end(),
                               [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
      if (!blank)
        fail(ErrorKind::kSyntax, "Required blocks can only contain comments or whitespace", b->pos);
    }
  }
  skip_name(s->name);
  return s;
}

void Parser::parse_signature(Signature& sig) {
  expect_op("(");
  while (!is_op(")")) {
    if (!sig.params.empty()) expect_op(",");
    sig.params.push_back(expect_name().text);
    if (skip_op("=")) {
      sig.defaults.push_back(parse_expression());
    } else if (!sig.defaults.empty()) {
      fail_here("non-default argument follows default argument");
    }
  }
  expect_op(")");
}

StmtPtr Parser::parse_macro() {
  SourcePos pos = next().pos;
  StmtPtr s = make_stmt(StmtKind::kMacro, pos);
  s->name = expect_name().text;
  parse_signature(s->signature);
  s->body = parse_statements({"endmacro"}, true);
  return s;
}

StmtPtr Parser::parse_call_block() {
  SourcePos pos = next().pos;
  StmtPtr s = make_stmt(StmtKind::kCallBlock, pos);
  if (is_op("(")) parse_signature(s->signature);
  s->expr = parse_expression();
  if (s->expr->kind != ExprKind::kCall) fail(ErrorKind::kSyntax, "expected call", pos);
  s->body = parse_statements({"endcall"}, true);
  return s;
}

StmtPtr Parser::parse_filter_block() {
  SourcePos pos = next().pos;
  StmtPtr s = make_stmt(StmtKind::kFilterBlock, pos);
  s->filter = parse_filter(nullptr, true);
  s->body = parse_statements({"endfilter"}, true);
  return s;
}

StmtPtr Parser::parse_print() {
  SourcePos pos = next().pos;
  StmtPtr s = make_stmt(StmtKind::kPrint, pos);
  std::vector<ExprPtr> items;
  while (current().type != TokenType::kBlockEnd) {
    if (!items.empty()) expect_op(",");
    items.push_back(parse_expression());
  }
  // {% print a, b %} outputs each expression; a concatenation prints the same.
  if (items.size() == 1) {
    s->expr = std::move(items[0]);
  } else {
    s->expr = make_expr(ExprKind::kConcat, pos);
    s->expr->children = std::move(items);
    s->expr = seal(std::move(s->expr));
  }
  return s;
}

// include / import / from / extends need a template loader, which the
// environment transformers builds has none of: jinja2 fails when one runs.
// autoescape is parsed the same way and is not supported.
StmtPtr Parser::parse_unsupported(const std::string& tag) {
  SourcePos pos = next().pos;
  StmtPtr s = make_stmt(StmtKind::kUnsupported, pos);
  if (tag == "autoescape") {
    s->expr = parse_expression();
    s->body = parse_statements({"endautoescape"}, true);
    s->text = "{% autoescape %} blocks are not supported";
    return s;
  }
  s->expr = parse_expression();
  s->text = "no loader for this environment specified ({% " + tag + " %})";
  while (current().type != TokenType::kBlockEnd && current().type != TokenType::kEof) next();
  return s;
}

Target Parser::parse_assign_target(bool with_tuple, bool name_only,
                                   std::initializer_list<std::string_view> extra_end,
                                   bool with_namespace) {
  Target target;
  target.pos = current().pos;
  if (name_only) {
    target.name = expect_name().text;
    return target;
  }
  ExprPtr e = with_tuple ? parse_tuple(true, true, extra_end, false, with_namespace)
                         : parse_primary(with_namespace);
  if (!to_target(*e, target)) {
    std::string what = e->kind == ExprKind::kConst   ? "const"
                       : e->kind == ExprKind::kTuple ? "tuple"
                       : e->kind == ExprKind::kList  ? "list"
                       : e->kind == ExprKind::kDict  ? "dict"
                       : e->kind == ExprKind::kCall  ? "call"
                                                     : "expression";
    fail(ErrorKind::kSyntax, "can't assign to " + quoted(what), e->pos);
  }
  return target;
}

bool Parser::to_target(const Expr& e, Target& t) {
  t.pos = e.pos;
  switch (e.kind) {
    case ExprKind::kName:
      t.kind = Target::Kind::kName;
      t.name = e.name;
      return true;
    case ExprKind::kNamespaceRef:
      t.kind = Target::Kind::kNamespaceAttr;
      t.name = e.children[0]->name;
      t.attr = e.name;
      return true;
    case ExprKind::kTuple:
      t.kind = Target::Kind::kTuple;
      for (const ExprPtr& item : e.children) {
        Target sub;
        if (!to_target(*item, sub)) return false;
        t.items.push_back(std::move(sub));
      }
      return true;
    default:
      return false;
  }
}

Program parse_template(std::string_view source) {
  Parser parser(tokenize(source));
  return parser.parse();
}

}  // namespace pagoda::jinja
