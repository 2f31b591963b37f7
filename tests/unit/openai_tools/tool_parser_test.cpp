// Tool-call parsers: whole outputs, streaming in every split, and picking the
// parser from real chat templates.
#include "openai/tools/tool_parser.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace pagoda::openai {
namespace {

using json = nlohmann::ordered_json;

struct Expected {
  std::string content;
  std::vector<std::pair<std::string, json>> calls;  // name, arguments
};

void expect_parsed(const ParsedToolOutput& got, const Expected& want, const std::string& text) {
  EXPECT_EQ(got.content, want.content) << text;
  ASSERT_EQ(got.tool_calls.size(), want.calls.size()) << text;
  for (size_t i = 0; i < want.calls.size(); ++i) {
    EXPECT_EQ(got.tool_calls[i].name, want.calls[i].first) << text;
    EXPECT_EQ(json::parse(got.tool_calls[i].arguments), want.calls[i].second) << text;
    EXPECT_EQ(got.tool_calls[i].id.rfind("call_", 0), 0u);
  }
}

// Streams `text` in pieces of `piece` bytes and reassembles the deltas.
ParsedToolOutput stream_in_pieces(const ToolParser& parser, const std::string& text, size_t piece) {
  ParsedToolOutput out;
  auto stream = parser.start();
  auto take = [&](ToolStreamDelta d) {
    out.content += d.content;
    for (auto& c : d.calls) {
      if (c.index == static_cast<int>(out.tool_calls.size())) {
        EXPECT_FALSE(c.id.empty());
        EXPECT_FALSE(c.name.empty());
        out.tool_calls.push_back({c.id, c.name, ""});
      } else {
        EXPECT_TRUE(c.id.empty()) << "id only in the first delta of a call";
      }
      ASSERT_LT(c.index, static_cast<int>(out.tool_calls.size()));
      out.tool_calls[c.index].arguments += c.arguments;
    }
  };
  for (size_t i = 0; i < text.size(); i += piece) take(stream->feed(text.substr(i, piece)));
  take(stream->finish());
  return out;
}

void check_all_splits(const ToolParser& parser, const std::string& text, const Expected& want) {
  expect_parsed(parse_tool_output(parser, text), want, text);
  for (size_t piece : {1, 2, 3, 5, 7, 11})
    expect_parsed(stream_in_pieces(parser, text, piece), want, text);
}

TEST(HermesToolParser, Formats) {
  auto parser = make_hermes_tool_parser();
  check_all_splits(*parser, "Hello there, how can I help?", {"Hello there, how can I help?", {}});
  check_all_splits(*parser, "  spaced  \n", {"  spaced  \n", {}});
  check_all_splits(*parser,
                   "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                   "\"Paris\"}}\n</tool_call>",
                   {"", {{"get_weather", json{{"city", "Paris"}}}}});
  check_all_splits(
      *parser,
      "Let me check.\n<tool_call>{\"name\": \"a\", \"arguments\": {\"x\": 1}}</tool_call>\n"
      "<tool_call>{\"name\": \"b\", \"arguments\": {}}</tool_call>",
      {"Let me check.", {{"a", json{{"x", 1}}}, {"b", json::object()}}});
  // Arguments given as a JSON string are kept as that JSON text.
  check_all_splits(*parser,
                   "<tool_call>{\"name\": \"a\", \"arguments\": \"{\\\"q\\\": 2}\"}</tool_call>",
                   {"", {{"a", json{{"q", 2}}}}});
  // An unterminated call at the end still counts when it parses.
  check_all_splits(*parser, "<tool_call>{\"name\": \"a\", \"arguments\": {\"k\": \"v\"}}",
                   {"", {{"a", json{{"k", "v"}}}}});
  // A call that does not parse is content, unchanged.
  check_all_splits(*parser, "<tool_call>not json</tool_call> after",
                   {"<tool_call>not json</tool_call> after", {}});
  check_all_splits(*parser, "<tool_call>{\"name\": ", {"<tool_call>{\"name\": ", {}});
  // A partial opening tag at the end is content.
  check_all_splits(*parser, "x <tool_ca", {"x <tool_ca", {}});
  check_all_splits(*parser, "a < b and <tool> c", {"a < b and <tool> c", {}});
}

TEST(HermesToolParser, HoldsBackPartialTag) {
  auto parser = make_hermes_tool_parser();
  auto stream = parser->start();
  EXPECT_EQ(stream->feed("Sure <tool").content, "Sure");
  auto d = stream->feed("_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>");
  EXPECT_EQ(d.content, "");
  ASSERT_EQ(d.calls.size(), 1u);
  EXPECT_EQ(d.calls[0].name, "f");
  EXPECT_EQ(d.calls[0].arguments, "{}");
}

TEST(Llama3ToolParser, Formats) {
  auto parser = make_llama3_json_tool_parser();
  check_all_splits(*parser, "The answer is 4.", {"The answer is 4.", {}});
  check_all_splits(*parser, "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}",
                   {"", {{"get_weather", json{{"city", "Oslo"}}}}});
  check_all_splits(*parser, "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"a\": [1, 2]}}",
                   {"", {{"f", json{{"a", {1, 2}}}}}});
  check_all_splits(
      *parser,
      " {\"name\": \"f\", \"parameters\": {}}; {\"name\": \"g\", \"arguments\": {\"s\": \"}{\"}}",
      {"", {{"f", json::object()}, {"g", json{{"s", "}{"}}}}});
  // JSON that is not a call, and broken JSON, stay content.
  check_all_splits(*parser, "{\"answer\": 42}", {"{\"answer\": 42}", {}});
  check_all_splits(*parser, "{\"name\": \"f\", \"parameters\": {",
                   {"{\"name\": \"f\", \"parameters\": {", {}});
  check_all_splits(*parser, "<|python", {"<|python", {}});
}

TEST(Llama3ToolParser, StreamsPlainTextAtOnce) {
  auto parser = make_llama3_json_tool_parser();
  auto stream = parser->start();
  EXPECT_EQ(stream->feed("  ").content, "");
  EXPECT_EQ(stream->feed("Hi").content, "  Hi");
  EXPECT_EQ(stream->feed(" there").content, " there");
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(DetectToolParser, RealChatTemplates) {
  const std::string dir = std::string(PAGODA_SHARED_DIR) + "/models/tokenizers/chat-templates/";
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", "hermes"},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", "hermes"},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3_json"},
      {"meta-llama-Llama-3.2-3B-Instruct.jinja", "llama3_json"},
      {"meta-llama-Llama-3.3-70B-Instruct.jinja", "llama3_json"},
      {"google-gemma-2-2b-it.jinja", ""},
      {"microsoft-Phi-3.5-mini-instruct.jinja", ""},
  };
  for (const auto& [file, want] : cases) {
    const std::string text = read_file(dir + file);
    ASSERT_FALSE(text.empty()) << file;
    auto parser = detect_tool_parser(text);
    EXPECT_EQ(parser ? parser->name() : "", std::string(want)) << file;
  }
  EXPECT_FALSE(make_tool_parser("nope").ok());
  EXPECT_EQ(std::string(make_tool_parser("hermes").value()->name()), "hermes");
}

}  // namespace
}  // namespace pagoda::openai
