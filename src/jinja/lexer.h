// Tokenizer with jinja2's lexing rules for the environment transformers uses
// (trim_blocks=True, lstrip_blocks=True, default delimiters, no line
// statements, keep_trailing_newline=False). Whitespace control (-, +),
// comments and {% raw %} are resolved here: the parser only sees data,
// expression and statement tokens.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "jinja/error.h"

namespace pagoda::jinja {

enum class TokenType {
  kData,           // template text
  kVariableBegin,  // {{
  kVariableEnd,    // }}
  kBlockBegin,     // {%
  kBlockEnd,       // %}
  kName,
  kString,    // text holds the unescaped value
  kInteger,   // int_value
  kFloat,     // float_value
  kOperator,  // text holds the operator: + - / // * % ** ~ [ ] ( ) { } == != > >= < <= = . : | , ;
  kEof,
};

struct Token {
  TokenType type = TokenType::kEof;
  std::string text;
  int64_t int_value = 0;
  double float_value = 0.0;
  SourcePos pos;
};

// Throws JinjaError(kSyntax) on a lexing error. The last token is kEof.
std::vector<Token> tokenize(std::string_view source);

// What jinja2 calls the token in error messages ("end of print statement", ...).
std::string describe_token(const Token& token);

}  // namespace pagoda::jinja
