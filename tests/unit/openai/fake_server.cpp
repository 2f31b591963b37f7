// pagoda_fake_server: `pagoda serve` over the FakeEngine, for the Python
// raw-HTTP and OpenAI-SDK tests (tests/python/server). Prints
// "listening at http://HOST:PORT" on stdout once it accepts connections;
// SIGTERM/SIGINT drain it like the real server.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/log.h"
#include "fake_engine.h"
#include "http/connection_registry.h"
#include "openai/server.h"
#include "pagoda/cors_flags.h"
#include "pagoda/engine_flags.h"
#include "pagoda/http_limit_flags.h"

int main(int argc, char** argv) {
  CLI::App app{"The pagoda HTTP server over a deterministic fake engine (tests only).",
               "pagoda_fake_server"};
  pagoda::testing::FakeEngineOptions engine_options;
  engine_options.tokenizer_path = std::string(PAGODA_SHARED_DIR) + "/models/stories260K";
  pagoda::openai::ServerOptions server_options;
  server_options.port = 0;
  server_options.service.version = "0.0.0-fake";
  int64_t step_us = 1000;
  int64_t worker_timeout_s = server_options.worker_timeout.count();
  app.add_option("--tokenizer", engine_options.tokenizer_path, "tokenizer folder")
      ->capture_default_str();
  app.add_option("--chat-template", engine_options.chat_template_file, "chat template file");
  app.add_option("--served-model-name", engine_options.served_model_name, "model name")
      ->capture_default_str();
  app.add_option("--max-model-len", engine_options.max_model_len, "context length")
      ->capture_default_str();
  app.add_option("--max-num-seqs", engine_options.max_num_seqs, "requests running at once")
      ->capture_default_str();
  app.add_option("--max-waiting-requests", engine_options.max_waiting, "queue size")
      ->capture_default_str();
  app.add_option("--step-us", step_us, "microseconds per engine step")->capture_default_str();
  app.add_option("--host", server_options.host, "address")->capture_default_str();
  app.add_option("--port", server_options.port, "port; 0: any")->capture_default_str();
  app.add_option("--api-key", server_options.service.api_key, "API key");
  pagoda::app::add_http_limit_flags(app, server_options.limits);
  pagoda::app::add_cors_flags(app, server_options.cors);
  app.add_option("--max-response-bytes", server_options.service.max_response_bytes,
                 "bound on a non-streamed response (as pagoda serve)")
      ->capture_default_str();
  app.add_option("--worker-timeout-s", worker_timeout_s,
                 "shutdown: seconds to wait for requests still being parsed or tokenized")
      ->capture_default_str();
  app.add_option("--tool-call-parser", server_options.service.tool_call_parser, "tool-call parser")
      ->capture_default_str();
  app.add_option("--reasoning-parser", server_options.service.reasoning_parser,
                 "reasoning parser (as pagoda serve)");
  pagoda::app::add_switch(app, "enable-auto-tool-choice", server_options.service.auto_tool_choice,
                          "parse tool_choice auto (as pagoda serve)");
  app.add_flag("--strict-tools", server_options.service.strict_tools,
               "400 for tools the chat template ignores (as pagoda serve)");
  CLI11_PARSE(app, argc, argv);
  engine_options.step_time = std::chrono::microseconds(step_us);
  server_options.worker_timeout = std::chrono::seconds(worker_timeout_s);

  pagoda::http::raise_open_file_limit();
  auto engine = pagoda::testing::FakeEngine::create(engine_options);
  if (!engine.ok()) {
    std::fprintf(stderr, "fake server: %s\n", engine.error().message.c_str());
    return 1;
  }
  if (!engine_options.chat_template_file.empty()) {
    std::ifstream in(engine_options.chat_template_file, std::ios::binary);
    std::stringstream text;
    text << in.rdbuf();
    server_options.service.chat_template_text = text.str();
  }
  server_options.handle_signals = true;
  auto server = pagoda::openai::Server::start(*engine.value(), server_options);
  if (!server.ok()) {
    std::fprintf(stderr, "fake server: %s\n", server.error().message.c_str());
    return 1;
  }
  std::printf("listening at %s\n", server.value()->url().c_str());
  std::fflush(stdout);
  server.value()->wait_for_signal();
  return 0;
}
