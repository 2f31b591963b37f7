// Tokenizer::token_bytes (the bytes a token adds to the output, which
// structured output matches) against decode() on byte-level BPE,
// SentencePiece (tokenizer.json and tokenizer.model) and GGUF vocabularies.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/utf8.h"
#include "tokenizer/tokenizer.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;
const fs::path kShared = fs::path(PAGODA_SHARED_DIR) / "models";

const std::vector<std::string> kTexts = {
    "Hello world, this is a test.",
    "Hello  {\"name\": \"caf\xC3\xA9\", \"n\": [1, 2.5e-3]}\n\ttabs",
    "Hello \xE4\xBD\xA0\xE5\xA5\xBD\xE4\xB8\x96\xE7\x95\x8C \xF0\x9F\x98\x80\xF0\x9F\xA6\x80 rare "
    "\xE1\x9A\xA0",
    "Hello\n\n   indented    spaces <tag> & \"quotes\"",
};

// For every text: the bytes of the tokens after the first one, concatenated,
// are exactly what decoding them after the first one adds.
void check_continuations(const fs::path& path) {
  if (!fs::exists(path)) GTEST_SKIP() << path << " not present";
  auto loaded = Tokenizer::load(path.string());
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  const Tokenizer& tok = **loaded;
  for (const std::string& text : kTexts) {
    std::vector<int32_t> ids = tok.encode(text, /*add_special_tokens=*/false);
    ASSERT_GE(ids.size(), 2u);
    const std::string whole = tok.decode(ids);
    const std::string first = tok.decode(std::vector<int32_t>{ids[0]});
    ASSERT_EQ(whole.compare(0, first.size(), first), 0) << path;
    std::string bytes;
    for (size_t i = 1; i < ids.size(); ++i) bytes += tok.token_bytes(ids[i]);
    EXPECT_EQ(bytes, whole.substr(first.size())) << path << ": " << text;
  }
  // Every token that decodes to valid UTF-8 on its own adds exactly that.
  const int32_t anchor = tok.encode("Hello", false).front();
  const std::string anchor_text = tok.decode(std::vector<int32_t>{anchor});
  int checked = 0;
  for (int32_t id = 0; id < tok.vocab_size(); id += 7) {
    if (tok.is_special(id)) {
      EXPECT_EQ(tok.token_bytes(id), tok.id_to_token(id));
      continue;
    }
    const std::string b = tok.token_bytes(id);
    if (!is_valid_utf8(b)) continue;
    EXPECT_EQ(anchor_text + b, tok.decode(std::vector<int32_t>{anchor, id}))
        << path << " id " << id;
    ++checked;
  }
  EXPECT_GT(checked, tok.vocab_size() / 20);
  EXPECT_EQ(tok.token_bytes(-1), "");
  EXPECT_EQ(tok.token_bytes(tok.vocab_size()), "");
}

TEST(TokenBytes, ByteLevelBpe) {
  check_continuations(kShared / "tokenizers" / "llama3_1");
}
TEST(TokenBytes, ByteLevelBpeQwen) {
  check_continuations(kShared / "tokenizers" / "qwen3");
}
TEST(TokenBytes, SentencePieceJson) {
  check_continuations(kShared / "tokenizers" / "llama2" / "tokenizer.json");
}
TEST(TokenBytes, SentencePieceModel) {
  check_continuations(kShared / "tokenizers" / "llama2" / "tokenizer.model");
}
TEST(TokenBytes, Gguf) {
  check_continuations(kShared / "llama.cpp-vocab-tests" / "ggml-vocab-llama-spm.gguf");
}
TEST(TokenBytes, GgufByteLevel) {
  check_continuations(kShared / "llama.cpp-vocab-tests" / "ggml-vocab-gpt-2.gguf");
}

TEST(TokenBytes, ByteFallbackAndPartialBytesAreRaw) {
  const fs::path path = kShared / "tokenizers" / "llama2" / "tokenizer.json";
  if (!fs::exists(path)) GTEST_SKIP();
  auto tok = std::move(Tokenizer::load(path.string())).value();
  auto id = tok->token_to_id("<0xE2>");
  ASSERT_TRUE(id.has_value());
  EXPECT_EQ(tok->token_bytes(*id), "\xE2");
  auto space = tok->token_to_id("\xE2\x96\x81the");
  ASSERT_TRUE(space.has_value());
  EXPECT_EQ(tok->token_bytes(*space), " the");
}

}  // namespace
}  // namespace pagoda
