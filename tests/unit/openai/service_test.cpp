// The OpenAI service over the FakeEngine, without sockets: request → handler
// → engine → assembled response, through a recording Responder.
#include <gtest/gtest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <condition_variable>
#include <future>
#include <thread>

#include "fake_engine.h"
#include "fake_service.h"
#include "openai/openai_service.h"
#include "openai/wire/json_util.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::openai {
namespace {

using json = nlohmann::ordered_json;
using testing::FakeEngine;
using testing::FakeEngineOptions;
using testing::RecordingResponder;

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override { start({}); }
  void TearDown() override { stop(); }

  void start(FakeEngineOptions options, const std::string& api_key = "") {
    options.tokenizer_path = std::string(PAGODA_SHARED_DIR) + "/models/stories260K";
    options.chat_template_file =
        std::string(PAGODA_SOURCE_DIR) + "/tests/data/server/simple_chat.jinja";
    auto engine = FakeEngine::create(options);
    ASSERT_TRUE(engine.ok()) << engine.error().message;
    engine_ = std::move(engine.value());
    io_thread_ = std::thread([this] { io_.run(); });
    ServiceOptions service_options;
    service_options.api_key = api_key;
    service_options.version = "9.9.9";
    service_options.tool_call_parser = "hermes";
    auto context = ServiceContext::create(*engine_, service_options, io_.get_executor(),
                                          workers_.get_executor());
    ASSERT_TRUE(context.ok());
    service_ = std::make_unique<OpenAiService>(std::move(context.value()));
  }
  void stop() {
    work_.reset();
    if (io_thread_.joinable()) io_thread_.join();
    workers_.join();
    service_.reset();
    engine_.reset();
  }

  std::shared_ptr<RecordingResponder> call(const std::string& method, const std::string& path,
                                           const std::string& body, const std::string& auth = "") {
    auto responder = std::make_shared<RecordingResponder>();
    http::HttpRequest request{method, path, "", {}, body, "req-test"};
    if (!auth.empty()) request.headers.emplace_back("authorization", auth);
    service_->handle(request, responder);
    EXPECT_TRUE(responder->wait()) << path << " " << body;
    return responder;
  }
  std::shared_ptr<RecordingResponder> post(const std::string& path, const json& body) {
    return call("POST", path, body.dump());
  }
  std::vector<int32_t> encode(const std::string& text, bool special = true) {
    return engine_->tokenizer().encode(text, special, true);
  }

  boost::asio::io_context io_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_{
      io_.get_executor()};
  std::thread io_thread_;
  boost::asio::thread_pool workers_{2};
  std::unique_ptr<FakeEngine> engine_;
  std::unique_ptr<OpenAiService> service_;
};

TEST_F(ServiceTest, CompletionFollowsTheScript) {
  const std::string prompt = "Tell me. SAY: Once upon a time there was a cat.";
  auto r =
      post("/v1/completions", {{"model", "fake-model"}, {"prompt", prompt}, {"max_tokens", 50}});
  ASSERT_EQ(r->status, 200) << r->body;
  json body = r->json_body();
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_EQ(body["model"], "fake-model");
  EXPECT_EQ(body["id"].get<std::string>().rfind("cmpl-", 0), 0u);
  ASSERT_EQ(body["choices"].size(), 1u);
  EXPECT_EQ(body["choices"][0]["text"], "Once upon a time there was a cat.");
  EXPECT_EQ(body["choices"][0]["finish_reason"], "stop");
  EXPECT_TRUE(body["choices"][0]["logprobs"].is_null());
  const int64_t num_script =
      static_cast<int64_t>(encode("Once upon a time there was a cat.", false).size());
  EXPECT_EQ(body["usage"]["prompt_tokens"], encode(prompt).size());
  EXPECT_EQ(body["usage"]["completion_tokens"], num_script + 1);  // + EOS
  EXPECT_EQ(body["usage"]["total_tokens"], encode(prompt).size() + num_script + 1);
}

TEST_F(ServiceTest, StreamingMatchesNonStreaming) {
  json request = {{"prompt", "a story about a dog"},
                  {"max_tokens", 12},
                  {"temperature", 0},
                  {"n", 2},
                  {"stream", true},
                  {"stream_options", {{"include_usage", true}}}};
  auto streamed = post("/v1/completions", request);
  ASSERT_TRUE(streamed->streaming);
  request["stream"] = false;
  request.erase("stream_options");
  auto whole = post("/v1/completions", request);
  ASSERT_EQ(whole->status, 200) << whole->body;
  auto events = streamed->events();
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  json usage_chunk = json::parse(events[events.size() - 2]);
  EXPECT_TRUE(usage_chunk["choices"].empty());
  EXPECT_EQ(usage_chunk["usage"], whole->json_body()["usage"]);
  std::string text[2];
  json finish[2];
  for (size_t i = 0; i + 2 < events.size(); ++i) {
    json chunk = json::parse(events[i]);
    ASSERT_EQ(chunk["choices"].size(), 1u);
    EXPECT_TRUE(chunk.contains("usage") && chunk["usage"].is_null());
    const int index = chunk["choices"][0]["index"];
    text[index] += chunk["choices"][0]["text"].get<std::string>();
    if (!chunk["choices"][0]["finish_reason"].is_null())
      finish[index] = chunk["choices"][0]["finish_reason"];
  }
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(text[i], whole->json_body()["choices"][i]["text"]);
    EXPECT_EQ(finish[i], whole->json_body()["choices"][i]["finish_reason"]);
  }
  EXPECT_FALSE(text[0].empty());
  EXPECT_EQ(text[0], text[1]) << "greedy samples agree";
}

TEST_F(ServiceTest, BatchPromptsAndTokenPrompts) {
  const auto ids = encode("SAY: hello world");
  auto r = post("/v1/completions",
                {{"prompt", json::array({"SAY: one", "SAY: two"})}, {"n", 2}, {"max_tokens", 8}});
  ASSERT_EQ(r->status, 200) << r->body;
  json choices = r->json_body()["choices"];
  ASSERT_EQ(choices.size(), 4u);
  EXPECT_EQ(choices[0]["text"], "one");
  EXPECT_EQ(choices[1]["text"], "one");
  EXPECT_EQ(choices[2]["text"], "two");
  EXPECT_EQ(choices[3]["index"], 3);
  auto tokens = post("/v1/completions", {{"prompt", ids}, {"max_tokens", 8}});
  EXPECT_EQ(tokens->json_body()["choices"][0]["text"], "hello world");
  auto lists = post("/v1/completions",
                    {{"prompt", json::array({ids, ids})}, {"max_tokens", 8}, {"echo", true}});
  ASSERT_EQ(lists->status, 200);
  EXPECT_EQ(lists->json_body()["choices"][1]["text"],
            engine_->tokenizer().decode(ids, false) + "hello world");
  EXPECT_EQ(lists->json_body()["usage"]["prompt_tokens"], 2 * ids.size());
}

TEST_F(ServiceTest, StopStringsAndLength) {
  auto stop = post("/v1/completions",
                   {{"prompt", "SAY: alpha beta gamma delta"}, {"stop", json::array({"gam"})}});
  EXPECT_EQ(stop->json_body()["choices"][0]["text"], "alpha beta ");
  EXPECT_EQ(stop->json_body()["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(stop->json_body()["choices"][0]["stop_reason"], "gam");
  auto length =
      post("/v1/completions", {{"prompt", "SAY: alpha beta gamma delta"}, {"max_tokens", 1}});
  EXPECT_EQ(length->json_body()["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(length->json_body()["usage"]["completion_tokens"], 1);
}

TEST_F(ServiceTest, CompletionLogprobsWithEcho) {
  const std::string prompt = "SAY: the cat";
  auto r = post("/v1/completions",
                {{"prompt", prompt}, {"logprobs", 2}, {"echo", true}, {"max_tokens", 4}});
  ASSERT_EQ(r->status, 200) << r->body;
  json choice = r->json_body()["choices"][0];
  json lp = choice["logprobs"];
  const size_t num_prompt = encode(prompt).size();
  const size_t num_tokens = num_prompt + r->json_body()["usage"]["completion_tokens"].get<size_t>();
  ASSERT_EQ(lp["tokens"].size(), num_tokens);
  ASSERT_EQ(lp["token_logprobs"].size(), num_tokens);
  ASSERT_EQ(lp["top_logprobs"].size(), num_tokens);
  ASSERT_EQ(lp["text_offset"].size(), num_tokens);
  EXPECT_TRUE(lp["token_logprobs"][0].is_null());
  EXPECT_TRUE(lp["top_logprobs"][0].is_null());
  EXPECT_LT(lp["token_logprobs"][1].get<double>(), 0.0);
  EXPECT_EQ(choice["text"].get<std::string>().rfind(prompt, 0), 0u) << "echo prepends the prompt";
  for (size_t i = 1; i < num_tokens; ++i) {
    EXPECT_LE(lp["top_logprobs"][i].size(), 3u);  // 2 alternatives + the token itself
    EXPECT_GE(lp["text_offset"][i].get<int>(), lp["text_offset"][i - 1].get<int>());
  }
}

TEST_F(ServiceTest, ChatWithToolCall) {
  json tools = json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
  const std::string call =
      R"(<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>)";
  json request = {{"messages", {{{"role", "user"}, {"content", "SAY:" + call}}}}, {"tools", tools}};
  auto r = post("/v1/chat/completions", request);
  ASSERT_EQ(r->status, 200) << r->body;
  json choice = r->json_body()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(choice["message"]["tool_calls"][0]["type"], "function");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(
      json::parse(choice["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
      json({{"city", "Paris"}}));

  request["stream"] = true;
  auto s = post("/v1/chat/completions", request);
  auto events = s->events();
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(json::parse(events[0])["choices"][0]["delta"],
            json({{"role", "assistant"}, {"content", ""}}));
  std::string name, arguments, content, finish;
  for (size_t i = 1; i + 1 < events.size(); ++i) {
    json c = json::parse(events[i])["choices"][0];
    if (c["delta"].contains("content")) content += c["delta"]["content"].get<std::string>();
    for (const auto& t : c["delta"].value("tool_calls", json::array())) {
      EXPECT_EQ(t["index"], 0);
      if (t.contains("id")) name = t["function"]["name"];
      arguments += t["function"]["arguments"].get<std::string>();
    }
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(content, "");
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(json::parse(arguments), json({{"city", "Paris"}}));
  EXPECT_EQ(finish, "tool_calls");

  // tool_choice none: the same text is plain content.
  request["stream"] = false;
  request["tool_choice"] = "none";
  auto plain = post("/v1/chat/completions", request);
  EXPECT_EQ(plain->json_body()["choices"][0]["message"]["content"], call);
  EXPECT_EQ(plain->json_body()["choices"][0]["finish_reason"], "stop");
}

TEST_F(ServiceTest, ChatLogprobs) {
  auto r =
      post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "SAY: big dog"}}}},
                                    {"logprobs", true},
                                    {"top_logprobs", 3}});
  ASSERT_EQ(r->status, 200) << r->body;
  json content = r->json_body()["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), r->json_body()["usage"]["completion_tokens"].get<size_t>());
  std::string joined;
  for (const auto& entry : content) {
    EXPECT_EQ(entry["top_logprobs"].size(), 3u);
    std::string bytes;
    for (int b : entry["bytes"]) bytes += static_cast<char>(b);
    EXPECT_EQ(bytes, entry["token"].get<std::string>());
    joined += entry["token"].get<std::string>();
  }
  EXPECT_NE(joined.find("big dog"), std::string::npos);
}

TEST_F(ServiceTest, Errors) {
  auto check = [&](const std::string& path, const std::string& body, int status,
                   const std::string& param) {
    auto r = call("POST", path, body);
    EXPECT_EQ(r->status, status) << body << " → " << r->body;
    json error = r->json_body()["error"];
    EXPECT_TRUE(error.contains("message") && error.contains("type") && error.contains("code"))
        << r->body;
    if (!param.empty()) {
      EXPECT_EQ(error["param"], param) << r->body;
    }
  };
  check("/v1/completions", "{not json", 400, "");
  check("/v1/completions", "[]", 400, "");
  check("/v1/completions", "{\"prompt\": \"\xFF\"}", 400, "");
  check("/v1/completions", R"({"max_tokens": 3})", 400, "prompt");
  check("/v1/completions", R"({"prompt": []})", 400, "prompt");
  check("/v1/completions", R"({"prompt": [1, 99999]})", 400, "prompt");
  check("/v1/completions", R"({"prompt": "x", "model": "other"})", 404, "model");
  check("/v1/completions", R"({"prompt": "x", "temperature": "hot"})", 400, "temperature");
  check("/v1/completions", R"({"prompt": "x", "max_tokens": 100000})", 400, "prompt");
  check("/v1/completions", R"({"prompt": "x", "suffix": "y"})", 400, "suffix");
  check("/v1/chat/completions", R"({"messages": "hi"})", 400, "messages");
  check("/v1/chat/completions",
        R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})", 400,
        "messages[0].content[0].type");
  check("/v1/chat/completions",
        R"({"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2})", 400,
        "top_logprobs");
  check("/v1/chat/completions",
        R"({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0})", 400, "max_tokens");
  auto unknown_fields = post("/v1/completions", {{"prompt", "SAY: ok"}, {"frobnicate", true}});
  EXPECT_EQ(unknown_fields->status, 200);
}

TEST_F(ServiceTest, InfoRoutes) {
  auto models = call("GET", "/v1/models", "");
  EXPECT_EQ(models->json_body()["data"][0]["id"], "fake-model");
  EXPECT_EQ(models->json_body()["data"][0]["max_model_len"], 512);
  EXPECT_EQ(call("GET", "/v1/models/fake-model", "")->json_body()["id"], "fake-model");
  EXPECT_EQ(call("GET", "/v1/models/nope", "")->status, 404);
  EXPECT_EQ(call("GET", "/version", "")->json_body()["version"], "9.9.9");
  EXPECT_EQ(call("GET", "/health", "")->status, 200);
  auto metrics = call("GET", "/metrics", "");
  EXPECT_NE(metrics->body.find("pagoda:num_requests_running{model_name=\"fake-model\"} 0"),
            std::string::npos);
  EXPECT_EQ(call("PUT", "/v1/models", "")->status, 405);
  EXPECT_EQ(call("GET", "/v2/x", "")->status, 404);
}

TEST_F(ServiceTest, MissesAre404Or405WithAllow) {
  auto not_found = call("GET", "/v1/nothing", "");
  EXPECT_EQ(not_found->status, 404);
  EXPECT_EQ(not_found->json_body()["error"]["code"], "not_found");
  auto wrong_method = call("GET", "/v1/completions", "");
  EXPECT_EQ(wrong_method->status, 405);
  EXPECT_EQ(wrong_method->json_body()["error"]["code"], "method_not_allowed");
  ASSERT_EQ(wrong_method->headers.size(), 1u);
  EXPECT_EQ(wrong_method->headers[0], std::make_pair(std::string("Allow"), std::string("POST")));
  EXPECT_EQ(call("GET", "/v1/models/", "")->status, 404);  // a prefix route needs a rest
}

TEST_F(ServiceTest, TokenizeAndDetokenize) {
  auto t = post("/tokenize", {{"prompt", "Hello world"}});
  ASSERT_EQ(t->status, 200) << t->body;
  EXPECT_EQ(t->json_body()["tokens"].get<std::vector<int32_t>>(), encode("Hello world"));
  EXPECT_EQ(t->json_body()["count"], encode("Hello world").size());
  EXPECT_EQ(t->json_body()["max_model_len"], 512);
  auto chat = post("/tokenize", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  EXPECT_EQ(chat->json_body()["tokens"].get<std::vector<int32_t>>(),
            engine_->tokenizer().encode_prompt("user: hi\nassistant:"));
  auto d = post("/detokenize", {{"tokens", encode("Hello world", false)}});
  EXPECT_EQ(d->json_body()["prompt"], "Hello world");
  EXPECT_EQ(post("/detokenize", {{"tokens", {1, -5}}})->status, 400);
}

TEST_F(ServiceTest, CancelAbortsTheEngineRequest) {
  auto responder = std::make_shared<RecordingResponder>();
  service_->handle(
      http::HttpRequest{
          "POST",
          "/v1/completions",
          "",
          {},
          json({{"prompt", "go"}, {"max_tokens", 400}, {"ignore_eos", true}, {"stream", true}})
              .dump(),
          "req-cancel"},
      responder);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (engine_->num_live() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_TRUE(responder->cancel()) << "no cancel handler registered";
  while (engine_->num_live() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(engine_->num_live(), 0);
  ASSERT_EQ(engine_->aborted_ids().size(), 1u);
  EXPECT_EQ(engine_->aborted_ids()[0].rfind("cmpl-", 0), 0u);
}

TEST_F(ServiceTest, EngineLimitsAreAnsweredBeforeSubmitting) {
  // The fake engine's limits: 64 seats (FakeEngineOptions::max_num_seqs).
  auto wide = post("/v1/completions",
                   {{"prompt", json::array({"SAY: a", "SAY: b"})}, {"n", 65}, {"max_tokens", 2}});
  ASSERT_EQ(wide->status, 400) << wide->body;
  const json error = wide->json_body()["error"];
  EXPECT_EQ(error["message"], "n/best_of/beam width 65 exceeds --max-num-seqs 64");
  EXPECT_TRUE(error["param"].is_null());
  EXPECT_EQ(engine_->num_live(), 0);
  EXPECT_TRUE(engine_->aborted_ids().empty());
  auto chat = post("/v1/chat/completions",
                   {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
                    {"n", 65},
                    {"max_tokens", 2}});
  ASSERT_EQ(chat->status, 400) << chat->body;
  EXPECT_EQ(chat->json_body()["error"]["message"], error["message"]);
}

class SmallQueueTest : public ServiceTest {
 protected:
  void SetUp() override {
    FakeEngineOptions options;
    options.max_num_seqs = 1;
    options.max_waiting = 1;
    options.step_time = std::chrono::milliseconds(5);
    start(options, "sk-test");
  }
};

TEST_F(SmallQueueTest, QueueFullIs429AndAuthIs401) {
  const std::string key = "Bearer sk-test";
  EXPECT_EQ(call("GET", "/v1/models", "")->status, 401);
  EXPECT_EQ(call("GET", "/v1/models", "", "Bearer wrong")->status, 401);
  EXPECT_EQ(call("GET", "/health", "")->status, 200);
  EXPECT_EQ(call("GET", "/v1/models", "", key)->status, 200);
  const std::string slow =
      json({{"prompt", "go"}, {"max_tokens", 100}, {"ignore_eos", true}}).dump();
  auto submit = [&] {
    auto responder = std::make_shared<RecordingResponder>();
    service_->handle(
        http::HttpRequest{"POST", "/v1/completions", "", {{"authorization", key}}, slow, "r"}, responder);
    return responder;
  };
  auto wait_for = [&](int64_t running, int64_t waiting) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      EngineMetrics m = engine_->metrics();
      if (m.num_running == running && m.num_waiting == waiting) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
  };
  auto first = submit();
  ASSERT_TRUE(wait_for(1, 0));
  auto second = submit();
  ASSERT_TRUE(wait_for(1, 1));
  auto third = submit();  // the queue holds one request: refused
  ASSERT_TRUE(third->wait());
  EXPECT_EQ(third->status, 429);
  EXPECT_EQ(third->json_body()["error"]["type"], "rate_limit_error");
  EXPECT_EQ(third->json_body()["error"]["code"], "rate_limit_exceeded");
  for (const auto& r : {first, second}) {
    ASSERT_TRUE(r->wait());
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->json_body()["usage"]["completion_tokens"], 100);
  }
}

// The stages of the dispatch: the API key first (not needed on /health,
// whatever the method), then the drain gate, which refuses every POST while
// draining, matched or not, then 404 / 405.
TEST_F(SmallQueueTest, DispatchStages) {
  const std::string key = "Bearer sk-test";
  EXPECT_EQ(call("GET", "/nowhere", "")->status, 401);
  EXPECT_EQ(call("GET", "/nowhere", "", key)->status, 404);
  EXPECT_EQ(call("POST", "/health", "")->status, 405);
  EXPECT_EQ(call("GET", "/health", "")->status, 200);
  service_->set_draining();
  EXPECT_EQ(call("POST", "/v1/completions", "{}")->status, 401);
  auto refused = call("POST", "/v1/completions", "{}", key);
  EXPECT_EQ(refused->status, 503);
  EXPECT_EQ(refused->json_body()["error"]["code"], "service_unavailable");
  EXPECT_EQ(call("POST", "/tokenize", "{}", key)->status, 503);
  EXPECT_EQ(call("POST", "/nowhere", "", key)->status, 503);
  EXPECT_EQ(call("POST", "/v1/models", "", key)->status, 503);
  EXPECT_EQ(call("POST", "/health", "")->status, 503);
  EXPECT_EQ(call("PUT", "/v1/models", "", key)->status, 405);
  EXPECT_EQ(call("GET", "/v1/models", "", key)->status, 200);
  EXPECT_EQ(call("GET", "/health", "")->status, 503);  // the route reports the drain itself
}

// A body over heavy_body_bytes runs on the heavy lane: while heavy work holds
// every heavy thread, a light request still runs at once.
TEST(ServiceLanes, LightRequestsRunWhileTheHeavyLaneIsBusy) {
  FakeEngineOptions options;
  options.tokenizer_path = std::string(PAGODA_SHARED_DIR) + "/models/stories260K";
  auto engine = FakeEngine::create(options);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  boost::asio::io_context io;
  boost::asio::thread_pool light(1), heavy(1);
  auto ctx = ServiceContext::create(*engine.value(), {}, io.get_executor(), light.get_executor(),
                                    heavy.get_executor());
  ASSERT_TRUE(ctx.ok());
  auto responder = std::make_shared<RecordingResponder>();
  const http::HttpRequest big{"POST", "/v1/completions", "", {},
                        std::string((*ctx)->options.heavy_body_bytes + 1, ' '), "big"};
  const http::HttpRequest small{"POST", "/v1/completions", "", {}, "{}", "small"};
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  for (int i = 0; i < 2; ++i) (*ctx)->run_on_worker(responder, big, [released] { released.wait(); });
  std::promise<void> ran;
  (*ctx)->run_on_worker(responder, small, [&ran] { ran.set_value(); });
  EXPECT_EQ(ran.get_future().wait_for(std::chrono::seconds(5)), std::future_status::ready);
  release.set_value();
  light.join();
  heavy.join();
}

// Shutdown began after the handler checked ctx.draining: the engine refuses
// the request (draining), and the client gets 503, not the queue-full 429.
TEST(LaunchGeneration, RefusalWhileDrainingIs503) {
  FakeEngineOptions options;
  options.tokenizer_path = std::string(PAGODA_SHARED_DIR) + "/models/stories260K";
  auto engine = FakeEngine::create(options);
  ASSERT_TRUE(engine.ok()) << engine.error().message;
  engine.value()->drain();
  boost::asio::io_context io;
  auto job = std::make_shared<GenerationJob>(*engine.value(), io.get_executor(),
                                             std::make_shared<http::PostGate>(), "cmpl-test");
  auto responder = std::make_shared<RecordingResponder>();
  std::atomic<bool> draining{true};
  SamplingRequest request;
  request.params.max_tokens = 4;
  launch_generation(job, {{1, 2, 3}}, request, draining, responder,
                    [](int, int, RequestOutput&, bool, const Usage&) {});
  ASSERT_TRUE(responder->wait());
  EXPECT_EQ(responder->status, 503);
}

}  // namespace
}  // namespace pagoda::openai
