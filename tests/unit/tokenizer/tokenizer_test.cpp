// Tokenizer against Python `tokenizers` results committed in
// tests/data/tokenizer/expected.json (make_fixtures.py), plus loading errors,
// special-token configuration and concurrent use.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "io/model_description.h"

namespace pagoda {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const fs::path kData = fs::path(PAGODA_TEST_DATA) / "tokenizer";
const fs::path kShared = fs::path(PAGODA_SHARED_DIR) / "models";

std::unique_ptr<Tokenizer> load(const fs::path& path) {
  auto tok = Tokenizer::load(path.string());
  EXPECT_TRUE(tok.ok()) << (tok.ok() ? "" : tok.error().message);
  return tok.ok() ? std::move(tok).value() : nullptr;
}

json expected() {
  std::ifstream in(kData / "expected.json");
  return json::parse(in);
}

void check_against_expected(const Tokenizer& tok, const json& cases) {
  for (const json& c : cases) {
    std::string text = c["text"];
    auto ids = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(tok.encode(text, false), ids) << text;
    EXPECT_EQ(tok.encode(text, true), c["ids_special"].get<std::vector<int32_t>>()) << text;
    EXPECT_EQ(tok.decode(ids), c["decoded"].get<std::string>()) << text;
    EXPECT_EQ(tok.decode(c["ids_special"].get<std::vector<int32_t>>(), true),
              c["decoded_skip"].get<std::string>())
        << text;
  }
}

TEST(Tokenizer, ByteLevelFixtureMatchesTokenizers) {
  auto tok = load(kData / "bytelevel");
  ASSERT_TRUE(tok);
  check_against_expected(*tok, expected()["bytelevel"]);
}

TEST(Tokenizer, MetaspaceFixtureMatchesTokenizers) {
  auto tok = load(kData / "metaspace" / "tokenizer.json");
  ASSERT_TRUE(tok);
  check_against_expected(*tok, expected()["metaspace"]);
}

TEST(Tokenizer, Stories260KMatchesTokenizers) {
  fs::path folder = kShared / "stories260K";
  if (!fs::exists(folder / "tokenizer.json"))
    GTEST_SKIP() << "optional input " << folder << " absent";
  auto tok = load(folder);
  ASSERT_TRUE(tok);
  check_against_expected(*tok, expected()["stories260K"]);
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
  EXPECT_EQ(tok->bos_token(), "<s>");
  EXPECT_TRUE(tok->add_bos());
  EXPECT_FALSE(tok->add_eos());
  EXPECT_EQ(tok->eos_ids(), std::vector<int32_t>{2});
  EXPECT_TRUE(tok->is_special(1));
  EXPECT_FALSE(tok->is_special(300));
  EXPECT_EQ(tok->token_to_id("<0x0A>"), 13);
  EXPECT_EQ(tok->id_to_token(13), "<0x0A>");
  EXPECT_EQ(tok->id_to_token(100000), "");
  EXPECT_FALSE(tok->chat_template().has_value());
  // A rendered prompt that starts with BOS text gets one BOS, not two.
  std::vector<int32_t> prompt = tok->encode_prompt("<s>Hi");
  EXPECT_EQ(tok->encode("<s>Hi")[1], 1);
  ASSERT_GE(prompt.size(), 2u);
  EXPECT_EQ(prompt[0], 1);
  EXPECT_NE(prompt[1], 1);
  EXPECT_EQ(tok->encode_prompt("Hi"), tok->encode("Hi"));
}

TEST(Tokenizer, InvalidUtf8IsRepairedFirst) {
  auto tok = load(kData / "bytelevel");
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->encode("a\xff"
                        "b",
                        false),
            tok->encode("a\xEF\xBF\xBD"
                        "b",
                        false));
}

TEST(Tokenizer, LoadErrorsNameTheProblem) {
  fs::path dir = fs::temp_directory_path() / "pagoda_tokenizer_test";
  fs::create_directories(dir);
  auto missing = Tokenizer::load((dir / "missing").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("missing"), std::string::npos);

  std::ofstream(dir / "tokenizer.json") << R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})";
  auto wordpiece = Tokenizer::load(dir.string());
  ASSERT_FALSE(wordpiece.ok());  // no [UNK] in the vocabulary
  EXPECT_NE(wordpiece.error().message.find("[UNK]"), std::string::npos);

  std::ofstream(dir / "tokenizer.json") << R"({"model": {"type": "BPE", "vocab": {"a": 0},)"
                                           R"( "merges": ["a b"]}})";
  auto bad_merge = Tokenizer::load(dir.string());
  ASSERT_FALSE(bad_merge.ok());
  EXPECT_NE(bad_merge.error().message.find("'b'"), std::string::npos);

  std::ofstream(dir / "tokenizer.json") << "{\"model\": ";
  auto truncated = Tokenizer::load(dir.string());
  ASSERT_FALSE(truncated.ok());
  EXPECT_EQ(truncated.error().code, ErrorCode::kCorrupt);
  fs::remove_all(dir);

  std::ofstream(dir.string() + ".json") << R"({"model": {"type": "Unigram", "vocab": []}})";
  auto unigram = Tokenizer::load(dir.string() + ".json");
  ASSERT_FALSE(unigram.ok());
  EXPECT_EQ(unigram.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(unigram.error().message.find("Unigram"), std::string::npos);
  fs::remove(dir.string() + ".json");
}

TEST(Tokenizer, GgufSpecialTokensAndTemplate) {
  fs::path path = kShared / "llama.cpp-vocab-tests" / "ggml-vocab-phi-3.gguf";
  if (!fs::exists(path)) GTEST_SKIP() << "optional input " << path << " absent";
  auto tok = load(path);
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->vocab_size(), 32064);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 32000);
  EXPECT_TRUE(tok->add_bos());
  ASSERT_TRUE(tok->chat_template().has_value());
  EXPECT_NE(tok->chat_template()->find("<|assistant|>"), std::string::npos);
  auto end = tok->token_to_id("<|end|>");
  ASSERT_TRUE(end.has_value());
  auto eos = tok->eos_ids();
  EXPECT_NE(std::find(eos.begin(), eos.end(), *end), eos.end());
  // <|end|> is a control token, rstrip as llama.cpp sets it for Phi-3.
  std::vector<int32_t> ids = tok->encode("<|user|>\nHi<|end|>\n", false);
  EXPECT_EQ(ids.back(), *end);
}

// The engine's path (a ModelDescription, no metadata file read twice) loads
// the same tokenizer as a bare path does.
TEST(Tokenizer, FromModelDescriptionMatchesFromPath) {
  const fs::path dir = kShared / "stories260K";
  if (!fs::exists(dir / "config.json")) GTEST_SKIP() << "optional input " << dir << " absent";
  auto description = describe_model(ModelLocation{ModelFormat::kHuggingFace, dir.string(), "s"});
  ASSERT_TRUE(description.ok()) << description.error().message;
  auto from_description = Tokenizer::load(*description);
  ASSERT_TRUE(from_description.ok()) << from_description.error().message;
  auto from_path = load(dir);
  ASSERT_TRUE(from_path);
  const Tokenizer& a = **from_description;
  EXPECT_EQ(a.eos_ids(), from_path->eos_ids());
  EXPECT_EQ(a.bos_id(), from_path->bos_id());
  EXPECT_EQ(a.eos_token(), from_path->eos_token());
  EXPECT_EQ(a.add_bos(), from_path->add_bos());
  EXPECT_EQ(a.chat_template_names(), from_path->chat_template_names());
  EXPECT_EQ(a.encode("Once upon a time"), from_path->encode("Once upon a time"));
}

TEST(Tokenizer, ConcurrentEncodeIsDeterministic) {
  auto tok = load(kData / "bytelevel");
  ASSERT_TRUE(tok);
  std::vector<std::string> texts;
  json all = expected();
  for (const json& c : all["bytelevel"]) texts.push_back(c["text"]);
  std::vector<std::vector<int32_t>> reference;
  for (const std::string& t : texts) reference.push_back(tok->encode(t));
  std::vector<std::thread> threads;
  std::atomic<int> mismatches{0};
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          size_t k = (i + static_cast<size_t>(t)) % texts.size();
          if (tok->encode(texts[k]) != reference[k]) ++mismatches;
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace pagoda
