// Hostile input: thousands of randomly mutated requests (wrong types, extreme
// values, truncated and corrupted bodies) through the service and the fake
// engine. Every one must get a well-formed answer with a client-error or
// success status: no crash, no hang, no 500.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <condition_variable>
#include <random>
#include <thread>

#include "fake_engine.h"
#include "server/json_util.h"
#include "server/openai_service.h"

namespace pagoda::server {
namespace {

using json = nlohmann::ordered_json;

class WaitingResponder : public Responder {
 public:
  void send(HttpResponse r) override { finish(r.status, std::move(r.body), false); }
  void start_stream(int s, std::string) override {
    std::lock_guard lock(mu_);
    status_ = s;
    streaming_ = true;
  }
  void write(std::string data) override {
    std::lock_guard lock(mu_);
    body_ += data;
  }
  void end_stream() override { finish(status_, "", true); }
  void fail(const ApiError& error) override {
    finish(error.status, dump_json(api_error_json(error)), false);
  }
  void on_cancel(std::function<void()>) override {}

  // Waits for the answer; returns (status, body, streamed).
  std::tuple<int, std::string, bool> wait() {
    std::unique_lock lock(mu_);
    EXPECT_TRUE(cv_.wait_for(lock, std::chrono::seconds(30), [this] { return done_; }))
        << "no answer";
    return {status_, body_, streaming_};
  }

 private:
  void finish(int status, std::string body, bool append) {
    std::lock_guard lock(mu_);
    status_ = status;
    body_ = append ? body_ + body : std::move(body);
    done_ = true;
    cv_.notify_all();
  }
  std::mutex mu_;
  std::condition_variable cv_;
  int status_ = 0;
  std::string body_;
  bool streaming_ = false, done_ = false;
};

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
  auto engine = testing::FakeEngine::create(options);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  boost::asio::io_context io;
  auto work = boost::asio::make_work_guard(io);
  std::thread io_thread([&] { io.run(); });
  boost::asio::thread_pool workers(2);
  ServiceOptions service_options;
  service_options.tool_call_parser = "hermes";
  auto context = ServiceContext::create(*engine.value(), service_options, io.get_executor(),
                                        workers.get_executor());
  ASSERT_TRUE(context.ok());
  OpenAiService service(std::move(context.value()));

  std::mt19937 rng(20240607);
  std::map<int, int> statuses;
  for (int i = 0; i < 1500; ++i) {
    const bool chat = i % 2 == 1;
    const std::string body = mutate(rng, chat);
    auto responder = std::make_shared<WaitingResponder>();
    service.handle(
        HttpRequest{"POST", chat ? "/v1/chat/completions" : "/v1/completions", "", {}, body, "r"},
        responder);
    auto [status, answer, streamed] = responder->wait();
    ++statuses[status];
    ASSERT_TRUE(status == 200 || status == 400 || status == 404)
        << status << " for " << body << "\n"
        << answer;
    if (streamed) {
      ASSERT_GE(answer.size(), 14u) << body;
      EXPECT_EQ(answer.substr(answer.size() - 14), "data: [DONE]\n\n") << body;
      continue;
    }
    json parsed;
    ASSERT_NO_THROW(parsed = json::parse(answer)) << body;
    if (status == 200) {
      EXPECT_TRUE(parsed.contains("choices")) << answer;
    } else {
      EXPECT_TRUE(parsed["error"]["message"].is_string()) << answer;
    }
  }
  EXPECT_GT(statuses[200], 100);
  EXPECT_GT(statuses[400], 100);
  work.reset();
  io_thread.join();
  workers.join();
}

}  // namespace
}  // namespace pagoda::server
