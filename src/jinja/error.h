// The error the jinja module throws internally. It never leaves the module:
// ChatTemplate::parse/render (chat_template.cpp) catch it and return an Error.
#pragma once

#include <exception>
#include <string>

namespace pagoda::jinja {

enum class ErrorKind {
  kSyntax,       // TemplateSyntaxError / TemplateAssertionError (parse time)
  kUndefined,    // UndefinedError: an operation on an undefined value
  kType,         // TypeError / ValueError / ZeroDivisionError ... of an operation
  kSecurity,     // SecurityError: the immutable sandbox refused an operation
  kRaised,       // raise_exception(message) called by the template
  kLimit,        // a resource limit (steps, output size, recursion) was reached
  kUnsupported,  // valid Jinja that this interpreter does not implement
};

struct SourcePos {
  int line = 0;    // 1-based; 0 when unknown
  int column = 0;  // 1-based; 0 when unknown
};

class JinjaError : public std::exception {
 public:
  JinjaError(ErrorKind kind, std::string message, SourcePos pos = {})
      : kind_(kind), message_(std::move(message)), pos_(pos) {}

  ErrorKind kind() const { return kind_; }
  const std::string& message() const { return message_; }
  SourcePos pos() const { return pos_; }
  void set_pos_if_unknown(SourcePos pos) {
    if (pos_.line == 0) pos_ = pos;
  }
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  ErrorKind kind_;
  std::string message_;
  SourcePos pos_;
};

[[noreturn]] inline void fail(ErrorKind kind, std::string message, SourcePos pos = {}) {
  throw JinjaError(kind, std::move(message), pos);
}

}  // namespace pagoda::jinja
