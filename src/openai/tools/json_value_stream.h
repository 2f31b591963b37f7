// Reads one JSON value from text that arrives in pieces and writes it back in
// one normalized spelling as soon as each part of it is final, for streaming
// tool-call arguments: whitespace as Python's json.dumps puts it
// ({"a": 1, "b": [true, null]}), strings and numbers byte for byte as written
// (raw control characters inside strings escaped). Nothing written is ever
// taken back; what may still change or be dropped is held: an object member's
// separator and key until its value starts, an array element's separator until
// the element starts, a number or literal until it ends, an escape sequence
// until it is complete.
//
// close() ends the value where the text stopped (the model hit max_tokens) or
// where it turned invalid: it completes the string in progress, drops a member
// or element whose value had not started (or was an unfinished number or
// literal), and closes the open arrays and objects, so that everything written
// is one valid JSON value. Never recursive; nesting deeper than kMaxJsonDepth
// is an error.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace pagoda::openai {

class JsonValueStream {
 public:
  enum class State { kReading, kDone, kError };

  // object_only: the value must be an object (tool-call arguments).
  explicit JsonValueStream(bool object_only = true) : object_only_(object_only) {}

  // Consumes `text` up to the end of the value (all of it while the value is
  // unfinished; leading whitespace is skipped), appending final output to
  // `out`. Returns the bytes consumed; on an error, the bytes before the
  // offending one.
  size_t feed(std::string_view text, std::string& out);

  // Appends what completes the value (see above); nothing if no value started.
  // The state becomes kDone.
  void close(std::string& out);

  State state() const { return state_; }
  bool started() const { return started_; }

 private:
  enum class Expect {
    kValue,       // a value starts next
    kValueOrEnd,  // after '[': a value or ']'
    kKeyOrEnd,    // after '{': a key or '}'
    kKey,         // after ',' in an object
    kColon,       // after a key
    kCommaOrEnd,  // after a value inside a container
    kString,      // inside a value string
    kKeyString,   // inside a key string
    kToken,       // inside a number or literal
  };

  bool step(char c, std::string& out);  // false: c is invalid here
  void start_value(std::string& out);   // writes the held separator/key
  void end_value();
  bool end_token(std::string& out);
  bool string_char(char c, std::string& sink);

  bool object_only_;
  State state_ = State::kReading;
  bool started_ = false;
  Expect expect_ = Expect::kValue;
  std::vector<char> stack_;  // open containers, '{' or '['
  std::string held_;         // separator and key not yet written
  std::string token_;        // number or literal so far
  std::string escape_;       // escape sequence so far ("\\", "\\u12", ...)
};

// `json_text` (one valid JSON value) in JsonValueStream's spelling.
std::string normalized_json(std::string_view json_text);

}  // namespace pagoda::openai
