// pagoda serve: the OpenAI-compatible HTTP server (docs/api.md).
#if __has_include("openai/server.h")

#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/log.h"
#include "engine/engine_api.h"
#include "http/connection_registry.h"
#include "openai/server.h"
#include "pagoda/command.h"
#include "pagoda/model_flags.h"
#include "pagoda/engine_flags.h"
#include "pagoda/http_limit_flags.h"

namespace {

using pagoda::EngineOptions;
using pagoda::openai::ServerOptions;

void add_server_flags(CLI::App& app, EngineOptions& engine, ServerOptions& server) {
  app.add_option("--host", server.host, "address to listen on (0.0.0.0: every interface)")
      ->capture_default_str();
  app.add_option("--port", server.port, "TCP port; 0 picks a free one (the log says which)")
      ->capture_default_str();
  app.add_option(
         "--api-key", server.service.api_key,
         "require `Authorization: Bearer KEY` on every route but /health (env PAGODA_API_KEY)")
      ->envname("PAGODA_API_KEY");
  app.add_option("--served-model-name", engine.served_model_name,
                 "the model name clients send and see; default: the model's folder or file name");
  app.add_option("--max-waiting-requests", engine.max_waiting_requests,
                 "requests that may wait for a batch slot; more are refused with 429")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  pagoda::app::add_http_limit_flags(app, server.limits);
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
  pagoda::app::add_switch(app, "enable-auto-tool-choice", server.service.auto_tool_choice,
                          "parse tool calls out of answers to requests with tool_choice \"auto\" "
                          "(the default when tools are given); off: such requests get 400, as "
                          "vLLM without this flag");
  app.add_flag("--strict-tools", server.service.strict_tools,
               "answer 400 to a request with tools when the chat template ignores tools (renders "
               "the same prompt without them); default: answer, with an X-Pagoda-Warning header");
}

int run_serve(int argc, char** argv) {
  CLI::App app{
      "Serve a model with the OpenAI-compatible HTTP API (/v1/completions, /v1/chat/completions, "
      "/v1/models, /tokenize, /detokenize, /health, /version, /metrics).",
      "pagoda serve"};
  EngineOptions engine_options;
  engine_options.stats_log_interval = 10.0;  // as vLLM's server logs; generate and bench default to off
  ServerOptions server_options;
  server_options.service.version = PAGODA_VERSION;
  app.add_option("model", engine_options.model,
                 std::string(pagoda::app::kModelHelp) +
                     "; default: SmolLM2-135M-Instruct from the local pagoda cache");
  std::string hf_repo;
  pagoda::app::add_hf_repo_flag(app, hf_repo);
  add_server_flags(app, engine_options, server_options);
  pagoda::app::add_engine_flags(app, engine_options);
  pagoda::app::rewrite_single_dash_aliases(argc, argv);
  CLI11_PARSE(app, argc, argv);
  if (!pagoda::app::apply_hf_repo(hf_repo, engine_options.model, "pagoda serve")) return 2;

  if (engine_options.model.empty()) {
    engine_options.model = pagoda::app::default_model_path();
    if (!std::filesystem::exists(engine_options.model)) {
      std::fprintf(stderr, "pagoda serve: no MODEL given and the default model is not at %s: %s\n",
                   engine_options.model.c_str(), pagoda::app::kFetchDefaultModelHint);
      return 2;
    }
  }
  const int64_t fd_limit = pagoda::http::raise_open_file_limit();
  auto engine = pagoda::create_engine(engine_options);
  if (!engine.ok()) {
    std::fprintf(stderr, "pagoda serve: %s\n", engine.error().message.c_str());
    return 1;
  }
  server_options.service.served_model_name = engine.value()->info().served_model_name;
  server_options.service.chat_template_text = pagoda::app::chat_template_text(engine_options, *engine.value());
  server_options.handle_signals = true;
  auto server = pagoda::openai::Server::start(*engine.value(), server_options);
  if (!server.ok()) {
    std::fprintf(stderr, "pagoda serve: %s\n", server.error().message.c_str());
    return 1;
  }
  const pagoda::ModelInfo& info = engine.value()->info();
  pagoda::log_info(
      "serving '{}' ({}, {}) on {}: context {} tokens, KV cache {} tokens ({} blocks of {})",
      info.served_model_name, info.architecture, engine_options.model, info.device,
      info.max_model_len, info.kv_capacity_tokens, info.num_kv_blocks, info.block_size);
  pagoda::log_info("listening at {} (OpenAI API under /v1; open-file limit {})",
                   server.value()->url(), fd_limit);
  server.value()->wait_for_signal();
  return 0;
}

}  // namespace

PAGODA_COMMAND(serve, "serve a model with the OpenAI-compatible HTTP API", run_serve);

#endif  // __has_include("openai/server.h")
