// libFuzzer target for the tool-call parsers, which read model output (text a
// prompt can steer). Input: byte 0 picks the parser (tool_parser_names(),
// then tool_choice "required"'s and a named function's, forced_tool_calls.h),
// byte 1 the streaming chunk size (1..64), the rest is the output text. Each
// input is parsed whole and streamed in chunks; beyond no crash, hang or
// runaway memory, the streamed pieces must add up to the whole parse (the
// contract of tool_parser.h): the same content, call names and arguments.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "openai/tools/forced_tool_calls.h"
#include "openai/tools/tool_parser.h"

namespace {

using pagoda::openai::ParsedToolOutput;
using pagoda::openai::ToolParser;
using pagoda::openai::ToolStreamDelta;

const std::vector<std::unique_ptr<ToolParser>>& parsers() {
  static const std::vector<std::unique_ptr<ToolParser>> all = [] {
    std::vector<std::unique_ptr<ToolParser>> v;
    for (const std::string& name : pagoda::openai::tool_parser_names())
      v.push_back(std::move(pagoda::openai::make_tool_parser(name).value()));
    v.push_back(pagoda::openai::make_required_tool_call_parser());
    v.push_back(pagoda::openai::make_named_tool_call_parser("f"));
    return v;
  }();
  return all;
}

// Folds one release into the output built so far.
void fold(ParsedToolOutput& out, const ToolStreamDelta& delta) {
  out.content += delta.content;
  for (const auto& call : delta.calls) {
    if (call.index >= static_cast<int>(out.tool_calls.size())) out.tool_calls.resize(call.index + 1);
    out.tool_calls[call.index].name += call.name;
    out.tool_calls[call.index].arguments += call.arguments;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const ToolParser& parser = *parsers()[data[0] % parsers().size()];
  const size_t chunk = 1 + data[1] % 64;
  const std::string_view text(reinterpret_cast<const char*>(data + 2), size - 2);
  const pagoda::openai::Json tools = pagoda::openai::Json::parse(
      R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
          "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}}}])");

  const ParsedToolOutput whole = pagoda::openai::parse_tool_output(parser, text, tools);
  ParsedToolOutput streamed;
  auto stream = parser.start(tools);
  for (size_t i = 0; i < text.size(); i += chunk) fold(streamed, stream->feed(text.substr(i, chunk)));
  fold(streamed, stream->finish());

  bool same = streamed.content == whole.content && streamed.tool_calls.size() == whole.tool_calls.size();
  for (size_t i = 0; same && i < whole.tool_calls.size(); ++i) {
    same = streamed.tool_calls[i].name == whole.tool_calls[i].name &&
           streamed.tool_calls[i].arguments == whole.tool_calls[i].arguments;
  }
  if (!same) std::abort();  // streaming and the whole parse disagree
  return 0;
}
