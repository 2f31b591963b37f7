// libFuzzer target: the input is a template source. It is parsed and, when
// it parses, rendered for a conversation with tools, tool calls and content
// parts. Any outcome but a crash, a hang or runaway memory is fine: errors
// come back as values. Seeds: the shared chat templates.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "jinja/chat_template.h"

namespace {

const pagoda::ChatTemplateInputs& inputs() {
  static const pagoda::ChatTemplateInputs in = [] {
    pagoda::ChatTemplateInputs x;
    x.messages = nlohmann::ordered_json::parse(R"([
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Weather in Paris?"}]},
      {"role": "assistant", "content": null, "reasoning_content": "Use the tool.",
       "tool_calls": [{"id": "call12345", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "call12345", "content": "22C"},
      {"role": "user", "content": "Thanks <3 & bye"}])");
    x.tools = nlohmann::ordered_json::parse(R"([{"type": "function", "function": {
      "name": "get_weather", "description": "Weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                     "required": ["city"]}}}])");
    x.add_generation_prompt = true;
    x.bos_token = "<s>";
    x.eos_token = "</s>";
    x.extra = {{"enable_thinking", true}, {"date_string", "26 Jul 2024"}};
    return x;
  }();
  return in;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view source(reinterpret_cast<const char*>(data), size);
  pagoda::Result<pagoda::ChatTemplate> tmpl = pagoda::ChatTemplate::parse(source);
  if (!tmpl.ok()) return 0;
  (void)tmpl->render(inputs());
  return 0;
}
