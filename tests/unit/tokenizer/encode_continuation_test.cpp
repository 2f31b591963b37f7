// Tokenizer::encode_continuation (text that continues earlier text: no
// prefix space or dummy "▁", no BOS) on byte-level BPE, SentencePiece
// (tokenizer.json and tokenizer.model) and GGUF vocabularies: its ids spell
// the text exactly (token_bytes), and split before a space it continues a
// plain encode() as if the text had been encoded whole.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;
const fs::path kShared = fs::path(PAGODA_SHARED_DIR) / "models";

const std::vector<std::string> kTexts = {
    "Hello world, this is a test.",
    "{\"first_name\": \"caf\xC3\xA9\", \"n\": [1, 2.5e-3]}",
    "name\": \"",
    "\", \"last_name\": \"",
    " leading space and  two",
    "\n\t{\"key\": true}",
    "\xE4\xBD\xA0\xE5\xA5\xBD \xF0\x9F\x98\x80 <s> </s> [INST]",
};

std::string spelled(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  std::string s;
  for (int32_t id : ids) s += tok.token_bytes(id);
  return s;
}

void check(const fs::path& path) {
  if (!fs::exists(path)) GTEST_SKIP() << path << " not present";
  auto loaded = Tokenizer::load(path.string());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  const Tokenizer& tok = **loaded;
  for (const std::string& text : kTexts) {
    const std::vector<int32_t> ids = tok.encode_continuation(text);
    ASSERT_FALSE(ids.empty()) << text;
    EXPECT_EQ(spelled(tok, ids), text) << path << ": " << text;
    for (int32_t id : ids) EXPECT_FALSE(tok.is_special(id)) << path << ": " << text;
  }
  // No prefix: "world" is not " world".
  const std::vector<int32_t> word = tok.encode_continuation("world");
  EXPECT_EQ(spelled(tok, word), "world") << path;
  EXPECT_NE(word, tok.encode_continuation(" world")) << path;
  // Split before a space, a continuation goes on exactly where a whole
  // encode() would.
  const std::string whole = "Hello world, this is a test of keys: \"name\" and \"age\".";
  const std::vector<int32_t> all = tok.encode(whole, /*add_special_tokens=*/false);
  int splits = 0;
  for (size_t at = 1; at < whole.size(); ++at) {
    if (whole[at] != ' ') continue;
    std::vector<int32_t> ids = tok.encode(whole.substr(0, at), /*add_special_tokens=*/false);
    const std::vector<int32_t> rest = tok.encode_continuation(whole.substr(at));
    ids.insert(ids.end(), rest.begin(), rest.end());
    EXPECT_EQ(ids, all) << path << ": split at " << at;
    ++splits;
  }
  EXPECT_GT(splits, 5);
}

TEST(EncodeContinuation, ByteLevelBpe) { check(kShared / "tokenizers" / "llama3_1"); }
TEST(EncodeContinuation, ByteLevelBpeQwen) { check(kShared / "tokenizers" / "qwen3"); }
TEST(EncodeContinuation, ByteLevelBpeSmolLM2) { check(kShared / "tokenizers" / "smollm2"); }
TEST(EncodeContinuation, SentencePieceJson) { check(kShared / "tokenizers" / "llama2" / "tokenizer.json"); }
TEST(EncodeContinuation, SentencePieceModel) { check(kShared / "tokenizers" / "llama2" / "tokenizer.model"); }
TEST(EncodeContinuation, SentencePieceJsonMistral) { check(kShared / "tokenizers" / "mistral-v1" / "tokenizer.json"); }
TEST(EncodeContinuation, Gguf) { check(kShared / "llama.cpp-vocab-tests" / "ggml-vocab-llama-spm.gguf"); }
TEST(EncodeContinuation, GgufByteLevel) { check(kShared / "llama.cpp-vocab-tests" / "ggml-vocab-gpt-2.gguf"); }

}  // namespace
}  // namespace pagoda
