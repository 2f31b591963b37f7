// Pythonic tool calls (Llama 3.2 / Llama 4, vLLM's "pythonic" and
// "llama4_pythonic"): the message is a Python list of calls with keyword
// arguments whose values are literals,
//   [get_weather(city="SF", unit='c'), other(x=1, opts={"a": [1, None]})]
// optionally between <|python_start|> and <|python_end|>. Whether a message is
// calls is decided by its start: "[" then a name then "(". A call is announced
// at its "(", and its arguments object grows by one "key": value at each
// complete keyword argument. Text after the list is content; after a call that
// turns invalid (a positional argument, a value that is not a literal) the
// rest of the message is dropped.
#include <string>
#include <vector>

#include "openai/tools/json_value_stream.h"
#include "openai/tools/python_literal.h"
#include "openai/tools/tool_parser.h"

namespace pagoda::openai {

namespace {

constexpr std::string_view kStart = "<|python_start|>";
constexpr std::string_view kEnd = "<|python_end|>";

struct PyCall {
  std::string name;
  std::string arguments;  // the JSON text so far: "{" + members (+ "}" once closed)
  bool closed = false;
};

struct PyCalls {
  std::vector<PyCall> calls;
  PyRead status = PyRead::kIncomplete;  // kOk: the list ended at `end`
  size_t end = 0;
};

void add_argument(PyCall& call, const std::string& key, const Json& value) {
  if (call.arguments.size() > 1) call.arguments += ", ";
  call.arguments += dump_json(Json(key)) + ": " + normalized_json(dump_json(value));
}

// Reads the list at the start of `text` as far as it goes; `final`: the text
// is the whole output, so an argument whose value ends it is complete.
PyCalls read_calls(std::string_view text, bool final) {
  PyCalls out;
  PythonCursor cur(text);
  auto fail = [&](PyRead r) {
    out.status = r;
    return out;
  };
  if (PyRead r = cur.expect('['); r != PyRead::kOk) return fail(r);
  for (;;) {
    PyCall call;
    if (PyRead r = cur.identifier(call.name); r != PyRead::kOk) return fail(r);
    if (PyRead r = cur.expect('('); r != PyRead::kOk) return fail(r);
    call.arguments.assign(1, '{');
    out.calls.push_back(call);
    PyCall& c = out.calls.back();
    for (;;) {
      cur.skip_space();
      if (cur.at_end()) return fail(PyRead::kIncomplete);
      if (cur.peek() == ')') break;
      std::string key;
      Json value;
      if (PyRead r = cur.identifier(key); r != PyRead::kOk) return fail(r);
      if (PyRead r = cur.expect('='); r != PyRead::kOk) return fail(r);
      if (PyRead r = cur.literal(value); r != PyRead::kOk) return fail(r);
      cur.skip_space();
      if (cur.at_end()) {
        if (final) add_argument(c, key, value);
        return fail(PyRead::kIncomplete);
      }
      if (cur.peek() != ',' && cur.peek() != ')') return fail(PyRead::kError);
      add_argument(c, key, value);
      if (cur.peek() == ',') cur.expect(',');
    }
    cur.expect(')');
    c.arguments += "}";
    c.closed = true;
    cur.skip_space();
    if (cur.at_end()) return fail(PyRead::kIncomplete);
    if (cur.peek() == ']') break;
    if (PyRead r = cur.expect(','); r != PyRead::kOk) return fail(r);
  }
  cur.expect(']');
  out.status = PyRead::kOk;
  out.end = cur.pos();
  return out;
}

class PythonicStream : public ToolCallStream {
 public:
  ToolStreamDelta feed(std::string_view text) override {
    ToolStreamDelta delta;
    buffer_ += text;
    step(delta, /*final=*/false);
    return delta;
  }

  ToolStreamDelta finish() override {
    ToolStreamDelta delta;
    step(delta, /*final=*/true);
    if (mode_ == Mode::kCalls) close_calls(delta);
    if (mode_ == Mode::kUndecided || mode_ == Mode::kContent) delta.content += buffer_;
    buffer_.clear();
    return delta;
  }

 private:
  enum class Mode { kUndecided, kCalls, kAfterList, kContent, kDropped };

  void step(ToolStreamDelta& delta, bool final) {
    if (mode_ == Mode::kUndecided) decide(final);
    if (mode_ == Mode::kAfterList) after_list(final);
    if (mode_ == Mode::kContent) {
      delta.content += buffer_;
      buffer_.clear();
    }
    if (mode_ != Mode::kCalls) return;
    // A space at the end of the output lets a final number or name complete.
    const PyCalls read = read_calls(final ? list_() + " " : list_(), final);
    emit(read, delta);
    if (read.status == PyRead::kError) {
      close_calls(delta);
      mode_ = Mode::kDropped;
      buffer_.clear();
    } else if (read.status == PyRead::kOk) {
      buffer_.erase(0, list_at_ + read.end);
      mode_ = Mode::kAfterList;
      step(delta, final);
    }
  }

  // After the list: space and <|python_end|> are dropped, the rest is content.
  void after_list(bool final) {
    size_t i = 0;
    while (i < buffer_.size() && is_json_space(buffer_[i])) ++i;
    const std::string_view rest = std::string_view(buffer_).substr(i);
    if (!final && kEnd.starts_with(rest)) return;  // wait: may be <|python_end|>
    buffer_.erase(0, rest.starts_with(kEnd) ? i + kEnd.size() : i);
    mode_ = Mode::kContent;
  }

  // Calls or content, from the start of the message.
  void decide(bool final) {
    size_t i = 0;
    while (i < buffer_.size() && is_json_space(buffer_[i])) ++i;
    std::string_view head = std::string_view(buffer_).substr(i);
    if (head.starts_with(kStart)) {
      i += kStart.size();
      while (i < buffer_.size() && is_json_space(buffer_[i])) ++i;
      head = std::string_view(buffer_).substr(i);
    } else if (!head.empty() && kStart.starts_with(head) && !final) {
      return;
    }
    if (head.empty() && !final) return;
    if (head.empty() || head.front() != '[') {
      mode_ = Mode::kContent;
      return;
    }
    const PyCalls read = read_calls(final ? std::string(head) + " " : std::string(head), final);
    if (!read.calls.empty()) {
      list_at_ = i;
      mode_ = Mode::kCalls;
    } else if (read.status == PyRead::kError || final) {
      mode_ = Mode::kContent;
    }
  }

  std::string list_() const { return buffer_.substr(list_at_); }

  // Announces new calls and writes the arguments text each has gained.
  void emit(const PyCalls& read, ToolStreamDelta& delta) {
    for (size_t k = 0; k < read.calls.size(); ++k) {
      const PyCall& call = read.calls[k];
      if (k == sent_.size()) {
        delta.begin_call(static_cast<int>(k), new_tool_call_id(), call.name);
        sent_.push_back(0);
      }
      delta.add_arguments(static_cast<int>(k), std::string_view(call.arguments).substr(sent_[k]));
      sent_[k] = call.arguments.size();
      closed_ = k + 1 == read.calls.size() ? call.closed : closed_;
    }
  }

  // The last call, cut off: closes its arguments object.
  void close_calls(ToolStreamDelta& delta) {
    if (!sent_.empty() && !closed_) delta.add_arguments(static_cast<int>(sent_.size()) - 1, "}");
    closed_ = true;
  }

  Mode mode_ = Mode::kUndecided;
  std::string buffer_;        // the message so far (kCalls) or text not yet released
  size_t list_at_ = 0;        // where the list starts in buffer_
  std::vector<size_t> sent_;  // bytes of each call's arguments sent
  bool closed_ = false;       // the last announced call's arguments are closed
};

class PythonicParser : public ToolParser {
 public:
  const char* name() const override { return "pythonic"; }
  std::unique_ptr<ToolCallStream> start(const Json&) const override {
    return std::make_unique<PythonicStream>();
  }
};

}  // namespace

std::unique_ptr<ToolParser> make_pythonic_tool_parser() {
  return std::make_unique<PythonicParser>();
}

}  // namespace pagoda::openai
