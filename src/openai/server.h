// The HTTP server: an I/O thread pool running the listener and connections, a
// worker pool for parsing, templating and tokenization, and the OpenAI
// service on top of an Engine, attached once the engine has loaded.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/result.h"
#include "engine/engine_api.h"
#include "http/cors.h"
#include "http/http_session.h"
#include "openai/service_context.h"

namespace pagoda::http {
class HttpListener;
}  // namespace pagoda::http

namespace pagoda::openai {

class OpenAiService;

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;                    // 0: any free port (see Server::port())
  int num_io_threads = 0;                  // 0: min(4, cores)
  int num_worker_threads = 0;              // 0: min(4, cores)
  int num_heavy_threads = 0;               // the heavy lane (large bodies); 0: max(1, workers / 2)
  std::chrono::seconds flush_timeout{30};  // after the drain, for clients to read their answers
  // How long shutdown waits for requests still being parsed or tokenized
  // (they are answered 503 when they reach the engine), once no other answer
  // is being written; then the process exits without them (std::_Exit(0)).
  std::chrono::seconds worker_timeout{5};
  bool handle_signals = false;  // catch SIGINT/SIGTERM from start() on, for wait_for_signal()
  http::HttpLimits limits;
  http::CorsOptions cors;  // the CORS policy of every response (http/cors.h)
  ServiceOptions service;
};

class Server {
 public:
  // Binds, starts the threads and begins accepting, before any model is
  // loaded: until attach() every request gets the loading answer
  // (loading_answer.h). Errors: the address cannot be bound (the message
  // names host:port).
  static Result<std::unique_ptr<Server>> start(ServerOptions options);
  // start(options), then attach(engine).
  static Result<std::unique_ptr<Server>> start(Engine& engine, ServerOptions options);
  // Serves the API over `engine` from now on; called once. The engine must
  // outlive the server. `chat_template_text`, when given, replaces
  // options.service.chat_template_text (the template in use is known only once
  // the engine has loaded). Errors: an unknown tool-call parser.
  Status attach(Engine& engine, std::optional<std::string> chat_template_text = std::nullopt);
  // Stops without draining if shutdown() was not called: requests still live
  // in the engine keep running, and their answers are dropped (the I/O gate
  // closes first).
  ~Server();

  uint16_t port() const;
  std::string url() const;  // "http://host:port"

  // Runs `load` (loading the model) on a thread of its own and returns once it
  // has. A SIGINT or SIGTERM that arrives first (handle_signals) ends the
  // process at once with status 0: a load cannot be interrupted, and no
  // request has reached an engine yet.
  void run_load(const std::function<void()>& load);
  // Blocks until SIGINT or SIGTERM arrives, then runs shutdown(). A second
  // signal during the drain exits the process at once.
  void wait_for_signal();
  // Stops accepting, answers 503 to new requests, drains the engine (in-flight
  // requests finish), waits up to flush_timeout for their answers to be
  // written, then stops the threads. Requests still on the worker lanes
  // (parsing, tokenizing) are waited for at most worker_timeout. Idempotent.
  void shutdown();

  http::ConnectionStats& stats() { return *stats_; }

  explicit Server(ServerOptions options);

 private:
  void run_io();
  // The listener's handler: the service once attached, else the loading answer.
  void handle(http::HttpRequest request, std::shared_ptr<http::Responder> responder);
  // `bounded` (shutdown(), which waited already): exit the process if work is
  // still on the worker lanes; else (the destructor) join them.
  void stop_threads(bool bounded);

  Engine* engine_ = nullptr;  // set by attach()
  ServerOptions options_;
  boost::asio::io_context ioc_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  std::vector<std::thread> io_threads_;
  boost::asio::thread_pool workers_;
  boost::asio::thread_pool heavy_workers_;
  std::shared_ptr<http::ConnectionStats> stats_;
  // Engine thread and worker lanes → I/O threads; closed before they stop.
  std::shared_ptr<http::PostGate> io_gate_ = std::make_shared<http::PostGate>();
  std::unique_ptr<OpenAiService> service_;
  // service_ once attach() has built it; read by the I/O threads.
  std::atomic<OpenAiService*> attached_{nullptr};
  std::shared_ptr<http::HttpListener> listener_;
  boost::asio::io_context signal_ioc_;
  std::unique_ptr<boost::asio::signal_set> signals_;
  bool stopped_ = false;
};

}  // namespace pagoda::openai
