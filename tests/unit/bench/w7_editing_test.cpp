// W7 prompts (bench/inproc/w7_editing.h) with the stories260K tokenizer over
// a stand-in source text: as many whole lines as fit input_len, one rename
// per request, the chat renderer when given, and clear refusals.
#include "bench/inproc/w7_editing.h"

#include <gtest/gtest.h>

#include <filesystem>

namespace pagoda::bench {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<Tokenizer> stories_tokenizer() {
  auto t = Tokenizer::load((fs::path(PAGODA_SHARED_DIR) / "models" / "stories260K").string());
  EXPECT_TRUE(t.ok()) << t.error().message;
  return t.ok() ? std::move(t).value() : nullptr;
}

// 100 small functions, numbered.
std::string source() {
  std::string s = "\"\"\"A module.\"\"\"\n\nimport re\n";
  for (int i = 0; i < 100; ++i)
    s += "\n\ndef func_" + std::to_string(i) + "(x):\n    return x + " + std::to_string(i) + "\n";
  return s;
}

TEST(W7Prompts, FillsInputLenWithWholeLinesAndRenamesOneNamePerRequest) {
  auto tok = stories_tokenizer();
  ASSERT_NE(tok, nullptr);
  const int64_t input_len = 400;
  auto w7 = W7Prompts::create(source(), *tok, nullptr, input_len);
  ASSERT_TRUE(w7.ok()) << w7.error().message;
  EXPECT_EQ(w7->first_line(), 6);  // past the docstring and the import
  ASSERT_GT(w7->num_lines(), 5);
  ASSERT_LT(w7->num_lines(), 300);  // not the whole file: it does not fit
  ASSERT_FALSE(w7->names().empty());
  EXPECT_EQ(w7->names()[0], "func_0");

  auto prompts = w7->make(0, 6);
  ASSERT_TRUE(prompts.ok()) << prompts.error().message;
  ASSERT_EQ(prompts->size(), 6u);
  size_t longest = 0;
  for (const auto& p : *prompts) {
    EXPECT_LE(static_cast<int64_t>(p.size()), input_len);
    longest = std::max(longest, p.size());
  }
  // Whole lines until one more would not fit (a line is at most ~20 tokens).
  EXPECT_GE(static_cast<int64_t>(longest), input_len - 40);

  const size_t n = w7->names().size();
  for (size_t i = 0; i < 2; ++i) {
    const std::string text = tok->decode((*prompts)[i]);
    const std::string& name = w7->names()[i % n];
    EXPECT_NE(text.find("rename `" + name + "` to `" + name + "_e" + std::to_string(i) + "`"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("def func_0(x):\n    return x + 0\n"), std::string::npos) << text;
    EXPECT_EQ(text.substr(text.size() - 10), "```python\n") << "ends where the edited text starts";
  }
  // The same numbers give the same prompts.
  auto again = w7->make(3, 2);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[0], (*prompts)[3]);
  EXPECT_EQ((*again)[1], (*prompts)[4]);
  EXPECT_FALSE(w7->make(W7Prompts::kMaxRequests - 1, 2).ok());
}

TEST(W7Prompts, ChatModelsGetTheInstructionThroughTheirTemplate) {
  auto tok = stories_tokenizer();
  ASSERT_NE(tok, nullptr);
  ChatRenderer chat = [](const ChatTemplateInputs& in) -> Result<std::string> {
    return "USER: " + in.messages[0]["content"].get<std::string>() +
           (in.add_generation_prompt ? "\nASSISTANT:" : "");
  };
  auto w7 = W7Prompts::create(source(), *tok, chat, 300);
  ASSERT_TRUE(w7.ok()) << w7.error().message;
  auto prompts = w7->make(0, 1);
  ASSERT_TRUE(prompts.ok());
  EXPECT_LE((*prompts)[0].size(), 300u);
  const std::string text = tok->decode((*prompts)[0], /*skip_special_tokens=*/true);
  EXPECT_LE(text.find("USER: Here is a part of the file"), 1u) << text;
  EXPECT_EQ(text.substr(text.size() - 10), "ASSISTANT:") << text;

  ChatRenderer broken = [](const ChatTemplateInputs&) -> Result<std::string> {
    return make_error(ErrorCode::kInvalidArgument, "template says no");
  };
  auto refused = W7Prompts::create(source(), *tok, broken, 300);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().message, "template says no");
}

TEST(W7Prompts, RefusesAnInputLenWithoutRoomOrWithoutANameToRename) {
  auto tok = stories_tokenizer();
  ASSERT_NE(tok, nullptr);
  auto tiny = W7Prompts::create(source(), *tok, nullptr, 20);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.error().message.find("--input-len 20 is too short for W7"), std::string::npos)
      << tiny.error().message;
  std::string comments;
  for (int i = 0; i < 50; ++i) comments += "# a comment line\n";
  auto unnamed = W7Prompts::create(comments, *tok, nullptr, 300);
  ASSERT_FALSE(unnamed.ok());
  EXPECT_NE(unnamed.error().message.find("defines no name to rename"), std::string::npos)
      << unnamed.error().message;
}

}  // namespace
}  // namespace pagoda::bench
