// pagoda serve: the OpenAI-compatible HTTP server (docs/api.md).
#if __has_include("openai/server.h")

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/log.h"
#include "core/thread_pool.h"
#include "engine/chat_template_source.h"
#include "engine/engine_api.h"
#include "http/connection_registry.h"
#include "openai/reasoning/reasoning_parser.h"
#include "openai/server.h"
#include "pagoda/command.h"
#include "pagoda/cors_flags.h"
#include "pagoda/model_flags.h"
#include "pagoda/engine_flags.h"
#include "pagoda/http_limit_flags.h"

namespace {

using pagoda::EngineOptions;
using pagoda::openai::ServerOptions;

// The names clients may send as `model`: --served-model-name (several: vLLM's
// form) or -a/--alias (llama-server's).
struct ServedNames {
  std::vector<std::string> names;
};

void add_server_flags(CLI::App& app, EngineOptions& engine, ServerOptions& server,
                      ServedNames& served) {
  app.add_option("--host", server.host, "address to listen on (0.0.0.0: every interface)")
      ->capture_default_str();
  app.add_option("--port", server.port, "TCP port; 0 picks a free one (the log says which)")
      ->capture_default_str();
  app.add_option(
         "--api-key", server.service.api_key,
         "require `Authorization: Bearer KEY` on every route but /health (env PAGODA_API_KEY)")
      ->envname("PAGODA_API_KEY");
  app.add_option("--served-model-name", served.names,
                 "the model names clients may send as `model`, all listed by /v1/models; "
                 "responses report the first; default: the model's folder or file name");
  app.add_option("--max-waiting-requests", engine.max_waiting_requests,
                 "requests that may wait for a batch slot; more are refused with 429")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  pagoda::app::add_http_limit_flags(app, server.limits);
  pagoda::app::add_cors_flags(app, server.cors);
  app.add_option("--max-response-bytes", server.service.max_response_bytes,
                 "bound on a non-streamed response: a request whose worst-case answer (choices x "
                 "max_tokens, logprobs, echo) could exceed it gets 400 before generating; "
                 "streamed responses are not bounded")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  std::vector<std::string> parsers = {"auto", "none"};
  for (const auto& name : pagoda::openai::tool_parser_names()) parsers.push_back(name);
  app.add_option("--tool-call-parser", server.service.tool_call_parser,
                 "how tool calls are read from model output (docs/api.md): auto (picked from the "
                 "chat template), none, hermes (<tool_call>{json}</tool_call>), llama3_json / "
                 "llama4_json ({\"name\", \"parameters\"}), mistral ([TOOL_CALLS]), pythonic / "
                 "llama4_pythonic ([f(a=1)]), qwen3_coder (<function=f><parameter=a>), "
                 "deepseek_v3 / deepseek_v31 (<｜tool▁call▁begin｜>)")
      ->check(CLI::IsMember(parsers))
      ->capture_default_str();
  app.add_option("--reasoning-parser", server.service.reasoning_parser,
                 "split a reasoning model's <think>...</think> off its chat answers into "
                 "message.reasoning_content and message.reasoning (streamed as delta "
                 "fields); structured-output constraints apply after </think> "
                 "(docs/api.md, docs/structured-output.md): deepseek_r1 (the output may omit the "
                 "opening <think>), "
                 "qwen3 (reasons only when the output opens with <think>); default: none")
      ->check(CLI::IsMember(pagoda::openai::reasoning_parser_names()));
  pagoda::app::add_switch(app, "enable-auto-tool-choice", server.service.auto_tool_choice,
                          "parse tool calls out of answers to requests with tool_choice \"auto\" "
                          "(the default when tools are given); off: such requests get 400, as "
                          "vLLM without this flag");
  app.add_flag("--strict-tools", server.service.strict_tools,
               "answer 400 to a request with tools when the chat template ignores tools (renders "
               "the same prompt without them); default: answer, with an X-Pagoda-Warning header");
}

// Per-request logging (vLLM's flags): off by default; --disable-log-requests,
// vLLM's older spelling, keeps it off. The last of the two given wins.
void add_request_log_flags(CLI::App& app, pagoda::openai::RequestLogOptions& log) {
  app.add_flag_callback(
         "--enable-log-requests", [&log] { log.enabled = true; },
         "log each generation request at INFO: its id, prompt, prompt token ids and sampling "
         "parameters (default off)")
      ->trigger_on_parse();
  app.add_flag_callback(
         "--disable-log-requests", [&log] { log.enabled = false; },
         "do not log each request (the default; vLLM's older spelling)")
      ->trigger_on_parse();
  app.add_option_function<int64_t>(
         "--max-log-len", [&log](int64_t n) { log.max_log_len = n; },
         "prompt characters and prompt token ids shown per logged request; default: all")
      ->check(CLI::NonNegativeNumber);
}

// llama-server's spellings of flags pagoda has under vLLM's names. (-np is
// read as --parallel before parsing, by rewrite_single_dash_aliases: CLI11
// takes one-letter short flags only.)
void add_llama_server_flags(CLI::App& app, EngineOptions& engine, ServedNames& served) {
  app.add_option("-m,--model", engine.model, "MODEL as an option (llama-server's spelling)");
  app.add_option("-c,--ctx-size", engine.max_model_len,
                 "same as --max-model-len (llama-server's spelling)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--parallel", engine.max_num_seqs,
                 "also -np: same as --max-num-seqs (llama-server's spellings)")
      ->check(CLI::PositiveNumber);
  app.add_option("-a,--alias", served.names,
                 "same as --served-model-name (llama-server's spelling)");
  app.add_option_function<int>(
         "-t", [](int n) { pagoda::set_num_cpu_threads(n); },
         "same as --threads (llama-server's spelling)")
      ->check(CLI::PositiveNumber);
}

// PAGODA_TEST_LOAD_DELAY_MS (test-only, docs/api.md): milliseconds to wait
// before loading, so that tests can observe the server while it loads.
pagoda::Result<std::unique_ptr<pagoda::Engine>> load_engine(const EngineOptions& options) {
  if (const char* delay = std::getenv("PAGODA_TEST_LOAD_DELAY_MS")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoll(delay)));
  }
  pagoda::log_info("loading {}", options.model);
  return pagoda::create_engine(options);
}

int run_serve(int argc, char** argv) {
  CLI::App app{
      "Serve a model with the OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions, "
      "/v1/models, /tokenize, /detokenize, /health, /version, /metrics).",
      "pagoda serve"};
  EngineOptions engine_options;
  engine_options.stats_log_interval = 10.0;  // as vLLM's server logs; generate and bench default to off
  ServerOptions server_options;
  ServedNames served;
  server_options.service.version = PAGODA_VERSION;
  app.add_option("model", engine_options.model,
                 std::string(pagoda::app::kModelHelp) +
                     "; default: SmolLM2-135M-Instruct from the local pagoda cache");
  std::string hf_repo;
  pagoda::app::add_hf_repo_flag(app, hf_repo);
  add_server_flags(app, engine_options, server_options, served);
  add_request_log_flags(app, server_options.service.request_log);
  pagoda::app::add_engine_flags(app, engine_options);
  add_llama_server_flags(app, engine_options, served);
  pagoda::app::rewrite_single_dash_aliases(argc, argv);
  pagoda::app::rewrite_engine_aliases(argc, argv);
  CLI11_PARSE(app, argc, argv);
  if (!pagoda::app::apply_hf_repo(hf_repo, engine_options.model, "pagoda serve")) return 2;
  if (!served.names.empty()) engine_options.served_model_name = served.names.front();
  server_options.service.served_model_names = served.names;

  if (engine_options.model.empty()) {
    engine_options.model = pagoda::app::default_model_path();
    if (!std::filesystem::exists(engine_options.model)) {
      std::fprintf(stderr, "pagoda serve: no MODEL given and the default model is not at %s: %s\n",
                   engine_options.model.c_str(), pagoda::app::kFetchDefaultModelHint);
      return 2;
    }
  }
  const int64_t fd_limit = pagoda::http::raise_open_file_limit();
  // Listen first: a port in use is reported before minutes of loading, and
  // /health answers 503 while the model loads.
  std::optional<pagoda::Result<std::unique_ptr<pagoda::Engine>>> engine;  // outlives the server
  server_options.handle_signals = true;
  auto server = pagoda::openai::Server::start(server_options);
  if (!server.ok()) {
    std::fprintf(stderr, "pagoda serve: %s\n", server.error().message.c_str());
    return 1;
  }
  pagoda::log_info(
      "accepting connections at {} while the model loads (GET /health answers 503 "
      "until it is ready)",
      server.value()->url());
  server.value()->run_load([&] { engine.emplace(load_engine(engine_options)); });
  if (!engine->ok()) {
    std::fprintf(stderr, "pagoda serve: %s\n", engine->error().message.c_str());
    return 1;
  }
  pagoda::Engine& loaded = *engine->value();
  if (auto attached = server.value()->attach(loaded, pagoda::app::chat_template_text(engine_options, loaded));
      !attached.ok()) {
    std::fprintf(stderr, "pagoda serve: %s\n", attached.error().message.c_str());
    return 1;
  }
  const pagoda::ModelInfo& info = loaded.info();
  pagoda::log_info(
      "serving '{}' ({}, {}) on {}: weights {}; context {} tokens, KV cache {} tokens ({} blocks "
      "of {})",
      info.served_model_name, info.architecture, engine_options.model, info.device,
      info.weight_precision, info.max_model_len, info.kv_capacity_tokens, info.num_kv_blocks,
      info.block_size);
  pagoda::log_info("listening at {} (OpenAI API under /v1; open-file limit {})",
                   server.value()->url(), fd_limit);
  server.value()->wait_for_signal();
  return 0;
}

}  // namespace

PAGODA_COMMAND(serve, "serve a model with the OpenAI-compatible HTTP API", run_serve);

#endif  // __has_include("openai/server.h")
