#include "bench/openai_stream.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace pagoda::bench {
namespace {

using nlohmann::json;

TEST(RequestBody, CompletionsWithTokenIds) {
  BenchRequest r{{5, 6, 7}, "", 3, 12};
  json j = json::parse(build_request_body(Api::kCompletions, r, {"m", true, 0.0, std::nullopt}));
  EXPECT_EQ(j["model"], "m");
  EXPECT_EQ(j["prompt"], json::array({5, 6, 7}));
  EXPECT_EQ(j["max_tokens"], 12);
  EXPECT_EQ(j["stream"], true);
  EXPECT_EQ(j["stream_options"]["include_usage"], true);
  EXPECT_EQ(j["ignore_eos"], true);
  EXPECT_EQ(j["temperature"], 0.0);
  EXPECT_FALSE(j.contains("messages"));
}

TEST(RequestBody, ChatAndTextPrompts) {
  BenchRequest r{{}, "hello there", 2, 9};
  json chat = json::parse(build_request_body(Api::kChat, r, {"m", false, 0.0, std::nullopt}));
  EXPECT_EQ(chat["messages"][0]["role"], "user");
  EXPECT_EQ(chat["messages"][0]["content"], "hello there");
  EXPECT_EQ(chat["max_completion_tokens"], 9);
  EXPECT_FALSE(chat.contains("ignore_eos"));
  json text = json::parse(build_request_body(Api::kCompletions, r, {"m", true, 0.0, std::nullopt}));
  EXPECT_EQ(text["prompt"], "hello there");
  EXPECT_EQ(api_for_endpoint("/v1/chat/completions"), Api::kChat);
  EXPECT_EQ(api_for_endpoint("/v1/completions"), Api::kCompletions);
}

TEST(StreamAccumulator, TimesChoiceChunksAndTakesUsage) {
  RequestRecord rec;
  rec.start_time = 10.0;
  rec.prompt_len = 4;
  StreamAccumulator acc(rec);
  acc.on_event(R"({"choices":[{"text":""}]})", 10.25);  // empty text still counts (vLLM)
  acc.on_event(R"({"choices":[{"text":"b"}]})", 10.30);
  acc.on_event(R"({"choices":[{"text":"c"}]})", 10.45);
  acc.on_event(R"({"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":5}})", 10.60);
  acc.on_event("[DONE]", 10.61);
  acc.finish();
  EXPECT_TRUE(rec.success);
  EXPECT_DOUBLE_EQ(rec.ttft, 0.25);
  ASSERT_EQ(rec.itl.size(), 2u);
  EXPECT_NEAR(rec.itl[0], 0.05, 1e-12);
  EXPECT_NEAR(rec.itl[1], 0.15, 1e-12);
  EXPECT_NEAR(rec.latency, 0.45, 1e-12);  // the usage chunk does not extend E2EL
  EXPECT_EQ(rec.num_chunks, 3);
  EXPECT_EQ(rec.output_tokens, 5);
  EXPECT_EQ(rec.prompt_len, 9);
  EXPECT_EQ(output_length(rec), 5);
}

TEST(StreamAccumulator, FailuresAreRecorded) {
  RequestRecord none;
  StreamAccumulator a(none);
  a.on_event("[DONE]", 1.0);
  a.finish();
  EXPECT_FALSE(none.success);
  EXPECT_NE(none.error.find("never received"), std::string::npos);

  RequestRecord err;
  StreamAccumulator b(err);
  b.on_event(R"({"choices":[{"text":"a"}]})", 1.0);
  b.on_event(R"({"error":{"message":"boom"}})", 2.0);
  b.finish();
  EXPECT_FALSE(err.success);
  EXPECT_NE(err.error.find("boom"), std::string::npos);

  RequestRecord bad;
  StreamAccumulator c(bad);
  c.on_event("{not json", 1.0);
  c.finish();
  EXPECT_FALSE(bad.success);

  RequestRecord cut;
  StreamAccumulator d(cut);
  d.on_event(R"({"choices":[{"text":"a"}]})", 1.0);
  d.finish("reading the stream: connection reset");
  EXPECT_FALSE(cut.success);
  EXPECT_EQ(cut.error, "reading the stream: connection reset");
}

}  // namespace
}  // namespace pagoda::bench
