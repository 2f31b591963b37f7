// Qwen3-Coder XML tool calls:
//   <tool_call>
//   <function=get_weather>
//   <parameter=city>
//   Paris
//   </parameter>
//   </function>
//   </tool_call>
// A parameter's value is the text between its tags (one leading and one
// trailing newline dropped); a missing </parameter> ends it at the next
// <parameter=, </function> or the end of the output, as in vLLM. Values are
// typed by the request's tool schemas as vLLM's qwen3_coder parser does:
// "null" (any case) → null; string types or an unknown parameter → the text;
// int* / uint* / long* / short* / unsigned* → an integer, num* / float* → a
// number (an integer when whole), boolean / bool / binary → "true" (any case)
// or false, object / array / dict* / list* → JSON, anything else → a Python
// literal; text that does not convert stays a string. A call is announced at
// its <function=name>, and its arguments grow by one member per parameter.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>

#include "openai/tools/json_value_stream.h"
#include "openai/tools/python_literal.h"
#include "openai/tools/tool_parser.h"
#include "openai/wire/bounded_json.h"

namespace pagoda::openai {

namespace {

constexpr std::string_view kOpen = "<tool_call>";
constexpr std::string_view kClose = "</tool_call>";
constexpr std::string_view kFunction = "<function=";
constexpr std::string_view kFunctionEnd = "</function>";
constexpr std::string_view kParameter = "<parameter=";
constexpr std::string_view kParameterEnd = "</parameter>";

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_json_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_json_space(s.back())) s.remove_suffix(1);
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return out;
}

// The schema type of `param` in `properties` ("string" when unstated; the
// first non-null type of a type list).
std::string param_type(const Json& properties, const std::string& param) {
  const Json& schema = properties[param];
  if (!schema.is_object() || !schema.contains("type")) return "string";
  const Json& type = schema["type"];
  if (type.is_string()) return lower(trim(type.get<std::string>()));
  if (type.is_array()) {
    for (const auto& t : type) {
      if (t.is_string() && t != "null") return lower(trim(t.get<std::string>()));
    }
  }
  return "string";
}

Json typed_value(const std::string& text, const Json& properties, const std::string& param) {
  if (lower(text) == "null") return nullptr;
  if (!properties.is_object() || !properties.contains(param)) return text;
  const std::string type = param_type(properties, param);
  auto starts = [&](std::string_view p) { return type.starts_with(p); };
  if (type == "string" || type == "str" || type == "text" || type == "varchar" || type == "char" ||
      type == "enum") {
    return text;
  }
  const std::string_view t = trim(text);
  if (starts("int") || starts("uint") || starts("long") || starts("short") || starts("unsigned")) {
    int64_t value = 0;
    const char* begin = t.data() + (t.starts_with('+') ? 1 : 0);
    auto [end, ec] = std::from_chars(begin, t.data() + t.size(), value);
    if (!t.empty() && ec == std::errc() && end == t.data() + t.size()) return value;
    return text;
  }
  if (starts("num") || starts("float")) {
    double value = 0;
    const char* begin = t.data() + (t.starts_with('+') ? 1 : 0);
    auto [end, ec] = std::from_chars(begin, t.data() + t.size(), value);
    if (t.empty() || ec != std::errc() || end != t.data() + t.size() || !std::isfinite(value))
      return text;
    if (value == std::trunc(value) && std::fabs(value) < 9.0e18) return static_cast<int64_t>(value);
    return value;
  }
  if (type == "boolean" || type == "bool" || type == "binary") return lower(text) == "true";
  if (type == "object" || type == "array" || type == "arr" || starts("dict") || starts("list")) {
    auto parsed = parse_bounded_json(text, "parameter");
    if (parsed.ok()) return std::move(parsed.value());
  }
  if (auto literal = parse_python_literal(text)) return std::move(*literal);
  return text;
}

// The `properties` of tool `name` in the request's tools (its parameters when
// they have none), or null.
Json tool_properties(const Json& tools, const std::string& name) {
  if (!tools.is_array()) return nullptr;
  for (const auto& tool : tools) {
    if (!tool.is_object() || !tool.contains("function")) continue;
    const Json& fn = tool["function"];
    if (!fn.is_object() || fn.value("name", Json()) != name) continue;
    const Json params = fn.value("parameters", Json());
    if (params.is_object() && params.contains("properties")) return params["properties"];
    return params.is_object() ? params : Json();
  }
  return nullptr;
}

class Qwen3CoderStream : public ToolCallStream {
 public:
  explicit Qwen3CoderStream(Json tools) : tools_(std::move(tools)) {}

  ToolStreamDelta feed(std::string_view text) override {
    buffer_ += text;
    ToolStreamDelta delta;
    while (step(delta, /*final=*/false)) {
    }
    return delta;
  }

  ToolStreamDelta finish() override {
    ToolStreamDelta delta;
    while (step(delta, /*final=*/true)) {
    }
    switch (mode_) {
      case Mode::kCallStart:
        content_.add(call_text_ + buffer_, delta.content);
        break;
      case Mode::kParams:
        close_function(delta);
        break;
      case Mode::kContent:
        content_.add(buffer_, delta.content);
        break;
      default:
        break;
    }
    buffer_.clear();
    if (num_calls_ == 0) content_.flush(delta.content);
    return delta;
  }

 private:
  enum class Mode { kContent, kCallStart, kParams, kValue, kAfterFunction };

  // One step over buffer_; false when it needs more text.
  bool step(ToolStreamDelta& delta, bool final) {
    switch (mode_) {
      case Mode::kContent: {
        const size_t open = buffer_.find(kOpen);
        const size_t end =
            open == std::string::npos ? buffer_.size() - partial_tag_suffix(buffer_, kOpen) : open;
        content_.add(std::string_view(buffer_).substr(0, end), delta.content);
        if (open == std::string::npos) {
          buffer_.erase(0, end);
          return false;
        }
        call_text_ = kOpen;
        buffer_.erase(0, open + kOpen.size());
        mode_ = Mode::kCallStart;
        return true;
      }
      case Mode::kCallStart:
        return step_call_start(delta, final);
      case Mode::kParams:
        return step_params(delta, final);
      case Mode::kValue:
        return step_value(delta, final);
      case Mode::kAfterFunction: {
        const size_t close = buffer_.find(kClose);
        if (close == std::string::npos) {
          buffer_.erase(0, buffer_.size() - partial_tag_suffix(buffer_, kClose));
          return false;
        }
        buffer_.erase(0, close + kClose.size());
        mode_ = Mode::kContent;
        return true;
      }
    }
    return false;
  }

  // <tool_call> then <function=NAME>: announces the call.
  bool step_call_start(ToolStreamDelta& delta, bool final) {
    size_t i = 0;
    while (i < buffer_.size() && is_json_space(buffer_[i])) ++i;
    const std::string_view rest = std::string_view(buffer_).substr(i);
    if (rest.size() < kFunction.size() && kFunction.starts_with(rest) && !final) return false;
    if (!rest.starts_with(kFunction)) return reject(delta);
    const size_t close = rest.find('>');
    const std::string_view name =
        rest.substr(kFunction.size(), close == std::string_view::npos ? std::string_view::npos
                                                                      : close - kFunction.size());
    if (name.find_first_of("<\n") != std::string_view::npos) return reject(delta);
    if (close == std::string_view::npos) return false;
    if (trim(name).empty()) return reject(delta);
    content_.drop();  // whitespace before a call only separates it
    function_ = std::string(trim(name));
    properties_ = tool_properties(tools_, function_);
    delta.begin_call(num_calls_++, new_tool_call_id(), function_);
    num_params_ = 0;
    buffer_.erase(0, i + close + 1);
    call_text_.clear();
    mode_ = Mode::kParams;
    return true;
  }

  // The text after <tool_call> is no call: the tag is content, and the text
  // after it is read as content again.
  bool reject(ToolStreamDelta& delta) {
    content_.add(call_text_, delta.content);
    call_text_.clear();
    mode_ = Mode::kContent;
    return true;
  }

  // Between parameters: <parameter=NAME>, or </function> (or </tool_call>).
  bool step_params(ToolStreamDelta& delta, bool final) {
    size_t i = 0;
    while (i < buffer_.size() && is_json_space(buffer_[i])) ++i;
    const std::string_view rest = std::string_view(buffer_).substr(i);
    for (std::string_view end : {kFunctionEnd, kClose}) {
      if (rest.starts_with(end)) {
        buffer_.erase(0, i + (end == kFunctionEnd ? end.size() : 0));
        close_function(delta);
        return true;
      }
    }
    if (rest.starts_with(kParameter)) {
      const size_t close = rest.find('>');
      if (close == std::string_view::npos) return false;
      param_ = std::string(trim(rest.substr(kParameter.size(), close - kParameter.size())));
      buffer_.erase(0, i + close + 1);
      mode_ = Mode::kValue;
      return true;
    }
    const bool partial =
        kFunctionEnd.starts_with(rest) || kClose.starts_with(rest) || kParameter.starts_with(rest);
    if (partial && !final) return false;
    if (rest.empty()) return false;
    // Stray text between parameters is dropped, up to the next tag.
    const size_t next = rest.find('<', 1);
    buffer_.erase(0, next == std::string_view::npos ? buffer_.size() : i + next);
    return true;
  }

  // A parameter's value up to </parameter>, <parameter=, </function> or </tool_call>.
  bool step_value(ToolStreamDelta& delta, bool final) {
    size_t end = std::string::npos;
    size_t skip = 0;
    for (std::string_view tag : {kParameterEnd, kParameter, kFunctionEnd, kClose}) {
      const size_t at = buffer_.find(tag);
      if (at < end) {
        end = at;
        skip = tag == kParameterEnd ? tag.size() : 0;
      }
    }
    if (end == std::string::npos) {
      if (!final) return false;
      end = buffer_.size();
    }
    std::string_view value = std::string_view(buffer_).substr(0, end);
    if (value.starts_with('\n')) value.remove_prefix(1);
    if (value.ends_with('\n')) value.remove_suffix(1);
    add_param(delta, typed_value(std::string(value), properties_, param_));
    buffer_.erase(0, end + skip);
    mode_ = Mode::kParams;
    return true;
  }

  void add_param(ToolStreamDelta& delta, const Json& value) {
    std::string member = num_params_++ == 0 ? "{" : ", ";
    member += dump_json(Json(param_)) + ": " + normalized_json(dump_json(value));
    delta.add_arguments(num_calls_ - 1, member);
  }

  void close_function(ToolStreamDelta& delta) {
    delta.add_arguments(num_calls_ - 1, num_params_ == 0 ? "{}" : "}");
    mode_ = Mode::kAfterFunction;
  }

  const Json tools_;
  std::string buffer_;  // text not yet consumed
  Mode mode_ = Mode::kContent;
  std::string call_text_;  // kCallStart: "<tool_call>", content if no call follows
  std::string function_;
  Json properties_;
  std::string param_;
  int num_params_ = 0;
  int num_calls_ = 0;
  ContentHoldBack content_;
};

class Qwen3CoderParser : public ToolParser {
 public:
  const char* name() const override { return "qwen3_coder"; }
  std::unique_ptr<ToolCallStream> start(const Json& tools) const override {
    return std::make_unique<Qwen3CoderStream>(tools);
  }
};

}  // namespace

std::unique_ptr<ToolParser> make_qwen3_coder_tool_parser() {
  return std::make_unique<Qwen3CoderParser>();
}

}  // namespace pagoda::openai
