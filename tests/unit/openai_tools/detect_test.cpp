// Picking the parser from real chat templates, and the parser names.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "openai/tools/tool_parser.h"

namespace pagoda::openai {
namespace {

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
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", "mistral"},
      {"llama-cpp-deepseek-r1.jinja", "deepseek_v3"},
      {"deepseek-ai-DeepSeek-R1-Distill-Llama-8B.jinja", "deepseek_v3"},
      {"google-gemma-2-2b-it.jinja", ""},
      {"microsoft-Phi-3.5-mini-instruct.jinja", ""},
  };
  for (const auto& [file, want] : cases) {
    const std::string text = read_file(dir + file);
    ASSERT_FALSE(text.empty()) << file;
    auto parser = detect_tool_parser(text);
    EXPECT_EQ(parser ? parser->name() : "", std::string(want)) << file;
  }
}

// Formats with no template among the real ones: the markers the templates
// of those models write.
TEST(DetectToolParser, Markers) {
  auto name = [](std::string_view text) {
    auto parser = detect_tool_parser(text);
    return std::string(parser ? parser->name() : "");
  };
  EXPECT_EQ(name("<tool_call>\n<function=example_function_name>\n<parameter=p>"), "qwen3_coder");
  EXPECT_EQ(name("<|header_start|>... [func_name1(param_name1=value1)]"), "pythonic");
  EXPECT_EQ(name("<|start_header_id|>... [func_name1(params_name1=params_value1)]"), "pythonic");
}

TEST(MakeToolParser, NamesAndAliases) {
  EXPECT_FALSE(make_tool_parser("nope").ok());
  for (const auto& name : tool_parser_names()) EXPECT_TRUE(make_tool_parser(name).ok()) << name;
  EXPECT_STREQ(make_tool_parser("llama4_pythonic").value()->name(), "pythonic");
  EXPECT_STREQ(make_tool_parser("llama4_json").value()->name(), "llama3_json");
}

}  // namespace
}  // namespace pagoda::openai
