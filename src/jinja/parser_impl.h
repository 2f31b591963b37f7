// The recursive-descent parser behind parse_template (parser.cpp: statements,
// parser_expr.cpp: expressions). Internal to the jinja module.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/ast.h"
#include "jinja/lexer.h"

namespace pagoda::jinja {

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}
  Program parse();

  // Expressions (parser_expr.cpp).
  ExprPtr parse_expression(bool with_condexpr = true);
  ExprPtr parse_tuple(bool simplified = false, bool with_condexpr = true,
                      std::initializer_list<std::string_view> extra_end = {},
                      bool explicit_parentheses = false, bool with_namespace = false);
  ExprPtr parse_primary(bool with_namespace = false);
  ExprPtr parse_filter(ExprPtr node, bool start_inline = false);
  CallSpec parse_call_args();

 private:
  // Token stream.
  const Token& current() const { return tokens_[index_]; }
  const Token& look() const { return tokens_[std::min(index_ + 1, tokens_.size() - 1)]; }
  Token next();
  bool is_op(std::string_view op) const;
  bool is_name(std::string_view name) const;
  bool skip_op(std::string_view op);
  bool skip_name(std::string_view name);
  Token expect_op(std::string_view op);
  Token expect_name(std::string_view name = {});
  Token expect_type(TokenType type, std::string_view description);
  [[noreturn]] void fail_here(const std::string& message) const;
  [[noreturn]] void fail_expected(std::string_view expected) const;
  bool is_tuple_end(std::initializer_list<std::string_view> extra_end) const;
  static bool to_target(const Expr& e, Target& t);

  // Statements (parser.cpp).
  StmtList subparse(const std::vector<std::string>* end_tokens);
  StmtList parse_statements(std::vector<std::string> end_tokens, bool drop_needle);
  StmtPtr parse_statement();
  StmtPtr parse_set();
  StmtPtr parse_for();
  StmtPtr parse_if();
  StmtPtr parse_with();
  StmtPtr parse_block();
  StmtPtr parse_macro();
  StmtPtr parse_call_block();
  StmtPtr parse_filter_block();
  StmtPtr parse_print();
  StmtPtr parse_unsupported(const std::string& tag);
  void parse_signature(Signature& sig);
  Target parse_assign_target(bool with_tuple = true, bool name_only = false,
                             std::initializer_list<std::string_view> extra_end = {},
                             bool with_namespace = false);
  [[noreturn]] void fail_unknown_tag(const std::string& name, SourcePos pos,
                                     const std::vector<std::vector<std::string>>& stack) const;
  [[noreturn]] void fail_eof(const std::vector<std::string>* end_tokens) const;

  // Expressions (parser_expr.cpp).
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter = true);
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);
  ExprPtr parse_subscribed();
  ExprPtr parse_call(ExprPtr node);
  ExprPtr parse_test(ExprPtr node);

  // Bounds the recursion of nested expressions and blocks.
  class DepthGuard {
   public:
    explicit DepthGuard(Parser& p);
    ~DepthGuard() { --p_.depth_; }

   private:
    Parser& p_;
  };

  std::vector<Token> tokens_;
  size_t index_ = 0;
  int depth_ = 0;
  std::vector<std::string> tag_stack_;
  std::vector<std::vector<std::string>> end_token_stack_;
};

ExprPtr make_expr(ExprKind kind, SourcePos pos);
// Records the height of a completed node and fails beyond kMaxExprDepth, so
// that no tree is too deep to evaluate, analyze or destroy recursively.
ExprPtr seal(ExprPtr e);

}  // namespace pagoda::jinja
