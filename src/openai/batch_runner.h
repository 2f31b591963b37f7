// Answers the lines of an OpenAI batch file in-process through the OpenAI
// service (openai_service.h), without sockets: each body is validated,
// planned and answered exactly as the HTTP server does it, and its output
// line (batch_line.h) carries the same JSON body the server would send.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <functional>
#include <memory>
#include <string_view>
#include <thread>

#include "engine/engine_api.h"
#include "openai/openai_service.h"
#include "openai/wire/json_util.h"

namespace pagoda::openai {

class BatchRunner {
 public:
  // Receives one output line; runs once per run(), on a runner thread.
  using Done = std::function<void(Json output_line)>;

  // `options` as the server's (model name, tool-call parser, response bound).
  // Errors: an unknown tool_call_parser name.
  static Result<std::unique_ptr<BatchRunner>> create(Engine& engine, ServiceOptions options);
  // Every run()'s `done` must have run first (the engine still holds sinks
  // into the service otherwise); then stops the threads.
  ~BatchRunner();

  // Answers one input line's text: a line that is no request, or a body with
  // "stream": true (a batch answer is written whole), at once; else through
  // the service, as POST `url` with that body. Thread-safe; returns quickly.
  void run(std::string_view line, Done done);

  BatchRunner();

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  boost::asio::thread_pool workers_;
  std::thread io_thread_;
  std::unique_ptr<OpenAiService> service_;
};

}  // namespace pagoda::openai
