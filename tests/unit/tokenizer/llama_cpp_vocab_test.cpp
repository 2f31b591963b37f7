// llama.cpp's tokenizer test vectors through the GGUF loader: every string of
// NAME.gguf.inp, tokenized without special tokens, gives line i of .out.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "tokenizer/tokenizer.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void check_vocab(const std::string& name) {
  fs::path base = fs::path(PAGODA_SHARED_DIR) / "models" / "llama.cpp-vocab-tests" /
                  ("ggml-vocab-" + name + ".gguf");
  if (!fs::exists(base)) GTEST_SKIP() << "optional input " << base << " absent";
  auto tok = Tokenizer::load(base.string());
  ASSERT_TRUE(tok.ok()) << tok.error().message;
  std::string inp = read(base.string() + ".inp");
  std::istringstream out(read(base.string() + ".out"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  size_t pos = 0;
  int n = 0;
  for (size_t next; (next = inp.find(sep, pos)) != std::string::npos;
       pos = next + sep.size(), ++n) {
    std::string text = inp.substr(pos, next - pos);
    std::string line;
    ASSERT_TRUE(std::getline(out, line));
    std::istringstream ids_in(line);
    std::vector<int32_t> expected;
    for (int32_t id; ids_in >> id;) expected.push_back(id);
    EXPECT_EQ((*tok)->encode(text, false, false), expected) << name << " string #" << n;
  }
  EXPECT_GT(n, 40);
}

TEST(LlamaCppVocab, Gpt2) {
  check_vocab("gpt-2");
}
TEST(LlamaCppVocab, LlamaSpm) {
  check_vocab("llama-spm");
}
TEST(LlamaCppVocab, Phi3) {
  check_vocab("phi-3");
}
TEST(LlamaCppVocab, DeepseekCoder) {
  check_vocab("deepseek-coder");
}
TEST(LlamaCppVocab, DeepseekLlm) {
  check_vocab("deepseek-llm");
}
TEST(LlamaCppVocab, BertBge) {
  check_vocab("bert-bge");
}

}  // namespace
}  // namespace pagoda
