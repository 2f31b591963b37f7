// Errors as values at module boundaries: Result<T> holds a T or an Error
// (Result<T, E> a T or another error type, e.g. the server's ApiError).
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace pagoda {

enum class ErrorCode {
  kInvalidArgument,  // bad input from a user: request field, flag, file content
  kNotFound,         // missing file, tensor, token, model
  kUnsupported,      // valid input we do not handle (architecture, tensor type)
  kCorrupt,          // malformed or truncated file
  kIo,               // OS-level failure (open, mmap, read)
  kResourceExhausted,// out of memory, queue full
  kInternal,         // a bug: should never happen
};

const char* error_code_name(ErrorCode code);

struct Error {
  ErrorCode code = ErrorCode::kInternal;
  std::string message;  // names the offending thing: file, tensor, field, value
};

inline Error make_error(ErrorCode code, std::string message) { return {code, std::move(message)}; }

// Minimal expected-like type. Access to value() on an error (or error() on a
// value) is a programming bug and asserts.
template <typename T, typename E = Error>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}
  Result(E error) : v_(std::move(error)) {}

  bool ok() const { return v_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & { assert(ok()); return std::get<0>(v_); }
  const T& value() const& { assert(ok()); return std::get<0>(v_); }
  T&& value() && { assert(ok()); return std::get<0>(std::move(v_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  const E& error() const { assert(!ok()); return std::get<1>(v_); }

 private:
  std::variant<T, E> v_;
};

// Result<void>: success or an Error.
class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)) {}
  static Status Ok() { return {}; }

  bool ok() const { return !error_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Error& error() const { assert(!ok()); return *error_; }

 private:
  std::optional<Error> error_;
};

}  // namespace pagoda

// Propagate an error from a Status or Result expression.
#define PAGODA_CONCAT_INNER(a, b) a##b
#define PAGODA_CONCAT(a, b) PAGODA_CONCAT_INNER(a, b)
#define PAGODA_RETURN_IF_ERROR(expr)                   \
  do {                                                 \
    auto&& pagoda_status_ = (expr);                    \
    if (!pagoda_status_.ok()) return pagoda_status_.error(); \
  } while (0)
// PAGODA_ASSIGN_OR_RETURN(auto x, compute()) declares x from a Result.
#define PAGODA_ASSIGN_OR_RETURN(decl, expr) \
  PAGODA_ASSIGN_OR_RETURN_IMPL(PAGODA_CONCAT(pagoda_result_, __LINE__), decl, expr)
#define PAGODA_ASSIGN_OR_RETURN_IMPL(tmp, decl, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.error();                  \
  decl = std::move(tmp).value()
