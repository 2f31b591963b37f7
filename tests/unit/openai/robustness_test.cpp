// Hostile input: thousands of randomly mutated requests (wrong types, extreme
// values, truncated and corrupted bodies) through the service and the fake
// engine. Every one must get a well-formed answer with a client-error or
// success status: no crash, no hang, no 500.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "fake_service.h"
#include "openai/wire/json_util.h"

namespace pagoda::openai {
namespace {

using json = nlohmann::ordered_json;

json random_value(std::mt19937& rng) {
  static const std::vector<json> pool = {
      nullptr,
      true,
      false,
      0,
      1,
      -1,
      2,
      7,
      20,
      21,
      128,
      129,
      -129,
      0.5,
      -0.5,
      2.5,
      1e308,
      -1e308,
      9223372036854775807LL,
      18446744073709551615ULL,
      "",
      "x",
      "none",
      "auto",
      "required",
      "never",
      "\n",
      std::string(3000, 'a'),
      json::array(),
      json::array({1, 2, 3}),
      json::array({"a", nullptr}),
      json::array({json::array({1, 2}), json::array()}),
      json::object(),
      json{{"type", "text"}},
      json{{"type", "function"}, {"function", {{"name", "f"}}}},
      json{{"1", 5}},
      json{{"include_usage", true}},
      json::array(
          {json{{"role", "user"}, {"content", json::array({json{{"type", "image_url"}}})}}}),
      json::array(
          {json{{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({1})}}}),
  };
  return pool[rng() % pool.size()];
}

std::string mutate(std::mt19937& rng, bool chat) {
  static const std::vector<const char*> fields = {"prompt",
                                                  "messages",
                                                  "model",
                                                  "max_tokens",
                                                  "max_completion_tokens",
                                                  "temperature",
                                                  "top_p",
                                                  "top_k",
                                                  "min_p",
                                                  "n",
                                                  "best_of",
                                                  "seed",
                                                  "stop",
                                                  "stop_token_ids",
                                                  "logit_bias",
                                                  "presence_penalty",
                                                  "frequency_penalty",
                                                  "repetition_penalty",
                                                  "logprobs",
                                                  "top_logprobs",
                                                  "prompt_logprobs",
                                                  "echo",
                                                  "stream",
                                                  "stream_options",
                                                  "ignore_eos",
                                                  "min_tokens",
                                                  "skip_special_tokens",
                                                  "include_stop_str_in_output",
                                                  "use_beam_search",
                                                  "length_penalty",
                                                  "early_stopping",
                                                  "priority",
                                                  "tools",
                                                  "tool_choice",
                                                  "suffix",
                                                  "response_format",
                                                  "add_special_tokens",
                                                  "add_generation_prompt",
                                                  "chat_template_kwargs",
                                                  "user",
                                                  "zzz"};
  json body =
      chat ? json{{"messages", json::array({json{{"role", "user"}, {"content", "SAY: hi there"}}})},
                  {"max_tokens", 8}}
           : json{{"prompt", "SAY: hi there"}, {"max_tokens", 8}};
  const int num_changes = 1 + static_cast<int>(rng() % 3);
  for (int i = 0; i < num_changes; ++i) body[fields[rng() % fields.size()]] = random_value(rng);
  std::string text = body.dump();
  switch (rng() % 8) {
    case 0:  // truncated
      text.resize(rng() % (text.size() + 1));
      break;
    case 1:  // a corrupted byte
      if (!text.empty()) text[rng() % text.size()] = static_cast<char>(rng() % 256);
      break;
    default:
      break;
  }
  return text;
}

TEST(Robustness, RandomlyMutatedRequestsGetWellFormedAnswers) {
  testing::FakeEngineOptions options;
  options.tokenizer_path = std::string(PAGODA_SHARED_DIR) + "/models/stories260K";
  options.chat_template_file =
      std::string(PAGODA_SOURCE_DIR) + "/tests/data/server/simple_chat.jinja";
  options.step_time = std::chrono::microseconds(50);
  options.max_num_seqs = 512;
  ServiceOptions service_options;
  service_options.tool_call_parser = "hermes";
  auto service = testing::FakeService::create(options, service_options);
  ASSERT_TRUE(service.ok()) << service.error().message;

  std::mt19937 rng(20240607);
  std::map<int, int> statuses;
  for (int i = 0; i < 1500; ++i) {
    const bool chat = i % 2 == 1;
    const std::string body = mutate(rng, chat);
    auto answer = (*service)->post(chat ? "/v1/chat/completions" : "/v1/completions", body);
    ASSERT_EQ(answer->num_answers, 1) << "no answer to " << body;
    const int status = answer->status;
    ++statuses[status];
    ASSERT_TRUE(status == 200 || status == 400 || status == 404)
        << status << " for " << body << "\n"
        << answer->body;
    if (answer->streaming) {
      ASSERT_GE(answer->body.size(), 14u) << body;
      EXPECT_EQ(answer->body.substr(answer->body.size() - 14), "data: [DONE]\n\n") << body;
      continue;
    }
    json parsed;
    ASSERT_NO_THROW(parsed = json::parse(answer->body)) << body;
    if (status == 200) {
      EXPECT_TRUE(parsed.contains("choices")) << answer->body;
    } else {
      EXPECT_TRUE(parsed["error"]["message"].is_string()) << answer->body;
    }
  }
  EXPECT_GT(statuses[200], 100);
  EXPECT_GT(statuses[400], 100);
}

}  // namespace
}  // namespace pagoda::openai
