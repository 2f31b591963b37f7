// What every route handler shares: the engine, the options, the executors and
// the drain flag. Handlers run on an I/O thread and must return quickly; they
// move parsing, templating and tokenization to the worker pool.
#pragma once

#include <atomic>
#include <boost/asio/any_io_executor.hpp>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engine/engine_api.h"
#include "http/http_types.h"
#include "openai/api_error.h"
#include "openai/generation_job.h"
#include "openai/request_log.h"
#include "openai/reasoning/reasoning_parser.h"
#include "openai/response_bound.h"
#include "openai/tools/tool_parser.h"

namespace pagoda::openai {

struct ServiceOptions {
  // The names clients may send as `model` (all listed by /v1/models); the
  // first is the one responses report. Empty: the engine's ModelInfo name.
  std::vector<std::string> served_model_names;
  std::string api_key;                    // "" → no authentication
  std::string version = "0.0.0";          // for /version and system_fingerprint
  std::string tool_call_parser = "auto";  // auto, none, or a name of tool_parser_names()
  // "" (none) or a name of reasoning_parser_names(): chat answers split the
  // <think> text into reasoning_content / reasoning.
  std::string reasoning_parser;
  // tool_choice "auto" (the default when tools are given) is served: the
  // output is parsed for calls. Off (--no-enable-auto-tool-choice): 400, as
  // vLLM answers without --enable-auto-tool-choice.
  bool auto_tool_choice = true;
  // A request with tools whose chat template renders no tools gets 400
  // instead of an answer with an X-Pagoda-Warning header.
  bool strict_tools = false;
  std::string chat_template_text;         // the template in use; "auto" picks the parser from it
  int64_t max_response_bytes = kDefaultMaxResponseBytes;  // non-streamed answers (response_bound.h)
  RequestLogOptions request_log;                          // --enable-log-requests, --max-log-len
  // Requests with a larger body are parsed and tokenized on the heavy lane.
  size_t heavy_body_bytes = 256 << 10;
};

struct ServiceContext {
  // Errors: an unknown tool_call_parser or reasoning_parser name. `heavy_workers`: the heavy
  // lane (empty: `workers` takes every request). `io_gate`: the gate of the
  // listener whose connections the service answers (nullptr: a new one).
  static Result<std::unique_ptr<ServiceContext>> create(
      Engine& engine, ServiceOptions options, boost::asio::any_io_executor io,
      boost::asio::any_io_executor workers, boost::asio::any_io_executor heavy_workers = {},
      std::shared_ptr<http::PostGate> io_gate = nullptr);

  Engine& engine;
  const ServiceOptions options;
  const std::vector<std::string> model_names;  // options.served_model_names, else the engine's
  const std::string model_name;                // model_names.front(): the name responses report
  const std::string system_fingerprint;
  const int64_t created;                       // unix seconds at start
  const boost::asio::any_io_executor io;       // strands for response assembly
  const boost::asio::any_io_executor workers;  // parsing, templating, tokenization
  // The heavy lane: the same work for bodies over options.heavy_body_bytes, so
  // that they never occupy every thread of `workers` and light requests stay
  // responsive while a huge one is parsed and tokenized.
  const boost::asio::any_io_executor heavy_workers;
  // Bytes of the tokenizer's longest vocabulary piece.
  const int64_t max_token_bytes;
  // A prompt text of more bytes cannot fit the context and is refused before
  // tokenizing: max_model_len × max_token_bytes × 4, the 4 for normalizers
  // that shrink text (NFKC maps a 3-byte full-width letter to 1 byte).
  int64_t max_prompt_bytes() const;
  std::unique_ptr<ToolParser> tool_parser;     // nullptr: tool calls are not parsed
  std::unique_ptr<ReasoningParser> reasoning_parser;  // nullptr: no reasoning split
  // The chat template renders a conversation the same with and without tools
  // (probed once at start, chat_template_ignores_tools).
  bool template_ignores_tools = false;
  // Engine thread and worker lanes → io (see http::PostGate).
  const std::shared_ptr<http::PostGate> io_gate;
  std::atomic<bool> draining{false};
  // Requests handed to run_on_worker whose work has not returned yet (queued,
  // parsing, templating, tokenizing): shutdown waits for them a shorter time.
  mutable std::atomic<int64_t> num_on_lanes{0};

  // Runs `fn` for `request` on its lane (heavy_workers for a large body, else
  // workers); an exception it throws answers 500.
  void run_on_worker(std::shared_ptr<http::Responder> responder, const http::HttpRequest& request,
                     std::function<void()> fn) const;

  // Whether `name` is one of model_names.
  bool serves_model(std::string_view name) const;
  // 404 when body["model"] is present and names no served model; 400 if not a string.
  std::optional<ApiError> check_model(const Json& body) const;

  ServiceContext(Engine& engine, ServiceOptions options, boost::asio::any_io_executor io,
                 boost::asio::any_io_executor workers, boost::asio::any_io_executor heavy_workers,
                 std::unique_ptr<ToolParser> tool_parser,
                 std::unique_ptr<ReasoningParser> reasoning_parser,
                 std::shared_ptr<http::PostGate> io_gate);
};

// Route handlers (one file per group).
void handle_completions(ServiceContext& ctx, const http::HttpRequest& request,
                        std::shared_ptr<http::Responder> responder);
void handle_chat_completions(ServiceContext& ctx, const http::HttpRequest& request,
                             std::shared_ptr<http::Responder> responder);
void handle_tokenize(ServiceContext& ctx, const http::HttpRequest& request,
                     std::shared_ptr<http::Responder> responder);
void handle_detokenize(ServiceContext& ctx, const http::HttpRequest& request,
                       std::shared_ptr<http::Responder> responder);
void handle_models(ServiceContext& ctx, const http::HttpRequest& request,
                   std::shared_ptr<http::Responder> responder);
void handle_model(ServiceContext& ctx, const http::HttpRequest& request,
                  std::shared_ptr<http::Responder> responder);
void handle_health(ServiceContext& ctx, const http::HttpRequest& request,
                   std::shared_ptr<http::Responder> responder);
void handle_version(ServiceContext& ctx, const http::HttpRequest& request,
                    std::shared_ptr<http::Responder> responder);
void handle_metrics(ServiceContext& ctx, const http::HttpRequest& request,
                    std::shared_ptr<http::Responder> responder);

}  // namespace pagoda::openai
