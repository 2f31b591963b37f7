// create_engine(): resolve and load everything the engine needs, log what was
// loaded, and start the engine thread.
#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "core/kv_cache_dtype.h"
#include "core/log.h"
#include "core/units.h"
#include "engine/chat_template_source.h"
#include "engine/eagle_proposer.h"
#include "engine/llm_engine.h"
#include "engine/load_format.h"
#include "engine/proposer_factory.h"
#include "model/model_runner.h"
#include "engine/runner_factory.h"
#include "io/generation_defaults.h"
#include "io/model_files.h"
#include "sample/sampling_fields.h"

namespace pagoda {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    case FinishReason::kAbort: return "abort";
  }
  return "abort";
}

namespace {

// The model's stop set: the ids its files name (ModelDescription::eos_token_ids)
// ∪ the tokenizer's (eos token, end-of-turn specials); sorted, unique.
std::vector<int32_t> collect_eos(const Tokenizer& tok, const ModelDescription& model) {
  std::vector<int32_t> ids = tok.eos_ids();
  ids.insert(ids.end(), model.eos_token_ids.begin(), model.eos_token_ids.end());
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

RunnerOptions to_runner_options(const EngineOptions& o) {
  RunnerOptions r;
  r.block_size = o.block_size;
  const Result<KvCacheDtype> kv_dtype = parse_kv_cache_dtype(o.kv_cache_dtype);
  if (kv_dtype.ok()) r.kv_cache_dtype = *kv_dtype;  // check_options refused any other value
  r.num_kv_blocks = o.num_kv_blocks;
  r.max_num_batched_tokens = o.max_num_batched_tokens;
  r.max_num_seqs = o.max_num_seqs;
  r.max_model_len = o.max_model_len;
  r.kv_cache_memory_fraction = o.gpu_memory_utilization;
  r.kv_cache_bytes = o.kv_cache_memory_bytes;
  r.enforce_eager = o.enforce_eager;
  // Verification steps (k drafts + 1 per sequence) replay graphs too: with a
  // method, or with a proposer the caller supplies (EngineOptions::speculative).
  if (o.speculative.num_speculative_tokens > 0)
    r.verify_graph_query_len = o.speculative.num_speculative_tokens + 1;
  r.keep_weight_blocks = !o.gguf_dequantize;
  r.sliding_kv_group = !o.disable_hybrid_kv_cache_manager;
  return r;
}

// One line: the sampling defaults requests that leave a field unset get, and
// where they came from.
void log_sampling_defaults(const GenerationDefaults& defaults, const std::string& source, const std::string& choice) {
  const std::string values = describe_generation_defaults(defaults);
  if (!values.empty()) {
    log_info("sampling defaults: {} (from {}); a request's own values win", values, source);
  } else {
    log_info("sampling defaults: built-in (temperature=1, no top_p / top_k / min_p); {}",
             choice == "vllm" ? "--generation-config vllm" : "the model gives none");
  }
}

// The start-up line of the two KV groups: each group's layers, blocks and
// tokens, and the tokens the same memory would hold with every layer keeping
// its whole context in one pool (the capacity gained).
std::string describe_kv_groups(const ModelInfo& info, const Runner& runner,
                               const ModelConfig& config) {
  const auto num_sliding = static_cast<int64_t>(
      std::count(config.sliding_layers.begin(), config.sliding_layers.end(), true));
  const double full_bytes = static_cast<double>(runner.kv_block_bytes());
  const double sliding_bytes = static_cast<double>(runner.sliding_kv_block_bytes());
  const double bytes = static_cast<double>(info.num_kv_blocks) * full_bytes +
                       static_cast<double>(info.num_sliding_kv_blocks) * sliding_bytes;
  const auto one_pool_tokens =
      static_cast<int64_t>(bytes / (full_bytes + sliding_bytes)) * info.block_size;
  return fmt::format(
      "KV groups: {} full-attention layers keep {} tokens ({} blocks); {} sliding-window layers "
      "(window {}) keep {} tokens of windows ({} blocks); the same memory with every layer "
      "keeping its whole context holds {} tokens: {:.2f}x the capacity "
      "(--disable-hybrid-kv-cache-manager)",
      config.num_layers - num_sliding, info.kv_capacity_tokens, info.num_kv_blocks, num_sliding,
      info.sliding_window, info.num_sliding_kv_blocks * info.block_size, info.num_sliding_kv_blocks,
      one_pool_tokens,
      one_pool_tokens > 0
          ? static_cast<double>(info.kv_capacity_tokens) / static_cast<double>(one_pool_tokens)
          : 0.0);
}

// The weights' quantisation: the checkpoint's, or with --quantization fp8 the
// online scheme for an unquantised one. Dummy weights are random compute-dtype
// tensors, so an FP8 checkpoint's config runs them through the online scheme.
void choose_quantization(const EngineOptions& o, QuantizationConfig* q) {
  if (q->fp8() && o.load_format == "dummy") {
    log_info(
        "--load-format dummy: the checkpoint's {} becomes the online scheme (random weights "
        "quantised at load)",
        describe_quantization(*q, ""));
    *q = online_fp8_config();
  } else if (o.quantization == "fp8" && q->fp8()) {
    log_info("--quantization fp8: the checkpoint is FP8 already; it runs as stored");
  } else if (o.quantization == "fp8") {
    *q = online_fp8_config();
  }
}

Status check_options(const EngineOptions& o) {
  auto bad = [](std::string m) { return make_error(ErrorCode::kInvalidArgument, std::move(m)); };
  if (o.block_size < 1 || o.block_size > 256) return bad(fmt::format("--block-size must be in [1, 256], got {}", o.block_size));
  if (o.max_num_seqs < 1) return bad("--max-num-seqs must be >= 1");
  if (o.max_num_batched_tokens < 1) return bad("--max-num-batched-tokens must be >= 1");
  if (o.max_num_batched_tokens < o.max_num_seqs) {
    return bad(fmt::format("--max-num-batched-tokens ({}) must be >= --max-num-seqs ({})", o.max_num_batched_tokens,
                           o.max_num_seqs));
  }
  PAGODA_RETURN_IF_ERROR(check_load_format(o.load_format));
  if (Result<KvCacheDtype> kv = parse_kv_cache_dtype(o.kv_cache_dtype); !kv.ok()) return kv.error();
  PAGODA_RETURN_IF_ERROR(check_quantization_flag(o.quantization));
  if (o.num_kv_blocks < 0) return bad("--num-kv-blocks must be >= 0");
  if (o.max_waiting_requests < 1) return bad("--max-waiting-requests must be >= 1");
  if (!(o.gpu_memory_utilization > 0.0 && o.gpu_memory_utilization <= 1.0)) {
    return bad("--gpu-memory-utilization must be in (0, 1]");
  }
  if (!(o.stats_log_interval >= 0.0 && o.stats_log_interval <= 86400.0)) {
    return bad("--stats-log-interval must be in [0, 86400] seconds");
  }
  if (o.tensor_parallel_size < 1) {
    return bad(fmt::format("--tensor-parallel-size must be >= 1, got {}", o.tensor_parallel_size));
  }
  if (o.pipeline_parallel_size < 1) {
    return bad(fmt::format("--pipeline-parallel-size must be >= 1, got {}", o.pipeline_parallel_size));
  }
  return Status::Ok();
}

}  // namespace

Result<EngineParts> load_engine_parts(const EngineOptions& options, const std::string& tokenizer_path) {
  PAGODA_RETURN_IF_ERROR(check_options(options));
  PAGODA_ASSIGN_OR_RETURN(ModelLocation location, resolve_model(options.model, HubOptions::from_env(options.revision, options.download_dir)));
  PAGODA_ASSIGN_OR_RETURN(OpenedModel opened, open_model_as(location, options.load_format));
  choose_quantization(options, &opened.config.quantization);
  PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tokenizer,
                          tokenizer_path.empty() ? Tokenizer::load(opened) : Tokenizer::load(tokenizer_path));
  log_info("tokenizer: {}", tokenizer->description());
  // Kept in its Result until moved into parts (moving the optional out early
  // makes GCC 12 warn, falsely, that it may be used uninitialized).
  Result<std::optional<ChatTemplate>> chat_template = load_chat_template(options.chat_template, *tokenizer);
  if (!chat_template.ok()) return chat_template.error();
  if (!chat_template.value()) log_warn("no chat template: /v1/chat/completions is unavailable (pass --chat-template FILE)");
  RunnerOptions runner_options = to_runner_options(options);
  if (options.speculative.method == SpecMethod::kEagle3) {
    // The head's aux layers, kept by the target's forwards (decode graphs are
    // captured as the runner is created, so this comes first).
    PAGODA_ASSIGN_OR_RETURN(
        runner_options.aux_hidden_layers,
        eagle3_aux_layers(options, {location.display_name, opened.config.hidden_size,
                                    opened.config.vocab_size, opened.config.num_layers}));
  }
  PAGODA_ASSIGN_OR_RETURN(LoadedRunner loaded,
                          load_runner(options, opened.config, *opened.weights, runner_options));
  const Runner& runner = *loaded.runner;

  EngineParts parts;
  PAGODA_ASSIGN_OR_RETURN(parts.proposer,
                          make_proposer(options, {location.display_name, tokenizer.get(), opened.config.vocab_size,
                                                  runner.max_model_len(),
                                                  runner.num_kv_blocks() * runner.block_size(),
                                                  opened.config.hidden_size,
                                                  dynamic_cast<const ModelRunner*>(&runner)}));
  parts.options = options;
  if (options.pipeline_parallel_size > 1 && options.async_scheduling) {
    // A step's input ids are the previous step's samples, which the last
    // stage holds on its device while stage 0 embeds them.
    log_info("async scheduling off: pipeline parallelism ({} stages) needs each step's sampled "
             "tokens on the host before the next step starts",
             options.pipeline_parallel_size);
    parts.options.async_scheduling = false;
  }
  parts.info.served_model_name = options.served_model_name.empty() ? location.display_name : options.served_model_name;
  parts.info.architecture = opened.config.architecture;
  parts.info.max_model_len = runner.max_model_len();
  parts.info.vocab_size = opened.config.vocab_size;
  parts.info.num_kv_blocks = runner.num_kv_blocks();
  parts.info.block_size = runner.block_size();
  parts.info.kv_capacity_tokens = runner.num_kv_blocks() * runner.block_size();
  parts.info.kv_cache_dtype = kv_cache_dtype_name(runner.kv_cache_dtype());
  if (runner.num_sliding_kv_blocks() > 0) {
    parts.info.num_sliding_kv_blocks = runner.num_sliding_kv_blocks();
    parts.info.sliding_window = opened.config.sliding_window;
  }
  parts.info.max_num_batched_tokens = options.max_num_batched_tokens;
  parts.info.max_num_seqs = options.max_num_seqs;
  parts.info.device = loaded.device;
  parts.info.weight_precision = loaded.weight_precision;
  parts.info.tensor_parallel_size = options.tensor_parallel_size;
  parts.info.pipeline_parallel_size = options.pipeline_parallel_size;
  parts.info.speculative_method = spec_method_name(options.speculative.method);
  parts.info.num_speculative_tokens = options.speculative.enabled() ? options.speculative.num_speculative_tokens : 0;
  parts.scheduler_config.max_num_batched_tokens = static_cast<int32_t>(options.max_num_batched_tokens);
  parts.scheduler_config.max_num_seqs = static_cast<int32_t>(options.max_num_seqs);
  // The engine bounds the requests never scheduled (LlmEngine::add_request,
  // --max-waiting-requests); the scheduler must never refuse one it accepted,
  // and preempted requests return to its waiting queue on top of those.
  parts.scheduler_config.max_waiting = INT32_MAX;
  parts.scheduler_config.max_model_len = static_cast<int32_t>(runner.max_model_len());
  parts.scheduler_config.kv.num_blocks = static_cast<int32_t>(runner.num_kv_blocks());
  parts.scheduler_config.kv.block_size = runner.block_size();
  parts.scheduler_config.kv.enable_prefix_caching = options.enable_prefix_caching;
  parts.scheduler_config.kv.sliding_window = static_cast<int32_t>(parts.info.sliding_window);
  parts.scheduler_config.kv.num_sliding_blocks =
      static_cast<int32_t>(parts.info.num_sliding_kv_blocks);
  PAGODA_ASSIGN_OR_RETURN(SamplingDefaults sampling,
                          select_sampling_defaults(options.generation_config, opened.generation, opened.generation_source));
  parts.generation = std::move(sampling.values);
  parts.generation.eos_token_ids = opened.generation.eos_token_ids;
  for (const SamplingFieldError& e : drop_out_of_range_defaults(parts.generation)) {
    log_warn("generation_config: {}; requests that leave '{}' unset use the built-in default", e.message, e.field);
  }
  log_sampling_defaults(parts.generation, sampling.source, options.generation_config);
  parts.eos_token_ids = collect_eos(*tokenizer, opened);
  parts.tokenizer = std::move(tokenizer);
  parts.chat_template = std::move(chat_template).value();
  const double pool_bytes =
      static_cast<double>(parts.info.num_kv_blocks * runner.kv_block_bytes() +
                          parts.info.num_sliding_kv_blocks * runner.sliding_kv_block_bytes());
  const std::string kv_bytes = fmt::format("{:.2f} GiB{}", to_gib(pool_bytes),
                                           loaded.kv_scope.empty() ? "" : " " + loaded.kv_scope);
  log_info(
      "KV cache: {} blocks x {} tokens = {} tokens ({}; sized by {}); dtype {}; max model len {}; "
      "prefix caching {}{}",
      parts.info.num_kv_blocks, parts.info.block_size, parts.info.kv_capacity_tokens, kv_bytes,
      runner.kv_sizing(), parts.info.kv_cache_dtype, parts.info.max_model_len,
      options.enable_prefix_caching ? "on" : "off",
      loaded.parallelism.empty() ? "" : "; " + loaded.parallelism);
  if (!runner.kv_scales_source().empty())
    log_info(
        "KV cache fp8_e4m3: stores e4m3(x / scale), reads e4m3 * scale; k_scale / v_scale "
        "per layer {}",
        runner.kv_scales_source());
  if (parts.info.num_sliding_kv_blocks > 0)
    log_info("{}", describe_kv_groups(parts.info, runner, opened.config));
  parts.backend = std::move(loaded.backend);
  parts.runner = std::move(loaded.runner);
  return parts;
}

Result<std::unique_ptr<Engine>> create_engine(const EngineOptions& options) {
  PAGODA_ASSIGN_OR_RETURN(EngineParts parts, load_engine_parts(options));
  PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<LlmEngine> engine, LlmEngine::start(std::move(parts)));
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace pagoda
