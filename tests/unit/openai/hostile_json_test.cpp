// Issue 23's parsing defects, each reproduced: JSON nested 150,000 levels
// inside a tool call's `arguments` string (a SIGSEGV through every chat
// template), 1e999 (a 500), a body followed by "\0{garbage" (accepted), and
// 100k unknown keys (quadratic: 20 s and more). Plus the parser's contract.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "fake_service.h"
#include "openai/chat_messages.h"
#include "openai/tools/tool_parser.h"
#include "openai/wire/bounded_json.h"

namespace pagoda::openai {
namespace {

using json = nlohmann::ordered_json;

// {"x": [[[ ... ]]]}: `depth` levels in all.
std::string deep_json(int depth) {
  return "{\"x\": " + std::string(depth - 1, '[') + std::string(depth - 1, ']') + "}";
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

TEST(BoundedJson, ParsesLikeNlohmannAndKeepsKeyOrder) {
  const std::string text =
      R"({"b": [1, -2, 3.5, 18446744073709551615, true, null, "s\u00e9"], "a": {"z": {}, "y": []}})";
  auto value = parse_bounded_json(text, "body");
  ASSERT_TRUE(value.ok()) << value.error().message;
  EXPECT_EQ(value.value(), json::parse(text));
  EXPECT_EQ(value->dump(), json::parse(text).dump());  // same order: b before a, z before y
}

TEST(BoundedJson, DuplicateKeysKeepFirstPositionAndLastValue) {
  // Below and above the size where the hash index takes over.
  for (int n : {3, 40}) {
    std::string text = "{";
    for (int i = 0; i < n; ++i) text += "\"k" + std::to_string(i) + "\": " + std::to_string(i) + ",";
    text += "\"k1\": \"again\"}";
    auto value = parse_bounded_json(text, "body");
    ASSERT_TRUE(value.ok()) << value.error().message;
    ASSERT_EQ(value->size(), static_cast<size_t>(n));
    EXPECT_EQ(value->begin().key(), "k0");
    EXPECT_EQ((std::next(value->begin())).key(), "k1");
    EXPECT_EQ((*value)["k1"], "again");
    EXPECT_EQ((*value)["k" + std::to_string(n - 1)], n - 1);
  }
}

TEST(BoundedJson, ErrorsNameTheProblem) {
  auto message = [](std::string_view text, JsonLimits limits = {}) {
    auto value = parse_bounded_json(text, "request body", limits);
    EXPECT_FALSE(value.ok()) << text;
    return value.ok() ? std::string() : value.error().message;
  };
  EXPECT_EQ(message(R"({"a": 1e999})"), "request body has a number out of range (byte offset 11)");
  EXPECT_EQ(message(R"({"a": -1e999})"),
            "request body has a number out of range (byte offset 12)");
  EXPECT_EQ(message(std::string("{\"a\": 1}\0{garbage", 17)),
            "request body contains a NUL byte (byte offset 8)");
  EXPECT_EQ(message(R"({"a": 1} x)"), "request body is not valid JSON (byte offset 10)");
  EXPECT_EQ(message(deep_json(70)), "request body nests 70 levels deep; at most 64 are allowed");
  EXPECT_EQ(message(deep_json(5), JsonLimits{4, 100}),
            "request body nests 5 levels deep; at most 4 are allowed");
  EXPECT_EQ(message(R"({"a": 1, "b": 2, "c": 3})", JsonLimits{64, 2}),
            "request body has an object with more than 2 keys");
  EXPECT_TRUE(parse_bounded_json(deep_json(64), "body").ok());
  EXPECT_TRUE(parse_bounded_json(R"({"a": 1e308, "b": "\u0000"})", "body").ok());
}

TEST(BoundedJson, ManyKeysParseInLinearTime) {
  // The old parser (ordered_json's linear key search) took 20-28 s for 80k.
  std::string text = "{\"prompt\": \"hi\"";
  for (int i = 0; i < 100000; ++i) text += ",\"unknown_key_" + std::to_string(i) + "\": 0";
  text += "}";
  const auto start = std::chrono::steady_clock::now();
  auto value = parse_bounded_json(text, "body", JsonLimits{64, 200000});
  ASSERT_TRUE(value.ok());
  EXPECT_EQ(value->size(), 100001u);
  EXPECT_LT(seconds_since(start), 3.0);  // about 0.05 s in a Release build
  // The default limit refuses it.
  EXPECT_FALSE(parse_bounded_json(text, "body").ok());
}

TEST(BoundedJson, DeepToolCallArgumentsStayAString) {
  const std::string deep = deep_json(150000);
  json messages = json::array(
      {{{"role", "assistant"},
        {"content", nullptr},
        {"tool_calls",
         json::array({{{"id", "c"}, {"function", {{"name", "f"}, {"arguments", deep}}}}})}}});
  auto out = normalize_messages(messages);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(out.value()[0]["tool_calls"][0]["function"]["arguments"], deep);
  // Model output as deep as that is no tool call (and no crash).
  EXPECT_FALSE(parse_tool_call_json("{\"name\": \"f\", \"arguments\": " + deep + "}").has_value());
}

// A service over the fake engine with `template_file` as its chat template.
std::unique_ptr<testing::FakeService> service_with(const std::string& template_file) {
  testing::FakeEngineOptions options;
  options.tokenizer_path = std::string(PAGODA_SHARED_DIR) + "/models/stories260K";
  options.chat_template_file = template_file;
  options.step_time = std::chrono::microseconds(50);
  options.max_model_len = 1 << 20;
  auto service = testing::FakeService::create(options);
  EXPECT_TRUE(service.ok()) << service.error().message;
  return service.ok() ? std::move(service.value()) : nullptr;
}

TEST(HostileRequests, DeepArgumentsThroughEveryChatTemplate) {
  // 150,000 levels inside a string: a 300 KB body that crashed the server.
  json body = {
      {"messages",
       json::array({{{"role", "user"}, {"content", "hi"}},
                    {{"role", "assistant"},
                     {"content", nullptr},
                     {"tool_calls", json::array({{{"id", "c1"},
                                                  {"type", "function"},
                                                  {"function",
                                                   {{"name", "f"},
                                                    {"arguments", deep_json(150000)}}}}})}},
                    {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "42"}},
                    {{"role", "user"}, {"content", "and?"}}})},
      {"max_tokens", 2}};
  const std::string text = body.dump();
  int num_templates = 0;
  const auto dir = std::filesystem::path(PAGODA_SHARED_DIR) / "models/tokenizers/chat-templates";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".jinja") continue;
    ++num_templates;
    auto s = service_with(entry.path().string());
    ASSERT_TRUE(s);
    for (const char* path : {"/tokenize", "/v1/chat/completions"}) {
      const int status = s->post(path, text)->status;
      EXPECT_TRUE(status == 200 || status == 400) << entry.path() << " " << path << ": " << status;
    }
  }
  EXPECT_GE(num_templates, 5);
}

TEST(HostileRequests, OverflowingNumbersAndTrailingBytesAre400) {
  auto s = service_with(std::string(PAGODA_SOURCE_DIR) + "/tests/data/server/simple_chat.jinja");
  ASSERT_TRUE(s);
  for (const char* field : {"temperature", "top_p", "max_tokens", "seed", "n", "top_k",
                            "presence_penalty", "logprobs", "priority", "min_tokens"}) {
    EXPECT_EQ(s->post("/v1/completions",
                      std::string(R"({"prompt": "hi", ")") + field + R"(": 1e999})")
                  ->status,
              400)
        << field;
  }
  EXPECT_EQ(s->post("/v1/completions", R"({"prompt": "hi", "max_tokens": 2})")->status, 200);
  EXPECT_EQ(s->post("/v1/completions",
                    std::string("{\"prompt\": \"hi\", \"max_tokens\": 2}\0{garbage", 43))
                ->status,
            400);
}

}  // namespace
}  // namespace pagoda::openai
