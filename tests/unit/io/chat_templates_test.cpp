// The chat templates of a folder (transformers' precedence), of a GGUF file,
// and the choice among them.
#include "io/chat_templates.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "io/gguf.h"
#include "io/hf_tokenizer_config.h"
#include "io_test_util.h"

namespace pagoda {
namespace {

using testing::TempDir;
using testing::write_bytes;

TEST(ChatTemplates, FilesReplaceTokenizerConfigTemplates) {
  TempDir tmp;
  const nlohmann::json config = {
      {"chat_template", nlohmann::json::array({{{"name", "default"}, {"template", "D"}},
                                               {{"name", "tool_use"}, {"template", "T"}}})}};
  auto from_config = read_chat_templates(tmp.path(), config);
  ASSERT_TRUE(from_config.ok()) << from_config.error().message;
  EXPECT_EQ(*from_config, (NamedChatTemplates{{"default", "D"}, {"tool_use", "T"}}));
  EXPECT_EQ(pick_chat_template(*from_config, "", /*has_tools=*/true, "here").value(), "T");

  write_bytes(tmp.path() / "additional_chat_templates" / "rag.jinja", "R");
  auto from_files = read_chat_templates(tmp.path(), config);
  ASSERT_TRUE(from_files.ok()) << from_files.error().message;
  EXPECT_EQ(*from_files, (NamedChatTemplates{{"rag", "R"}}));
  auto none = pick_chat_template(*from_files, "", false, "'dir'");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.error().message.find("'dir' has several chat templates and no 'default' (rag)"),
            std::string::npos)
      << none.error().message;
}

TEST(ChatTemplates, GgufMetadata) {
  const std::string path =
      testing::shared_path("models/llama.cpp-vocab-tests/ggml-vocab-phi-3.gguf");
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "absent: " << path;
  auto file = GgufFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().message;
  const NamedChatTemplates templates = gguf_chat_templates(**file);
  ASSERT_FALSE(templates.empty());
  EXPECT_EQ(templates.front().first, "default");
  EXPECT_EQ(templates.front().second, (*file)->get_string("tokenizer.chat_template"));
}

TEST(HfTokenizerConfig, NonObjectFilesReadAsEmpty) {
  TempDir tmp;
  write_bytes(tmp.path() / "tokenizer_config.json", "[1, 2]");
  write_bytes(tmp.path() / "special_tokens_map.json", R"({"pad_token": {"content": "<pad>"}})");
  auto files = read_hf_tokenizer_config(tmp.path());
  ASSERT_TRUE(files.ok()) << files.error().message;
  EXPECT_TRUE(files->tokenizer_config.empty());
  EXPECT_EQ(special_token_text(files->special_tokens_map.at("pad_token")), "<pad>");
  EXPECT_EQ(special_token_text(nullptr), std::nullopt);

  write_bytes(tmp.path() / "special_tokens_map.json", "{");
  files = read_hf_tokenizer_config(tmp.path());
  ASSERT_FALSE(files.ok());
  EXPECT_NE(files.error().message.find("special_tokens_map.json' is not valid JSON"),
            std::string::npos)
      << files.error().message;
}

TEST(HfTokenizerConfig, SpecialTokenPrecedence) {
  HfTokenizerConfig files;
  files.tokenizer_config = {{"bos_token", "<s>"}, {"pad_token", nullptr}, {"unk_token", 7}};
  files.special_tokens_map = {
      {"bos_token", "<b>"}, {"eos_token", {{"content", "</s>"}}}, {"pad_token", "<p>"},
      {"unk_token", "<unk>"}};
  const SpecialTokenSetting bos = special_token(files, "bos_token");
  EXPECT_FALSE(bos.cleared);
  EXPECT_EQ(bos.text, "<s>");  // tokenizer_config.json first
  EXPECT_EQ(special_token(files, "eos_token").text, "</s>");  // else special_tokens_map.json
  EXPECT_TRUE(special_token(files, "pad_token").cleared);     // an explicit null clears it
  EXPECT_EQ(special_token(files, "pad_token").text, std::nullopt);
  EXPECT_EQ(special_token(files, "unk_token").text, "<unk>");  // not a token text: the map's
  EXPECT_EQ(special_token(files, "mask_token").text, std::nullopt);
}

}  // namespace
}  // namespace pagoda
