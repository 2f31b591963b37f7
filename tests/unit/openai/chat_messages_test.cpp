// Chat messages, tools and tool_choice: normalization for templates and the
// 400s for malformed ones.
#include "openai/chat_messages.h"

#include <gtest/gtest.h>

namespace pagoda::openai {
namespace {

using json = nlohmann::ordered_json;

TEST(ChatMessages, NormalizesForTemplates) {
  json messages = json::parse(R"([
    {"role": "developer", "content": "be brief"},
    {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "name": "u1"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{\"x\": 1}"}},
      {"id": "call_2", "function": {"name": "g", "arguments": "not json"}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "42"}
  ])");
  auto out = normalize_messages(messages);
  ASSERT_TRUE(out.ok()) << out.error().message;
  json want = json::parse(R"([
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "a\nb", "name": "u1"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": {"x": 1}}},
      {"id": "call_2", "function": {"name": "g", "arguments": "not json"}, "type": "function"}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "42"}
  ])");
  EXPECT_EQ(out.value(), want);
}

TEST(ChatMessages, Errors) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {R"([])", "messages"},
      {R"("hi")", "messages"},
      {R"([1])", "messages[0]"},
      {R"([{"content": "x"}])", "messages[0].role"},
      {R"([{"role": "robot", "content": "x"}])", "messages[0].role"},
      {R"([{"role": "user"}])", "messages[0].content"},
      {R"([{"role": "user", "content": null}])", "messages[0].content"},
      {R"([{"role": "user", "content": 5}])", "messages[0].content"},
      {R"([{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}])",
       "messages[0].content[0].type"},
      {R"([{"role": "user", "content": [{"type": "text"}]}])", "messages[0].content[0].text"},
      {R"([{"role": "user", "content": ["x"]}])", "messages[0].content[0]"},
      {R"([{"role": "user", "content": "x"}, {"role": "user", "content": "y", "tool_calls": []}])",
       "messages[1].tool_calls"},
      {R"([{"role": "assistant", "content": "", "tool_calls": [{"function": {"arguments": "{}"}}]}])",
       "messages[0].tool_calls[0].function.name"},
      {R"([{"role": "tool", "content": "x", "tool_call_id": 3}])", "messages[0].tool_call_id"},
  };
  for (const auto& [text, param] : cases) {
    auto out = normalize_messages(json::parse(text));
    ASSERT_FALSE(out.ok()) << text;
    EXPECT_EQ(out.error().param, param) << text << ": " << out.error().message;
    EXPECT_EQ(out.error().status, 400);
  }
  auto image =
      normalize_messages(json::parse(R"([{"role": "user", "content": [{"type": "image_url"}]}])"));
  EXPECT_NE(image.error().message.find("unsupported content part type 'image_url'"),
            std::string::npos);
}

TEST(ToolSelection, Choices) {
  json tools = json::parse(R"([
    {"type": "function", "function": {"name": "a", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "b", "description": "B"}}])");
  auto none_given = select_tools(nullptr, nullptr);
  ASSERT_TRUE(none_given.ok());
  EXPECT_EQ(none_given.value().mode, ToolChoiceMode::kNone);
  EXPECT_TRUE(none_given.value().tools.is_null());

  auto automatic = select_tools(&tools, nullptr);
  EXPECT_EQ(automatic.value().mode, ToolChoiceMode::kAuto);
  EXPECT_EQ(automatic.value().tools, tools);

  json none = "none";
  auto off = select_tools(&tools, &none);
  EXPECT_EQ(off.value().mode, ToolChoiceMode::kNone);
  EXPECT_TRUE(off.value().tools.is_null());

  json required = "required";
  EXPECT_EQ(select_tools(&tools, &required).value().mode, ToolChoiceMode::kRequired);

  json named = json::parse(R"({"type": "function", "function": {"name": "b"}})");
  auto only_b = select_tools(&tools, &named);
  EXPECT_EQ(only_b.value().mode, ToolChoiceMode::kNamed);
  EXPECT_EQ(only_b.value().tools, json::array({tools[1]}));
}

TEST(ToolSelection, Errors) {
  json tools = json::parse(R"([{"type": "function", "function": {"name": "a"}}])");
  const std::vector<std::tuple<json, json, const char*>> cases = {
      {json::parse(R"({"type": "function"})"), nullptr, "tools"},
      {json::parse(R"([{"type": "retrieval"}])"), nullptr, "tools[0].type"},
      {json::parse(R"([{"type": "function", "function": {"name": ""}}])"), nullptr,
       "tools[0].function.name"},
      {json::parse(R"([{"type": "function", "function": {"name": "a", "parameters": []}}])"),
       nullptr, "tools[0].function.parameters"},
      {tools, "sometimes", "tool_choice"},
      {tools, json::parse(R"({"type": "function", "function": {"name": "zzz"}})"), "tool_choice"},
      {tools, json::parse(R"({"type": "function"})"), "tool_choice"},
  };
  for (const auto& [t, choice, param] : cases) {
    auto out = select_tools(&t, choice.is_null() ? nullptr : &choice);
    ASSERT_FALSE(out.ok()) << t << " " << choice;
    EXPECT_EQ(out.error().param, param) << out.error().message;
  }
  json automatic = "auto";
  auto without_tools = select_tools(nullptr, &automatic);
  ASSERT_FALSE(without_tools.ok());
  EXPECT_EQ(without_tools.error().param, "tool_choice");
}

}  // namespace
}  // namespace pagoda::openai
