// Test helpers over the OpenAI service without sockets: a Responder that
// records one answer, and a FakeService (FakeEngine + I/O thread + worker
// pool + OpenAiService) whose call() waits for it. Used by the server unit
// tests and the request fuzzer.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "fake_engine.h"
#include "openai/openai_service.h"

namespace pagoda::testing {

// Records one answer; wait() blocks until it is complete (send, end_stream or
// fail). A fail() after the stream started appends its stream tail.
class RecordingResponder : public http::Responder {
 public:
  void send(http::HttpResponse r) override;
  void start_stream(int status, std::string content_type, http::HttpHeaders headers) override;
  void write(std::string data) override;
  void end_stream() override;
  void fail(http::FailedAnswer answer) override;
  void on_cancel(std::function<void()> fn) override;

  // Runs the registered cancel callback; false if none was registered.
  bool cancel();
  bool wait(std::chrono::milliseconds timeout = std::chrono::seconds(10));
  nlohmann::ordered_json json_body() const { return nlohmann::ordered_json::parse(body); }
  // The data: payloads of an SSE body.
  std::vector<std::string> events() const;

  int status = 0;
  bool streaming = false;
  bool failed = false;
  int num_answers = 0;  // send / end_stream / fail calls: 1 for a well-behaved handler
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;

 private:
  void done_locked();
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::function<void()> cancel_;
};

// An OpenAiService over a FakeEngine made from `engine_options`, with its own
// I/O thread and a worker pool of `num_workers` threads.
class FakeService {
 public:
  static Result<std::unique_ptr<FakeService>> create(const FakeEngineOptions& engine_options,
                                                     openai::ServiceOptions service_options = {},
                                                     int num_workers = 2);
  ~FakeService();  // lets queued work finish, then stops the threads

  // Handles `request` and waits up to `timeout` for its answer (check
  // RecordingResponder::wait's result through done()).
  std::shared_ptr<RecordingResponder> call(http::HttpRequest request,
                                           std::chrono::milliseconds timeout = std::chrono::seconds(30));
  std::shared_ptr<RecordingResponder> post(const std::string& path, std::string body);

  FakeEngine& engine() { return *engine_; }

  FakeService() = default;

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_ =
      boost::asio::make_work_guard(io_);
  std::thread io_thread_;
  std::unique_ptr<boost::asio::thread_pool> workers_;
  std::unique_ptr<FakeEngine> engine_;
  std::unique_ptr<openai::OpenAiService> service_;
};

}  // namespace pagoda::testing
