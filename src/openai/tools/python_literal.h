// A cursor over Python source text that reads literals as JSON values, for the
// pythonic tool-call format ([f(a=1, b='x')]) and qwen3_coder's values of
// untyped parameters: strings ('…', "…", '''…''', """…""", with Python's
// escapes), ints, floats, True/False/None, lists and tuples (→ arrays) and
// dicts with string keys (→ objects), nested up to kMaxJsonDepth. Each read
// says whether it succeeded, ran out of text (the text may still grow) or met
// something that is not a literal.
#pragma once

#include <string>
#include <string_view>

#include "openai/wire/json_util.h"

namespace pagoda::openai {

enum class PyRead { kOk, kIncomplete, kError };

class PythonCursor {
 public:
  explicit PythonCursor(std::string_view text, size_t pos = 0) : s_(text), i_(pos) {}

  size_t pos() const { return i_; }
  bool at_end() const { return i_ >= s_.size(); }
  char peek() const { return s_[i_]; }
  void skip_space();
  // Skips space, then `c`: kOk, kIncomplete at the end, kError on another character.
  PyRead expect(char c);
  // A name ([A-Za-z_][A-Za-z0-9_]*, dots joining several); kIncomplete when
  // the text ends inside it (it may go on).
  PyRead identifier(std::string& out);
  PyRead literal(Json& out, int depth = 0);

 private:
  PyRead string(Json& out);
  PyRead number(Json& out);
  PyRead sequence(char close, Json& out, int depth);
  PyRead dict(Json& out, int depth);

  std::string_view s_;
  size_t i_;
};

// `text` whole as one literal (surrounding space allowed); nullopt if it is not one.
std::optional<Json> parse_python_literal(std::string_view text);

}  // namespace pagoda::openai
