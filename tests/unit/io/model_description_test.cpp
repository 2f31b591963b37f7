// describe_model: a folder's config.json, generation_config.json and
// tokenizer files, or a GGUF file's metadata, read once; the eos rule.
#include "io/model_description.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io_test_util.h"

namespace pagoda {
namespace {

using testing::TempDir;
using testing::write_bytes;

constexpr const char* kConfig =
    R"({"architectures":["LlamaForCausalLM"],"vocab_size":16,"hidden_size":4,)"
    R"("intermediate_size":4,"num_hidden_layers":1,"num_attention_heads":1,)"
    R"("max_position_embeddings":8,"eos_token_id":3})";

Result<ModelDescription> describe_folder(const TempDir& tmp) {
  return describe_model(ModelLocation{ModelFormat::kHuggingFace, tmp.path().string(), "t"});
}

TEST(ModelDescription, FolderWithGenerationEosList) {
  TempDir tmp;
  write_bytes(tmp.path() / "config.json", kConfig);
  write_bytes(tmp.path() / "generation_config.json",
              R"({"temperature": 0.6, "eos_token_id": [7, 3, 5]})");
  write_bytes(tmp.path() / "tokenizer_config.json",
              R"({"bos_token": "<s>", "eos_token": {"content": "</s>"}, "chat_template": "T"})");
  write_bytes(tmp.path() / "special_tokens_map.json", R"({"unk_token": "<unk>"})");
  auto d = describe_folder(tmp);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->location.display_name, "t");
  EXPECT_EQ(d->config.architecture, "llama");
  EXPECT_EQ(d->config.eos_token_ids, std::vector<int32_t>{3});
  EXPECT_EQ(d->generation.temperature, 0.6);
  EXPECT_EQ(d->generation.eos_token_ids, (std::vector<int32_t>{7, 3, 5}));
  EXPECT_EQ(d->eos_token_ids, (std::vector<int32_t>{3, 5, 7}));  // union, sorted, unique
  EXPECT_EQ(d->tokenizer_files.tokenizer_config.at("bos_token"), "<s>");
  EXPECT_EQ(special_token_text(d->tokenizer_files.tokenizer_config.at("eos_token")), "</s>");
  EXPECT_EQ(d->tokenizer_files.special_tokens_map.at("unk_token"), "<unk>");
  EXPECT_EQ(d->tokenizer_files.chat_templates, (NamedChatTemplates{{"default", "T"}}));
  EXPECT_EQ(d->gguf, nullptr);
}

TEST(ModelDescription, FolderWithGenerationEosInt) {
  TempDir tmp;
  write_bytes(tmp.path() / "config.json", kConfig);
  write_bytes(tmp.path() / "generation_config.json", R"({"eos_token_id": 9})");
  write_bytes(tmp.path() / "chat_template.jinja", "J");
  write_bytes(tmp.path() / "tokenizer_config.json", R"({"chat_template": "T"})");
  auto d = describe_folder(tmp);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->generation.eos_token_ids, std::vector<int32_t>{9});
  EXPECT_EQ(d->eos_token_ids, (std::vector<int32_t>{3, 9}));
  // chat_template.jinja replaces tokenizer_config.json's template.
  EXPECT_EQ(d->tokenizer_files.chat_templates, (NamedChatTemplates{{"default", "J"}}));
}

TEST(ModelDescription, OptionalFilesMayBeMissing) {
  TempDir tmp;
  write_bytes(tmp.path() / "config.json", kConfig);
  auto d = describe_folder(tmp);
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_FALSE(d->generation.temperature.has_value());
  EXPECT_TRUE(d->generation.eos_token_ids.empty());
  EXPECT_EQ(d->eos_token_ids, std::vector<int32_t>{3});
  EXPECT_TRUE(d->tokenizer_files.tokenizer_config.empty());
  EXPECT_TRUE(d->tokenizer_files.special_tokens_map.empty());
  EXPECT_TRUE(d->tokenizer_files.chat_templates.empty());
}

TEST(ModelDescription, MissingConfigNamesTheFile) {
  TempDir tmp;
  auto d = describe_folder(tmp);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("config.json"), std::string::npos) << d.error().message;
}

TEST(ModelDescription, BadJsonNamesFileAndField) {
  TempDir tmp;
  write_bytes(tmp.path() / "config.json", kConfig);
  write_bytes(tmp.path() / "generation_config.json", R"({"top_k": "many"})");
  auto d = describe_folder(tmp);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("generation_config.json"), std::string::npos);
  EXPECT_NE(d.error().message.find("'top_k'"), std::string::npos) << d.error().message;

  write_bytes(tmp.path() / "generation_config.json", "{broken");
  d = describe_folder(tmp);
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("generation_config.json: not valid JSON"), std::string::npos)
      << d.error().message;

  std::filesystem::remove(tmp.path() / "generation_config.json");
  write_bytes(tmp.path() / "tokenizer_config.json", "{broken");
  d = describe_folder(tmp);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().code, ErrorCode::kCorrupt);
  EXPECT_NE(d.error().message.find("tokenizer_config.json' is not valid JSON"), std::string::npos)
      << d.error().message;
}

TEST(ModelDescription, GgufFile) {
  auto d = describe_model(
      ModelLocation{ModelFormat::kGguf, testing::data_path("llama_tiny.gguf"), "llama_tiny"});
  ASSERT_TRUE(d.ok()) << d.error().message;
  ASSERT_NE(d->gguf, nullptr);
  EXPECT_EQ(d->config.architecture, "llama");
  EXPECT_EQ(d->generation.eos_token_ids, std::vector<int32_t>{2});
  EXPECT_EQ(d->eos_token_ids, std::vector<int32_t>{2});
  EXPECT_TRUE(d->tokenizer_files.tokenizer_config.empty());
  EXPECT_TRUE(d->tokenizer_files.chat_templates.empty());  // the fixture has none
}

TEST(ModelDescription, MissingGgufFile) {
  auto d = describe_model(ModelLocation{ModelFormat::kGguf, "/nonexistent/m.gguf", "m"});
  ASSERT_FALSE(d.ok());
  EXPECT_NE(d.error().message.find("/nonexistent/m.gguf"), std::string::npos) << d.error().message;
}

}  // namespace
}  // namespace pagoda
