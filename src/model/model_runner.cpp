#include "model/model_runner.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <unordered_map>
#include <utility>

#include "backend/communicator.h"
#include "core/log.h"
#include "core/units.h"
#include "kv/sliding_window_blocks.h"
#include "model/architecture.h"
#include "model/decode_graphs.h"
#include "model/kv_budget.h"
#include "model/llama_decoder.h"
#include "model/load_weights.h"
#include "model/memory_profile.h"
#include "model/rope.h"
#include "model/step_validation.h"
#include "model/verify_graphs.h"

namespace pagoda {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;
// Startup time the decode-graph captures may take; sizes not captured by
// then run eagerly (a capture takes milliseconds, so this only bounds
// pathological cases).
constexpr double kGraphCaptureBudgetSeconds = 30.0;

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Host staging memory from the backend (pinned on cuda).
class HostBuffer {
 public:
  HostBuffer(Backend* backend, size_t bytes)
      : backend_(backend), ptr_(backend->allocate_host(bytes)) {
    if (ptr_ == nullptr) throw std::bad_alloc();
  }
  ~HostBuffer() { backend_->deallocate_host(ptr_); }
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  int32_t* i32() const { return static_cast<int32_t*>(ptr_); }

 private:
  Backend* backend_;
  void* ptr_;
};

// Offsets (in i32 elements) of the step's index arrays in one device buffer;
// fixed for the runner's life so tensors keep their addresses step to step.
// The sliding-window group's slots and tables take room only with that group.
struct IndexLayout {
  int64_t ids = 0, positions = 0, slots = 0, qsl = 0, seq_lens = 0, tables = 0, rows = 0,
          pending_rows = 0, pending_sources = 0, sliding_slots = 0, sliding_tables = 0, total = 0;
  IndexLayout(int64_t max_tokens, int64_t max_seqs, int64_t max_table, int64_t max_rows,
              bool sliding) {
    positions = ids + max_tokens;
    slots = positions + max_tokens;
    qsl = slots + max_tokens;
    seq_lens = qsl + max_seqs + 1;
    tables = seq_lens + max_seqs;
    rows = tables + max_seqs * max_table;
    pending_rows = rows + max_rows;
    pending_sources = pending_rows + max_tokens;
    sliding_slots = pending_sources + max_tokens;
    sliding_tables = sliding_slots + (sliding ? max_tokens : 0);
    total = sliding_tables + (sliding ? max_seqs * max_table : 0);
  }
};

// The masks of rows [r0, r1) of `b` into `s`: only the masks those rows use,
// renumbered in order of first use.
void slice_masks(const SamplingBatch& b, int64_t r0, int64_t r1, SamplingBatch& s) {
  if (b.mask_index.empty()) return;
  const size_t w = static_cast<size_t>(b.mask_words);
  std::unordered_map<int32_t, int32_t> renumbered;
  for (int64_t r = r0; r < r1; ++r) {
    const int32_t m = b.mask_index[static_cast<size_t>(r)];
    if (m < 0) {
      s.mask_index.push_back(-1);
      continue;
    }
    auto [it, added] = renumbered.emplace(m, static_cast<int32_t>(renumbered.size()));
    if (added) {
      const auto first = b.allowed_words.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(m) * w);
      s.allowed_words.insert(s.allowed_words.end(), first, first + static_cast<std::ptrdiff_t>(w));
    }
    s.mask_index.push_back(it->second);
  }
  if (renumbered.empty()) {
    s.mask_index.clear();
  } else {
    s.mask_words = b.mask_words;
  }
}

// Rows [r0, r1) of a sampling batch, with its CSR lists rebased.
SamplingBatch slice_sampling_batch(const SamplingBatch& b, int64_t r0, int64_t r1) {
  SamplingBatch s;
  s.rows.assign(b.rows.begin() + r0, b.rows.begin() + r1);
  s.max_top_logprobs = b.max_top_logprobs;
  if (!b.penalty_offsets.empty()) {
    const int32_t lo = b.penalty_offsets[r0], hi = b.penalty_offsets[r1];
    for (int64_t r = r0; r <= r1; ++r) s.penalty_offsets.push_back(b.penalty_offsets[r] - lo);
    s.penalty_tokens.assign(b.penalty_tokens.begin() + lo, b.penalty_tokens.begin() + hi);
    s.penalty_output_counts.assign(b.penalty_output_counts.begin() + lo,
                                   b.penalty_output_counts.begin() + hi);
    s.penalty_in_prompt.assign(b.penalty_in_prompt.begin() + lo, b.penalty_in_prompt.begin() + hi);
  }
  if (!b.bias_offsets.empty()) {
    const int32_t lo = b.bias_offsets[r0], hi = b.bias_offsets[r1];
    for (int64_t r = r0; r <= r1; ++r) s.bias_offsets.push_back(b.bias_offsets[r] - lo);
    s.bias_tokens.assign(b.bias_tokens.begin() + lo, b.bias_tokens.begin() + hi);
    s.bias_values.assign(b.bias_values.begin() + lo, b.bias_values.begin() + hi);
  }
  slice_masks(b, r0, r1, s);
  return s;
}

template <typename T>
void append(const std::vector<T>& part, std::vector<T>* all) {
  all->insert(all->end(), part.begin(), part.end());
}

void append_sample_output(const SampleOutput& part, SampleOutput* out) {
  append(part.token_ids, &out->token_ids);
  append(part.logprobs, &out->logprobs);
  append(part.ranks, &out->ranks);
  append(part.top_ids, &out->top_ids);
  append(part.top_logprobs, &out->top_logprobs);
  append(part.target_logprobs, &out->target_logprobs);
  append(part.target_ranks, &out->target_ranks);
}

// The widest MLP activation per token: the dense intermediate size, the k
// routed experts' intermediates side by side, or the shared expert's.
int64_t mlp_width(const ModelConfig& c) {
  return std::max({c.intermediate_size, c.num_experts_per_tok * c.moe_intermediate_size,
                   c.shared_expert_intermediate_size});
}

// Byte offset of the shared expert's output in the MoE scratch: after the
// f32 router logits [T, E], top-k weights [T, k] and i32 ids [T, k], rounded
// up to 256 bytes (GEMM outputs want aligned rows).
size_t moe_shared_offset(int64_t max_tokens, int64_t num_experts, int64_t k) {
  const size_t bytes = static_cast<size_t>(max_tokens * (num_experts + 2 * k)) * sizeof(float);
  return (bytes + 255) / 256 * 256;
}

// Whether the FP8 producer path (RunnerOptions::fp8_producer, blocks.h) has
// a linear to serve: some layer's qkv, gate_up or down is FP8 with dynamic
// per-token activations. PAGODA_FP8_PRODUCER=0 turns it off (read once).
bool wants_fp8_producer(const RunnerOptions& o, const ModelWeights& w) {
  static const bool env_off = [] {
    const char* v = std::getenv("PAGODA_FP8_PRODUCER");
    return v != nullptr && std::string(v) == "0";
  }();
  if (!o.fp8_producer || env_off) return false;
  for (const LayerWeights& l : w.layers)
    for (const LinearWeight* lin : {&l.qkv, &l.gate_up, &l.down})
      if (lin->is_fp8() && lin->block == 0 && lin->input_scale.empty()) return true;
  return false;
}

}  // namespace

struct ModelRunner::Buffers {
  // Activations, [max_num_batched_tokens, *] in the compute dtype.
  DeviceBuffer residual, normed;           // [T, H]
  DeviceBuffer qkv;                        // [T, (Hq + 2 Hkv) D]
  DeviceBuffer attn;                       // [T, Hq D]
  DeviceBuffer proj;                       // [T, H]: o_proj and down_proj outputs
  DeviceBuffer gate_up;                    // [T, 2W], W = mlp_width; moe_experts' scratch
  DeviceBuffer act;                        // [T, W]
  // The FP8 producer path only (wants_fp8_producer): e4m3 codes [T, max(H, W)]
  // (T rounded up to 16 rows)
  // and f32 scales [T] of `normed` or `act` (forward_context.h).
  DeviceBuffer fp8_codes, fp8_scales;
  // Mixture of experts only: router logits [T, E] f32, top-k weights [T, k]
  // f32, top-k ids [T, k] i32, then the shared expert's output [T, H] cd.
  DeviceBuffer moe;
  DeviceBuffer gathered;                   // [max_num_seqs, H]: one lm_head chunk (last stage)
  DeviceBuffer logits;                     // [max_num_seqs, V] f32 (last stage)
  // Tensor parallelism (last stage): the rank's vocab-parallel logits
  // [max_num_seqs, tp_vocab_block] f32, gathered into `logits`.
  DeviceBuffer logits_local;
  DeviceBuffer cos_sin;                    // [max_model_len, R] f32, R = config.rope_dim()
  DeviceBuffer cos_sin_local;              // the same for sliding layers with their own base
  DeviceBuffer index;                      // i32 step arrays at `layout` offsets
  // Staging for `index`, one per step slot: a step's uploads may still be
  // queued behind the step before it while the host fills the next one.
  std::array<std::unique_ptr<HostBuffer>, kNumStepSlots> host_index;
  // Per layer of the full-attention group (every layer without a sliding
  // group): k then v, each [num_kv_blocks, block_size, Hkv, D].
  DeviceBuffer kv;
  // The same for the sliding-window group's layers, [num_sliding_kv_blocks, ...].
  DeviceBuffer kv_sliding;
  // RunnerOptions::architecture only: [(blocks + 1) * block_size, H] cd,
  // one hidden-state row per KV slot (forward_context.h hidden_pool).
  DeviceBuffer hidden_pool;
  // RunnerOptions::aux_hidden_layers: [n, T, H] cd (aux_hidden_states()).
  DeviceBuffer aux_hidden;
  DeviceBuffer kv_scales;           // [num_layers, 2] f32: each layer's (k_scale, v_scale)
  std::vector<KvCacheView> caches;  // [num_layers] views into kv or kv_sliding
  // The same views per group (block copies): [0] full, [1] sliding.
  std::array<std::vector<KvCacheView>, 2> group_caches;
  IndexLayout layout{0, 0, 0, 0, false};

  Tensor i32(int64_t offset, int64_t n) const {
    return Tensor(static_cast<int32_t*>(index.data()) + offset, DType::kI32, {n});
  }
  // Bytes of the activation scratch (everything sized by T or the lm_head chunk).
  size_t scratch_bytes() const {
    size_t n = 0;
    for (const DeviceBuffer* d : {&residual, &normed, &qkv, &attn, &proj, &gate_up, &act,
                                  &fp8_codes, &fp8_scales, &moe, &gathered, &logits,
                                  &logits_local})
      n += d->size();
    return n;
  }
};

ModelRunner::ModelRunner(Backend& backend, const ModelConfig& config, const RunnerOptions& options)
    : backend_(backend), config_(config), options_(options) {}

ModelRunner::~ModelRunner() = default;

Result<std::unique_ptr<ModelRunner>> ModelRunner::create(Backend& backend,
                                                         const ModelConfig& config,
                                                         WeightSource& weights,
                                                         const RunnerOptions& options) {
  const Architecture* arch = options.architecture;
  if (arch == nullptr) {
    PAGODA_ASSIGN_OR_RETURN(arch, find_architecture(config));
  } else {
    PAGODA_RETURN_IF_ERROR(validate_decoder_config(config));
    PAGODA_RETURN_IF_ERROR(arch->validate(config));
  }
  TpShard shard;
  if (options.tp != nullptr) {
    PAGODA_RETURN_IF_ERROR(validate_tensor_parallel(config, options.tp->size()));
    shard = {options.tp->rank(), options.tp->size()};
  }
  PpStage stage;
  if (options.pp != nullptr) {
    PAGODA_RETURN_IF_ERROR(validate_pipeline_parallel(config, options.pp->size()));
    stage = {options.pp->rank(), options.pp->size()};
  }
  if (options.block_size < 1 || options.max_num_batched_tokens < 1 || options.max_num_seqs < 1 ||
      options.max_model_len < 0 || options.num_kv_blocks < 0)
    return make_error(ErrorCode::kInvalidArgument,
                      "runner options: block_size, max_num_batched_tokens and max_num_seqs must be "
                      "positive; max_model_len and num_kv_blocks non-negative");
  if (options.max_model_len > config.max_position_embeddings)
    return make_error(ErrorCode::kInvalidArgument,
                      "max_model_len " + std::to_string(options.max_model_len) +
                          " exceeds the model's max_position_embeddings " +
                          std::to_string(config.max_position_embeddings));
  if (!options.aux_hidden_layers.empty()) {
    const std::vector<int64_t>& ids = options.aux_hidden_layers;
    std::vector<int64_t> sorted = ids;
    std::sort(sorted.begin(), sorted.end());
    if (sorted.front() < 0 || sorted.back() > config.num_layers ||
        std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("aux hidden-state layers [{}]: not distinct ids in [0, {}] "
                                    "(the model's layers and its last layer's output)",
                                    fmt::join(ids, ", "), config.num_layers));
    if (arch->forward != llama_forward || options.tp != nullptr || options.pp != nullptr)
      return make_error(ErrorCode::kUnsupported,
                        fmt::format("aux hidden states (EAGLE-3) need a llama-decoder family on "
                                    "one GPU; '{}'{} is not",
                                    arch->name,
                                    options.tp != nullptr || options.pp != nullptr
                                        ? " split over GPUs"
                                        : ""));
  }
  std::unique_ptr<ModelRunner> r(new ModelRunner(backend, config, options));
  r->use_graphs_ = backend.supports_graphs() && !options.enforce_eager;
  r->local_ = tp_local_config(config, shard);
  r->stage_ = stage;
  r->layers_ = pp_layers(config, stage);
  const auto& kinds = config.sliding_layers;
  r->sliding_group_ = options.sliding_kv_group && config.sliding_window > 0 &&
                      std::find(kinds.begin(), kinds.end(), true) != kinds.end() &&
                      std::find(kinds.begin(), kinds.end(), false) != kinds.end();
  r->layout_ = {static_cast<int>(r->local_.num_heads), static_cast<int>(r->local_.num_kv_heads),
                static_cast<int>(config.head_dim)};
  // Softmax scale: query_pre_attn_scalar^-0.5 (Gemma) or head_dim^-0.5.
  const double scalar =
      config.query_pre_attn_scalar > 0 ? config.query_pre_attn_scalar : config.head_dim;
  r->attention_scale_ = static_cast<float>(1.0 / std::sqrt(scalar));
  int64_t max_len =
      options.max_model_len > 0 ? options.max_model_len : config.max_position_embeddings;
  if (config.sliding_window > 0 && config.sliding_layers.empty() &&
      max_len > config.sliding_window) {
    log_warn(
        "max_model_len {} capped to the sliding window {} (sliding-window attention is not "
        "implemented; within the window it equals full attention)",
        max_len, config.sliding_window);
    max_len = config.sliding_window;
  }

  r->arch_ = arch;
  PAGODA_RETURN_IF_ERROR(rope_frequencies(config, max_len));  // fail before a long weight upload
  PAGODA_RETURN_IF_ERROR(r->resolve_kv_cache(weights));
  size_t total_bytes = 0;
  backend.memory_info(&r->free_at_start_, &total_bytes);  // before this runner's allocations
  PAGODA_ASSIGN_OR_RETURN(r->weights_, load_model_weights(*arch, config, backend, weights, shard,
                                                          stage, options.keep_weight_blocks));
  if (options.shared_globals != nullptr) {
    const ModelWeights& shared = *options.shared_globals;
    if (r->weights_.embed.empty()) {
      r->weights_.embed = shared.embed;
      r->weights_.embed_first_row = shared.embed_first_row;
      r->weights_.embed_vocab_parallel = shared.embed_vocab_parallel;
    }
    if (r->weights_.lm_head.empty()) r->weights_.lm_head = shared.lm_head;
  }
  PAGODA_RETURN_IF_ERROR(r->allocate(max_len));
  return r;
}

Tensor ModelRunner::hidden_states() const {
  return buf_->normed.tensor(backend_.compute_dtype(),
                             {options_.max_num_batched_tokens, config_.hidden_size});
}

Tensor ModelRunner::residual_states() const {
  return buf_->residual.tensor(backend_.compute_dtype(),
                               {options_.max_num_batched_tokens, config_.hidden_size});
}

Tensor ModelRunner::aux_hidden_states() const {
  if (buf_ == nullptr || buf_->aux_hidden.data() == nullptr) return {};
  return buf_->aux_hidden.tensor(
      backend_.compute_dtype(),
      {static_cast<int64_t>(options_.aux_hidden_layers.size()), options_.max_num_batched_tokens,
       config_.hidden_size});
}

Tensor ModelRunner::hidden_pool() const {
  if (buf_ == nullptr || buf_->hidden_pool.data() == nullptr) return {};
  const int64_t rows = static_cast<int64_t>(buf_->hidden_pool.size()) /
                       (config_.hidden_size * static_cast<int64_t>(dtype_size(backend_.compute_dtype())));
  return buf_->hidden_pool.tensor(backend_.compute_dtype(), {rows, config_.hidden_size});
}

Status ModelRunner::resolve_kv_cache(WeightSource& weights) {
  PAGODA_ASSIGN_OR_RETURN(
      kv_dtype_, resolve_kv_cache_dtype(options_.kv_cache_dtype, backend_.compute_dtype()));
  kv_scales_.assign(static_cast<size_t>(layers_.size()), KvScales{});
  if (kv_dtype_ != DType::kF8E4M3) return {};
  PAGODA_ASSIGN_OR_RETURN(
      LoadedKvScales loaded,
      load_kv_scales(weights, attention_prefixes(weights, layers_.begin, layers_.size())));
  kv_scales_ = std::move(loaded.scales);
  kv_scales_source_ = std::move(loaded.source);
  return {};
}

// Scratch activations, the rope table and the index arrays for contexts up
// to max_len; on a device, the memory profile; then the KV pool from what is
// left, then the decode and verification graphs.
Status ModelRunner::allocate(int64_t max_len) {
  const size_t es = dtype_size(backend_.compute_dtype());
  const int64_t t = options_.max_num_batched_tokens, h = config_.hidden_size;
  const int64_t v = config_.vocab_size, d = config_.head_dim;
  const int64_t chunk = options_.max_num_seqs;
  const int64_t max_table = (max_len + options_.block_size - 1) / options_.block_size;
  const size_t table_bytes = static_cast<size_t>(max_len * config_.rope_dim()) * sizeof(float);
  buf_ = std::make_unique<Buffers>();
  Buffers& b = *buf_;
  b.layout = IndexLayout(t, options_.max_num_seqs, max_table, chunk, sliding_group_);
  try {
    b.residual = DeviceBuffer(&backend_, t * h * es);
    b.normed = DeviceBuffer(&backend_, t * h * es);
    b.qkv = DeviceBuffer(&backend_, t * layout_.row_width() * es);
    b.attn = DeviceBuffer(&backend_, t * local_.num_heads * d * es);
    b.proj = DeviceBuffer(&backend_, t * h * es);
    if (!options_.aux_hidden_layers.empty())
      b.aux_hidden =
          DeviceBuffer(&backend_, options_.aux_hidden_layers.size() * t * h * es);
    size_t gate_up_bytes = t * 2 * mlp_width(local_) * es;
    if (config_.num_experts > 0) {  // also moe_experts' scratch
      const int64_t moe_bytes = moe_experts_scratch_bytes(t, config_.num_experts_per_tok, h);
      gate_up_bytes = std::max(gate_up_bytes, static_cast<size_t>(moe_bytes));
    }
    b.gate_up = DeviceBuffer(&backend_, gate_up_bytes);
    b.act = DeviceBuffer(&backend_, t * mlp_width(local_) * es);
    if (wants_fp8_producer(options_, weights_)) {
      // ceil(T / 16) * 16 rows: backend.h Fp8Rows.
      b.fp8_codes = DeviceBuffer(&backend_, (t + 15) / 16 * 16 * std::max(h, mlp_width(local_)));
      b.fp8_scales = DeviceBuffer(&backend_, t * sizeof(float));
    }
    if (config_.num_experts > 0) {
      const int64_t e = config_.num_experts, k = config_.num_experts_per_tok;
      b.moe = DeviceBuffer(&backend_, moe_shared_offset(t, e, k) + t * h * es);
    }
    if (stage_.last()) {  // the lm_head's input and output
      b.gathered = DeviceBuffer(&backend_, chunk * h * es);
      b.logits = DeviceBuffer(&backend_, chunk * v * sizeof(float));
      if (tp_size() > 1)
        b.logits_local =
            DeviceBuffer(&backend_, chunk * tp_vocab_block(config_, tp_size()) * sizeof(float));
    }
    b.cos_sin = DeviceBuffer(&backend_, table_bytes);
    if (config_.rope_local_base_freq > 0) b.cos_sin_local = DeviceBuffer(&backend_, table_bytes);
    b.index = DeviceBuffer(&backend_, b.layout.total * sizeof(int32_t));
    b.kv_scales = DeviceBuffer(&backend_, kv_scales_.size() * 2 * sizeof(float));
    for (auto& h : b.host_index) h = std::make_unique<HostBuffer>(&backend_, b.layout.total * sizeof(int32_t));
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::kResourceExhausted,
                      "out of device memory for the scratch of " + std::to_string(t) +
                          " tokens; lower max_num_batched_tokens or max_num_seqs");
  }
  PAGODA_RETURN_IF_ERROR(fill_rope_tables(max_len));
  static_assert(sizeof(KvScales) == 2 * sizeof(float));
  backend_.copy_to_device(b.kv_scales.data(), kv_scales_.data(), b.kv_scales.size());
  backend_.synchronize();  // kv_scales_ may not move while the copy is queued
  if (backend_.kind() != DeviceKind::kCpu) PAGODA_RETURN_IF_ERROR(profile_memory(max_len));
  PAGODA_RETURN_IF_ERROR(allocate_kv(max_len));
  if (use_graphs_) {
    capture_graphs(
        decode_graph_batch_sizes(std::min(options_.max_num_seqs, options_.max_num_batched_tokens)),
        1, "decode", &graph_sizes_, &graph_ids_);
    capture_graphs(verify_graph_batch_sizes(options_.max_num_seqs, options_.max_num_batched_tokens,
                                            options_.verify_graph_query_len, max_model_len_),
                   options_.verify_graph_query_len, "verification", &verify_graph_sizes_,
                   &verify_graph_ids_);
  }
  return {};
}

Status ModelRunner::fill_rope_tables(int64_t max_len) {
  PAGODA_ASSIGN_OR_RETURN(RopeFrequencies freqs, rope_frequencies(config_, max_len));
  const std::vector<float> cos_sin = rope_cos_sin_table(freqs, max_len);
  backend_.copy_to_device(buf_->cos_sin.data(), cos_sin.data(), cos_sin.size() * sizeof(float));
  std::vector<float> cos_sin_local;
  if (buf_->cos_sin_local.data() != nullptr) {
    PAGODA_ASSIGN_OR_RETURN(RopeFrequencies local, local_rope_frequencies(config_));
    cos_sin_local = rope_cos_sin_table(local, max_len);
    backend_.copy_to_device(buf_->cos_sin_local.data(), cos_sin_local.data(),
                            cos_sin_local.size() * sizeof(float));
  }
  backend_.synchronize();  // the host tables must outlive the copies
  return {};
}

Status ModelRunner::profile_memory(int64_t max_len) {
  size_t free_before = 0, free_after = 0, total = 0;
  backend_.memory_info(&free_before, &total);
  const Clock::time_point start = Clock::now();
  const ProfileStep p = make_profile_step(options_.max_num_batched_tokens, options_.max_num_seqs,
                                          max_len, options_.block_size, options_.max_num_seqs,
                                          config_.vocab_size, sliding_group_);
  DeviceBuffer kv, kv_sliding;
  try {
    kv = DeviceBuffer(&backend_, static_cast<size_t>(p.num_blocks * kv_block_bytes()));
    if (sliding_group_)
      kv_sliding =
          DeviceBuffer(&backend_, static_cast<size_t>(p.num_blocks * sliding_kv_block_bytes()));
  } catch (const std::bad_alloc&) {
    return make_error(ErrorCode::kResourceExhausted,
                      "out of device memory for the memory profile's KV cache (" +
                          std::to_string(p.num_blocks) + " blocks); lower max_num_batched_tokens");
  }
  map_kv_caches(kv.data(), p.num_blocks, kv_sliding.data(), sliding_group_ ? p.num_blocks : 0);
  num_kv_blocks_ = p.num_blocks;
  num_sliding_kv_blocks_ = sliding_group_ ? p.num_blocks : 0;
  max_blocks_per_seq_ = p.table_width;
  max_model_len_ = max_len;
  SampleOutput out;
  const Status st = execute(p.step, &out);
  backend_.synchronize();
  buf_->caches.clear();
  for (auto& g : buf_->group_caches) g.clear();
  kv.reset();
  kv_sliding.reset();
  num_kv_blocks_ = num_sliding_kv_blocks_ = max_blocks_per_seq_ = max_model_len_ = 0;
  if (!st.ok()) return make_error(st.error().code, "memory profile step: " + st.error().message);
  backend_.memory_info(&free_after, &total);
  log_info(
      "memory profile: {} tokens in {} sequences + {} sampled rows in {:.2f}s; activation "
      "scratch {:.2f} GiB (preallocated), runtime allocations {:.2f} GiB",
      p.step.token_ids.size(), p.step.seq_lens.size(), p.step.logits_rows.size(),
      seconds_since(start), static_cast<double>(buf_->scratch_bytes()) / kGiB,
      (static_cast<double>(free_before) - static_cast<double>(free_after)) / kGiB);
  return {};
}

// The pools the options allow: --num-kv-blocks when set (the sliding pool by
// kv_pools_for_blocks), else the kv_cache_bytes budget, else on cpu room for
// max_num_seqs sequences of `max_len` tokens (at most half the available
// RAM, kv_budget.h) or, on cuda, the fraction of total memory minus what is
// already in use, split between the groups by split_kv_budget. Sets
// kv_sizing_ to how.
KvPoolSizes ModelRunner::budget_kv_pools(int64_t max_len) {
  const KvGroupShape shape = kv_group_shape();
  if (options_.num_kv_blocks > 0) {
    kv_sizing_ = "--num-kv-blocks";
    return kv_pools_for_blocks(options_.num_kv_blocks, shape, max_len);
  }
  size_t free_bytes = 0, total_bytes = 0;
  backend_.memory_info(&free_bytes, &total_bytes);
  KvBudget budget;
  if (options_.kv_cache_bytes > 0) {
    budget = explicit_kv_budget(options_.kv_cache_bytes);
  } else if (backend_.kind() == DeviceKind::kCpu) {
    // Every rank of this process (tp x pp) takes its pool from the same host memory.
    const int ranks = (options_.tp != nullptr ? options_.tp->size() : 1) *
                      (options_.pp != nullptr ? options_.pp->size() : 1);
    const double step_bytes =
        static_cast<double>(kv_step_blocks(shape)) * static_cast<double>(shape.sliding_block_bytes);
    budget = cpu_kv_budget(kv_seq_bytes(shape, max_len), step_bytes, max_len, options_.max_num_seqs,
                           free_bytes, ranks);
  } else {
    const double fraction = options_.kv_cache_memory_fraction;
    budget = {device_kv_budget_bytes(fraction, total_bytes, free_at_start_, free_bytes),
              fmt::format("--gpu-memory-utilization {:.2f}", fraction)};
  }
  kv_sizing_ = budget.how;
  return split_kv_budget(budget.bytes, shape, max_len);
}

bool ModelRunner::in_sliding_group(int64_t l) const {
  return sliding_group_ && config_.sliding_layers[static_cast<size_t>(layers_.begin + l)];
}

KvGroupShape ModelRunner::kv_group_shape() const {
  KvGroupShape g;
  g.full_block_bytes = kv_block_bytes();
  g.sliding_block_bytes = sliding_kv_block_bytes();
  g.block_size = options_.block_size;
  g.window = sliding_group_ ? config_.sliding_window : 0;
  g.max_step_tokens = options_.max_num_batched_tokens;
  g.max_step_seqs = options_.max_num_seqs;
  return g;
}

int64_t ModelRunner::half_block_bytes() const {
  return options_.block_size * local_.num_kv_heads * config_.head_dim *
         static_cast<int64_t>(dtype_size(kv_dtype_));
}

int64_t ModelRunner::kv_block_bytes() const {
  int64_t layers = 0;
  for (int64_t l = 0; l < layers_.size(); ++l) layers += in_sliding_group(l) ? 0 : 1;
  return 2 * layers * half_block_bytes();
}

int64_t ModelRunner::sliding_kv_block_bytes() const {
  int64_t layers = 0;
  for (int64_t l = 0; l < layers_.size(); ++l) layers += in_sliding_group(l) ? 1 : 0;
  return 2 * layers * half_block_bytes();
}

void ModelRunner::map_kv_caches(void* base, int64_t num_blocks, void* sliding_base,
                                int64_t num_sliding_blocks) {
  const int64_t half_block = half_block_bytes();
  float* scales = static_cast<float*>(buf_->kv_scales.data());  // [layers, 2]
  buf_->caches.clear();
  for (auto& g : buf_->group_caches) g.clear();
  std::array<int64_t, 2> index = {0, 0};  // the next layer's place in each group's pool
  for (int64_t l = 0; l < layers_.size(); ++l) {
    const size_t group = in_sliding_group(l) ? 1 : 0;
    const int64_t n = group == 1 ? num_sliding_blocks : num_blocks;
    char* k =
        static_cast<char*>(group == 1 ? sliding_base : base) + 2 * index[group] * n * half_block;
    char* v = k + n * half_block;
    ++index[group];
    const std::initializer_list<int64_t> dims = {n, options_.block_size, local_.num_kv_heads,
                                                 config_.head_dim};
    const KvCacheView view{Tensor(k, kv_dtype_, dims), Tensor(v, kv_dtype_, dims),
                           options_.block_size, Tensor(scales + 2 * l, DType::kF32, {2})};
    buf_->caches.push_back(view);
    buf_->group_caches[group].push_back(view);
  }
}

// Sizes the pools (budget_kv_pools; with graphs one more block in each, the
// padding rows' scratch, zeroed), caps max_model_len to what one sequence can
// hold when it was derived from the config, and allocates (the engine logs
// the capacity).
Status ModelRunner::allocate_kv(int64_t max_len) {
  const int64_t bs = options_.block_size;
  const int64_t reserved = use_graphs_ ? 1 : 0;
  const KvGroupShape shape = kv_group_shape();
  // Under tp and pp every rank sizes its own pools (a stage for its own
  // layers); all then take the smallest of each, so the ranks hold the same
  // blocks and the same max_model_len.
  const KvPoolSizes own = budget_kv_pools(max_len);
  KvPoolSizes budget{min_over_ranks(own.full), min_over_ranks(own.sliding)};
  // A peer that failed aborted the communicators: its error, not a sizing one.
  PAGODA_RETURN_IF_ERROR(device_status());
  const bool given = options_.num_kv_blocks > 0;
  const int64_t num_blocks = given ? budget.full : budget.full - reserved;
  const int64_t num_sliding =
      sliding_group_ ? (given ? budget.sliding : budget.sliding - reserved) : 0;
  if (num_blocks < 1 || (sliding_group_ && num_sliding < 1))
    return make_error(ErrorCode::kResourceExhausted,
                      fmt::format("no memory left for the KV cache ({} bytes per block{}); raise "
                                  "the memory fraction or the cpu KV budget",
                                  shape.full_block_bytes,
                                  sliding_group_ ? fmt::format(", + {} per sliding-window block",
                                                               shape.sliding_block_bytes)
                                                 : ""));
  // The longest sequence both pools hold: every token's block in the full
  // pool, the window behind its largest step in the sliding pool.
  int64_t capacity = num_blocks * bs;
  if (sliding_group_ &&
      num_sliding < sliding_window_blocks(shape.window, bs, max_len, shape.max_step_tokens))
    capacity = std::min(capacity, num_sliding * bs);
  if (capacity < max_len) {
    if (options_.max_model_len > 0)
      return make_error(ErrorCode::kResourceExhausted,
                        "the KV cache holds " + std::to_string(capacity) +
                            " tokens, less than max_model_len " + std::to_string(max_len) +
                            "; lower max_model_len or give the cache more memory");
    log_warn("max_model_len {} capped to the KV cache capacity {}", max_len, capacity);
    max_len = capacity;
    // longrope's factor set follows max_model_len: the table for the capped length.
    PAGODA_RETURN_IF_ERROR(fill_rope_tables(max_len));
  }
  max_model_len_ = max_len;
  max_blocks_per_seq_ = (max_len + bs - 1) / bs;
  num_kv_blocks_ = num_blocks;
  num_sliding_kv_blocks_ = num_sliding;
  const int64_t pool = num_blocks + reserved;
  const int64_t sliding_pool = sliding_group_ ? num_sliding + reserved : 0;
  Buffers& b = *buf_;
  try {
    b.kv = DeviceBuffer(&backend_, static_cast<size_t>(pool * shape.full_block_bytes));
    if (sliding_pool > 0)
      b.kv_sliding =
          DeviceBuffer(&backend_, static_cast<size_t>(sliding_pool * shape.sliding_block_bytes));
  } catch (const std::bad_alloc&) {
    return make_error(
        ErrorCode::kResourceExhausted,
        fmt::format(
            "out of memory allocating a KV cache of {} blocks{}", pool,
            sliding_group_ ? fmt::format(" + {} sliding-window blocks", sliding_pool) : ""));
  }
  map_kv_caches(b.kv.data(), pool, b.kv_sliding.data(), sliding_pool);
  if (options_.architecture != nullptr) {
    // One row past the pool's blocks too: the decode-graph padding rows' slots.
    const int64_t rows = (num_blocks + 1) * bs;
    try {
      b.hidden_pool = DeviceBuffer(
          &backend_, static_cast<size_t>(rows * config_.hidden_size) *
                         dtype_size(backend_.compute_dtype()));
    } catch (const std::bad_alloc&) {
      return make_error(ErrorCode::kResourceExhausted,
                        fmt::format("out of memory allocating a hidden-state pool of {} rows", rows));
    }
  }
  if (reserved > 0) {
    scratch_block_ = static_cast<int32_t>(num_blocks);
    sliding_scratch_block_ = sliding_group_ ? static_cast<int32_t>(num_sliding) : -1;
    const size_t half_block = static_cast<size_t>(half_block_bytes());
    const std::vector<char> zeros(half_block, 0);
    for (const auto& [caches, block] : {std::pair{&b.group_caches[0], scratch_block_},
                                        std::pair{&b.group_caches[1], sliding_scratch_block_}})
      for (const KvCacheView& c : *caches)
        for (const Tensor& t : {c.k, c.v})
          backend_.copy_to_device(static_cast<char*>(t.data) + block * half_block, zeros.data(),
                                  half_block);
    backend_.synchronize();
    log_debug("KV cache: + 1 scratch block per KV group for decode-graph padding");
  }
  return {};
}

StepLimits ModelRunner::limits() const {
  StepLimits l;
  l.max_tokens = options_.max_num_batched_tokens;
  l.max_seqs = options_.max_num_seqs;
  l.max_blocks_per_seq = max_blocks_per_seq_;
  l.num_kv_blocks = num_kv_blocks_;
  l.num_sliding_kv_blocks = num_sliding_kv_blocks_;
  l.sliding_window = sliding_group_ ? config_.sliding_window : 0;
  l.block_size = options_.block_size;
  l.vocab_size = config_.vocab_size;
  l.input_vocab_size = options_.input_vocab_size;
  l.max_model_len = max_model_len_;
  return l;
}

int32_t* ModelRunner::staging() const { return buf_->host_index[static_cast<size_t>(slot_)]->i32(); }

void ModelRunner::upload_index(int64_t offset, const int32_t* data, int64_t n) {
  std::memcpy(staging() + offset, data, static_cast<size_t>(n) * sizeof(int32_t));
  upload_staged(offset, n);
}

void ModelRunner::upload_staged(int64_t offset, int64_t n) {
  backend_.copy_to_device(static_cast<int32_t*>(buf_->index.data()) + offset, staging() + offset,
                          static_cast<size_t>(n) * sizeof(int32_t));
}

void ModelRunner::fill_pending_tokens(const std::vector<int32_t>& rows,
                                      const std::vector<int32_t>& sources, int64_t num_tokens) {
  if (rows.empty()) return;
  const IndexLayout& at = buf_->layout;
  const auto num_earlier = static_cast<int32_t>(earlier_chunk_ids_.size());
  device_pending_rows_.clear();
  device_pending_sources_.clear();
  host_pending_rows_.clear();
  int32_t* staged_ids = staging() + at.ids;
  for (size_t i = 0; i < rows.size(); ++i) {
    if (sources[i] < num_earlier) {
      // The staged ids may still be uploading: the upload below (stream-
      // ordered after it) writes the id whichever value it read.
      staged_ids[rows[i]] = earlier_chunk_ids_[static_cast<size_t>(sources[i])];
      host_pending_rows_.push_back(rows[i]);
    } else {
      device_pending_rows_.push_back(rows[i]);
      device_pending_sources_.push_back(sources[i] - num_earlier);
    }
  }
  // One upload per run of consecutive rows (a decode step's rows are one run).
  std::sort(host_pending_rows_.begin(), host_pending_rows_.end());
  for (size_t b = 0, e = 0; b < host_pending_rows_.size(); b = e) {
    e = b + 1;
    while (e < host_pending_rows_.size() && host_pending_rows_[e] == host_pending_rows_[e - 1] + 1)
      ++e;
    upload_staged(at.ids + host_pending_rows_[b], static_cast<int64_t>(e - b));
  }
  const auto n = static_cast<int64_t>(device_pending_rows_.size());
  if (n == 0) return;
  upload_index(at.pending_rows, device_pending_rows_.data(), n);
  upload_index(at.pending_sources, device_pending_sources_.data(), n);
  Tensor ids = buf_->i32(at.ids, num_tokens);
  backend_.copy_sampled_tokens(buf_->i32(at.pending_rows, n), buf_->i32(at.pending_sources, n), ids);
}

ModelRunner::ForwardRows ModelRunner::run_forward(const StepBatch& step) {
  const auto num_seqs = static_cast<int64_t>(step.seq_lens.size());
  const int32_t verify_len = options_.verify_graph_query_len;
  last_graph_batch_ = 0;
  hidden_row_map_.clear();
  if (graphs_paused_.load()) {
    prepare_and_forward(step);
    return {step.num_tokens(), step.logits_rows.data()};
  }
  if (is_decode_only(step)) {
    const int graph = pick_decode_graph(graph_sizes_, num_seqs);
    if (graph >= 0) {
      // Real rows keep their numbers: padding rows come after them.
      const int64_t batch = graph_sizes_[static_cast<size_t>(graph)];
      upload_padded_index(step, batch, 1);
      fill_pending_tokens(step.pending_rows, step.pending_sources, batch);
      apply_block_copies(step);
      backend_.replay_graph(graph_ids_[static_cast<size_t>(graph)]);
      last_graph_batch_ = batch;
      return {step.num_tokens(), step.logits_rows.data()};
    }
  } else if (!verify_graph_sizes_.empty() &&
             fits_verify_graph(step, verify_len, /*left_padding=*/!sliding_group_)) {
    const int graph = pick_decode_graph(verify_graph_sizes_, num_seqs);
    if (graph >= 0) {
      const int64_t batch = verify_graph_sizes_[static_cast<size_t>(graph)];
      hidden_row_map_ = verify_row_map(step, verify_len);
      const std::vector<int32_t>& row_map = hidden_row_map_;
      auto renumber = [&row_map](const std::vector<int32_t>& rows, std::vector<int32_t>* out) {
        out->clear();
        for (const int32_t r : rows) out->push_back(row_map[static_cast<size_t>(r)]);
      };
      renumber(step.logits_rows, &padded_logits_rows_);
      renumber(step.pending_rows, &padded_pending_rows_);
      upload_padded_index(step, batch, verify_len);
      fill_pending_tokens(padded_pending_rows_, step.pending_sources, batch * verify_len);
      apply_block_copies(step);
      backend_.replay_graph(verify_graph_ids_[static_cast<size_t>(graph)]);
      last_graph_batch_ = batch;
      return {batch * verify_len, padded_logits_rows_.data()};
    }
  }
  prepare_and_forward(step);
  return {step.num_tokens(), step.logits_rows.data()};
}

void ModelRunner::prepare_and_forward(const StepBatch& step) {
  Buffers& b = *buf_;
  const IndexLayout& at = b.layout;
  const int64_t t = static_cast<int64_t>(step.token_ids.size());
  const int64_t num_seqs = static_cast<int64_t>(step.seq_lens.size());
  upload_index(at.ids, step.token_ids.data(), t);
  upload_index(at.positions, step.positions.data(), t);
  upload_index(at.slots, step.slot_mapping.data(), t);
  upload_index(at.qsl, step.query_start_loc.data(), num_seqs + 1);
  upload_index(at.seq_lens, step.seq_lens.data(), num_seqs);
  upload_index(at.tables, step.block_tables.data(), num_seqs * step.max_blocks_per_seq);
  if (sliding_group_) {
    upload_index(at.sliding_slots, step.sliding_slot_mapping.data(), t);
    upload_index(at.sliding_tables, step.sliding_block_tables.data(),
                 num_seqs * step.max_blocks_per_seq);
  }
  fill_pending_tokens(step.pending_rows, step.pending_sources, t);
  apply_block_copies(step);

  AttentionMetadata meta;
  meta.query_start_loc = b.i32(at.qsl, num_seqs + 1);
  meta.seq_lens = b.i32(at.seq_lens, num_seqs);
  meta.block_tables = b.i32(at.tables, num_seqs * step.max_blocks_per_seq)
                          .reshape({num_seqs, step.max_blocks_per_seq});
  meta.num_seqs = static_cast<int>(num_seqs);
  meta.max_blocks_per_seq = step.max_blocks_per_seq;
  for (int64_t s = 0; s < num_seqs; ++s) {
    const int q_len = step.query_start_loc[s + 1] - step.query_start_loc[s];
    meta.max_query_len = std::max(meta.max_query_len, q_len);
    meta.max_seq_len = std::max(meta.max_seq_len, step.seq_lens[s]);
    if (q_len == 1 && meta.num_decode_seqs == s) ++meta.num_decode_seqs;  // the leading run
  }
  AttentionMetadata sliding_meta = meta;
  if (sliding_group_)
    sliding_meta.block_tables = b.i32(at.sliding_tables, num_seqs * step.max_blocks_per_seq)
                                    .reshape({num_seqs, step.max_blocks_per_seq});
  forward(t, meta, sliding_meta);
}

void ModelRunner::apply_block_copies(const StepBatch& step) {
  if (!step.copy_src.empty())
    backend_.copy_blocks(buf_->group_caches[0], step.copy_src, step.copy_dst);
  if (!step.sliding_copy_src.empty())
    backend_.copy_blocks(buf_->group_caches[1], step.sliding_copy_src, step.sliding_copy_dst);
}

void ModelRunner::upload_padded_index(const StepBatch& step, int64_t batch, int32_t query_len) {
  Buffers& b = *buf_;
  const IndexLayout& at = b.layout;
  int32_t* h = staging();
  DecodeIndexViews views{h + at.ids, h + at.positions, h + at.slots,
                         h + at.qsl, h + at.seq_lens,  h + at.tables};
  if (sliding_group_) {
    views.sliding_slots = h + at.sliding_slots;
    views.sliding_block_tables = h + at.sliding_tables;
  }
  if (query_len == 1) {
    write_padded_decode_index(step, batch, max_blocks_per_seq_, scratch_block_,
                              sliding_scratch_block_, views);
  } else {
    write_padded_verify_index(step, batch, query_len, max_blocks_per_seq_, options_.block_size,
                              scratch_block_, sliding_scratch_block_, views);
  }
  // ids, positions, slots, qsl and seq_lens are consecutive regions: one
  // upload covers them up to seq_lens' first `batch` entries. The tables
  // keep the graph's row stride (max_blocks_per_seq_, 8192 at a 128k
  // context), but only the columns this step (or a padding sequence of
  // query_len tokens) uses travel (the kernels never read past a sequence's
  // own blocks): batch 256 at 1k context moves 64 KB, not 8 MB.
  upload_staged(at.ids, at.seq_lens + batch - at.ids);
  const int64_t padding_width = (query_len + options_.block_size - 1) / options_.block_size;
  const int64_t width = std::clamp<int64_t>(
      std::max<int64_t>(step.max_blocks_per_seq, padding_width), 1, max_blocks_per_seq_);
  const size_t pitch = static_cast<size_t>(max_blocks_per_seq_) * sizeof(int32_t);
  auto upload_tables = [&](int64_t tables) {
    backend_.copy_to_device_2d(static_cast<int32_t*>(b.index.data()) + tables, pitch, h + tables,
                               pitch, static_cast<size_t>(width) * sizeof(int32_t),
                               static_cast<size_t>(batch));
  };
  upload_tables(at.tables);
  if (sliding_group_) {
    upload_tables(at.sliding_tables);
    upload_staged(at.sliding_slots, batch * query_len);
  }
}

AttentionMetadata ModelRunner::graph_metadata(int64_t batch, int32_t query_len,
                                              bool sliding) const {
  const Buffers& b = *buf_;
  const IndexLayout& at = b.layout;
  AttentionMetadata m;
  m.query_start_loc = b.i32(at.qsl, batch + 1);
  m.seq_lens = b.i32(at.seq_lens, batch);
  m.block_tables = b.i32(sliding ? at.sliding_tables : at.tables, batch * max_blocks_per_seq_)
                       .reshape({batch, max_blocks_per_seq_});
  m.num_seqs = static_cast<int>(batch);
  m.max_query_len = query_len;
  m.max_seq_len = static_cast<int>(max_model_len_);
  m.max_blocks_per_seq = static_cast<int>(max_blocks_per_seq_);
  m.num_decode_seqs = query_len == 1 ? static_cast<int>(batch) : 0;
  return m;
}

void ModelRunner::capture_graphs(const std::vector<int64_t>& sizes, int32_t query_len,
                                 const char* what, std::vector<int64_t>* out_sizes,
                                 std::vector<int>* out_ids) {
  size_t free_before = 0, free_after = 0, total = 0;
  backend_.memory_info(&free_before, &total);
  const Clock::time_point start = Clock::now();
  const StepBatch no_seqs;  // an all-padding batch: what the graphs read at capture
  for (const int64_t batch : sizes) {
    // Under tp and pp the ranks agree on every stop (a rank replaying a graph
    // runs its collectives and stage hand-offs on the padded batch, so all
    // must have the same graphs).
    if (!all_ranks(seconds_since(start) <= kGraphCaptureBudgetSeconds)) {
      log_warn(
          "{} graphs: capture stopped at batch {} after {:.1f}s; larger {} batches run "
          "eagerly",
          what, batch, seconds_since(start), what);
      break;
    }
    upload_padded_index(no_seqs, batch, query_len);
    const AttentionMetadata meta = graph_metadata(batch, query_len, false);
    const AttentionMetadata sliding_meta = graph_metadata(batch, query_len, sliding_group_);
    const int64_t rows = batch * query_len;
    // Eager warm-up: per-shape library plans (cuBLASLt) are built outside
    // the capture; the sync also frees the staging buffer for the next size.
    forward(rows, meta, sliding_meta);
    backend_.synchronize();
    const int id = backend_.capture_graph(
        [this, rows, meta, sliding_meta] { forward(rows, meta, sliding_meta); });
    if (!all_ranks(id >= 0)) {
      log_warn("{} graphs: capture failed at batch {}{}; those steps run eagerly", what, batch,
               id >= 0 ? " on another tensor- or pipeline-parallel rank" : "");
      out_sizes->clear();
      out_ids->clear();
      return;
    }
    out_sizes->push_back(batch);
    out_ids->push_back(id);
  }
  if (out_sizes->empty()) return;
  backend_.memory_info(&free_after, &total);
  log_info("{} graphs: {} batch sizes ({}..{}){} captured in {:.2f}s, {:.0f} MiB of device memory",
           what, out_sizes->size(), out_sizes->front(), out_sizes->back(),
           query_len == 1 ? "" : fmt::format(" of {} tokens per sequence", query_len),
           seconds_since(start),
           (static_cast<double>(free_before) - static_cast<double>(free_after)) / kMiB);
}

// The family's forward on views of the scratch (graph-capturable).
void ModelRunner::forward(int64_t t, const AttentionMetadata& meta,
                          const AttentionMetadata& sliding_meta) {
  Buffers& b = *buf_;
  const DType cd = backend_.compute_dtype();
  const int64_t h = config_.hidden_size, inter = local_.intermediate_size;
  ForwardContext ctx{
      .backend = backend_,
      .config = config_,
      .tp = options_.tp,
      .pp = options_.pp,
      .layout = layout_,
      .attention_scale = attention_scale_,
      .eps = static_cast<float>(config_.rms_norm_eps),
      .ids = b.i32(b.layout.ids, t),
      .positions = b.i32(b.layout.positions, t),
      .slots = b.i32(b.layout.slots, t),
      .meta = meta,
      .cos_sin = b.cos_sin.tensor(DType::kF32, {max_model_len_, config_.rope_dim()}),
      .cos_sin_local =
          b.cos_sin_local.data() == nullptr
              ? Tensor()
              : b.cos_sin_local.tensor(DType::kF32, {max_model_len_, config_.rope_dim()}),
      .caches = b.caches,
      .residual = b.residual.tensor(cd, {t, h}),
      .normed = b.normed.tensor(cd, {t, h}),
      .qkv = b.qkv.tensor(cd, {t, layout_.row_width()}),
      .attn = b.attn.tensor(cd, {t, static_cast<int64_t>(layout_.num_q_heads) * layout_.head_dim}),
      .proj = b.proj.tensor(cd, {t, h}),
      .gate_up = b.gate_up.tensor(cd, {t, 2 * inter}),
      .act = b.act.tensor(cd, {t, inter})};
  ctx.first_layer = layers_.begin;
  if (b.fp8_codes.data() != nullptr) {
    ctx.fp8_codes = b.fp8_codes.tensor(DType::kF8E4M3, {t, std::max(h, mlp_width(local_))});
    ctx.fp8_scales = b.fp8_scales.tensor(DType::kF32, {t});
  }
  if (sliding_group_) {
    ctx.sliding_slots = b.i32(b.layout.sliding_slots, t);
    ctx.sliding_meta = &sliding_meta;
  }
  if (config_.num_experts > 0) set_moe_scratch(t, &ctx);
  ctx.hidden_pool = hidden_pool();
  if (!options_.aux_hidden_layers.empty()) {
    ctx.aux_layers = options_.aux_hidden_layers;
    ctx.aux_hidden = aux_hidden_states();
  }
  arch_->forward(weights_, ctx);
}

void ModelRunner::set_moe_scratch(int64_t t, ForwardContext* ctx) const {
  const Buffers& b = *buf_;
  const DType cd = backend_.compute_dtype();
  const int64_t e = config_.num_experts, k = config_.num_experts_per_tok;
  const int64_t im = config_.moe_intermediate_size, is = config_.shared_expert_intermediate_size;
  float* f = static_cast<float*>(b.moe.data());
  const int64_t max_t = options_.max_num_batched_tokens;  // the regions are sized for it
  ctx->router_logits = Tensor(f, DType::kF32, {t, e});
  ctx->topk_weights = Tensor(f + max_t * e, DType::kF32, {t, k});
  ctx->topk_ids = Tensor(f + max_t * (e + k), DType::kI32, {t, k});
  ctx->shared_out = Tensor(static_cast<char*>(b.moe.data()) + moe_shared_offset(max_t, e, k), cd,
                           {t, config_.hidden_size});
  const int64_t scratch_bytes = moe_experts_scratch_bytes(t, k, config_.hidden_size);
  const auto es = static_cast<int64_t>(dtype_size(cd));
  ctx->expert_gate_up = b.gate_up.tensor(cd, {(scratch_bytes + es - 1) / es});
  ctx->expert_act = b.act.tensor(cd, {t * k, im});
  ctx->shared_gate_up = b.gate_up.tensor(cd, {t, 2 * is});
  ctx->shared_act = b.act.tensor(cd, {t, is});
}

Tensor ModelRunner::compute_logits(const ForwardRows& rows, int64_t r0, int64_t r1) {
  Buffers& b = *buf_;
  const DType cd = backend_.compute_dtype();
  const int64_t t = rows.num_tokens;
  const int64_t n = r1 - r0;
  // The previous chunk's upload has run: its sample() / copy_to_host waited.
  upload_index(b.layout.rows, rows.logits_rows + r0, n);
  Tensor normed = b.normed.tensor(cd, {t, config_.hidden_size});
  Tensor gathered = b.gathered.tensor(cd, {n, config_.hidden_size});
  Tensor logits = b.logits.tensor(DType::kF32, {n, config_.vocab_size});
  backend_.gather_rows(normed, b.i32(b.layout.rows, n), gathered);
  // Under tp the rank's vocab block, then the gather (tensor_parallel.h).
  Tensor mine = tp_size() > 1
                    ? b.logits_local.tensor(DType::kF32, {n, tp_vocab_block(config_, tp_size())})
                    : logits;
  backend_.linear(gathered, weights_.lm_head, Tensor(), mine);
  if (config_.final_logit_softcapping > 0)
    backend_.softcap(mine, static_cast<float>(config_.final_logit_softcapping));
  if (tp_size() > 1) options_.tp->all_gather_columns(mine, logits);
  return logits;
}

Status ModelRunner::device_status() const {
  const Status st = backend_.status();
  if (!st.ok())
    return make_error(ErrorCode::kInternal,
                      fmt::format("{} failed: {}", backend_.name(), st.error().message));
  for (const auto& [comm, what] : {std::pair{options_.tp, "tensor-parallel"},
                                    std::pair{options_.pp, "pipeline-parallel"}}) {
    if (comm == nullptr) continue;
    const Status cs = comm->status();
    if (!cs.ok())
      return make_error(ErrorCode::kInternal,
                        fmt::format("{} communicator ({}, rank {} of {}) failed: {}", what,
                                    comm->name(), comm->rank(), comm->size(), cs.error().message));
  }
  return st;
}

bool ModelRunner::all_ranks(bool ok) {
  return min_over_ranks(ok ? 1 : 0) == 1;
}

int64_t ModelRunner::min_over_ranks(int64_t value) {
  // The tp minimum is the same on every rank of a stage; its minimum over the
  // stages is then the minimum over all tp x pp ranks.
  return tp_min(options_.pp, backend_, tp_min(options_.tp, backend_, value));
}

Status ModelRunner::execute(const StepBatch& step, SampleOutput* out) {
  PAGODA_RETURN_IF_ERROR(launch(step, 0));
  return collect(0, out);
}

Status ModelRunner::launch(const StepBatch& step, int slot) {
  if (slot < 0 || slot >= kNumStepSlots || launched_[static_cast<size_t>(slot)].active) {
    return make_error(ErrorCode::kInternal, fmt::format("launch on slot {}: not a free step slot", slot));
  }
  if (stage_.size > 1 && !step.pending_rows.empty()) {
    return make_error(ErrorCode::kInternal,
                      "pipeline parallelism: a step with pending rows (sampled ids kept on the "
                      "device) cannot run on a pipeline stage; async scheduling must be off");
  }
  for (const Launched& l : launched_) {
    if (l.sampling_deferred)
      return make_error(ErrorCode::kInternal,
                        "launch while a step's deferred sampling is not launched");
  }
  if (step.defer_sampling &&
      (stage_.size > 1 || static_cast<int64_t>(step.logits_rows.size()) > options_.max_num_seqs)) {
    return make_error(
        ErrorCode::kInternal,
        "defer_sampling: needs one lm_head chunk (rows <= max_num_seqs) and no pipeline");
  }
  {
    StepLimits l = limits();
    l.num_pending_sources = last_launched_rows_;
    PAGODA_RETURN_IF_ERROR(validate_step(step, l, /*sampling=*/!step.defer_sampling));
  }
  Launched& st = launched_[static_cast<size_t>(slot)];
  st = Launched{};
  st.active = true;
  slot_ = slot;
  // The slot's previous step was collected, so its uploads have run; this
  // returns at once unless the caller skipped collect().
  backend_.wait_fence(slot);
  const ForwardRows rows = run_forward(step);
  st.graph_batch = last_graph_batch_;
  // Only the last pipeline stage has the lm_head: the others sample nothing.
  const int64_t num_rows = stage_.last() ? static_cast<int64_t>(step.logits_rows.size()) : 0;
  const int64_t chunk = options_.max_num_seqs;
  for (int64_t r0 = 0; r0 < num_rows; r0 += chunk) {
    const int64_t r1 = std::min(num_rows, r0 + chunk);
    const Tensor logits = compute_logits(rows, r0, r1);
    if (step.defer_sampling) {
      st.logits = logits;
      st.sampling_deferred = true;
    } else if (r1 == num_rows) {
      backend_.sample_async(logits, r0 == 0 ? step.sampling : slice_sampling_batch(step.sampling, r0, r1), slot);
      st.has_last_chunk = true;
    } else {
      // Earlier chunks wait: the logits and row buffers hold one chunk.
      const Clock::time_point wait_start = Clock::now();
      SampleOutput part;
      backend_.sample_async(logits, slice_sampling_batch(step.sampling, r0, r1), slot);
      backend_.finish_sample(slot, part);
      append_sample_output(part, &st.earlier_chunks);
      st.wait_seconds += seconds_since(wait_start);
    }
  }
  // A deferred sampling records the fence when it is launched.
  if (!st.sampling_deferred) backend_.record_fence(slot);
  // The device keeps the last chunk's ids; the earlier chunks' were waited for.
  last_launched_rows_ = num_rows;
  earlier_chunk_ids_ = st.earlier_chunks.token_ids;
  const Status status = device_status();
  if (!status.ok()) st = Launched{};  // a failed launch is not collected; the slot stays free
  return status;
}

Status ModelRunner::launch_sampling(int slot, const SamplingBatch& batch) {
  if (slot < 0 || slot >= kNumStepSlots ||
      !launched_[static_cast<size_t>(slot)].sampling_deferred) {
    return make_error(
        ErrorCode::kInternal,
        fmt::format("launch_sampling on slot {}: no step waits for its sampling there", slot));
  }
  Launched& st = launched_[static_cast<size_t>(slot)];
  const int64_t num_rows = st.logits.dim(0);
  const Status valid = validate_sampling(batch, num_rows, config_.vocab_size);
  if (!valid.ok()) {
    // The step cannot sample: it is dropped (not collected), its slot freed,
    // and no later step may take pending tokens from it.
    backend_.record_fence(slot);
    st = Launched{};
    last_launched_rows_ = 0;
    earlier_chunk_ids_.clear();
    return valid;
  }
  backend_.sample_async(st.logits, batch, slot);
  backend_.record_fence(slot);
  st.sampling_deferred = false;
  st.logits = Tensor();
  st.has_last_chunk = true;
  const Status status = device_status();
  if (!status.ok()) st = Launched{};
  return status;
}

Status ModelRunner::collect(int slot, SampleOutput* out) {
  if (slot < 0 || slot >= kNumStepSlots || !launched_[static_cast<size_t>(slot)].active) {
    return make_error(ErrorCode::kInternal, fmt::format("collect on slot {}: nothing launched there", slot));
  }
  Launched& st = launched_[static_cast<size_t>(slot)];
  if (st.sampling_deferred) {
    return make_error(
        ErrorCode::kInternal,
        fmt::format("collect on slot {}: its deferred sampling was not launched", slot));
  }
  st.active = false;
  const Clock::time_point wait_start = Clock::now();
  *out = std::move(st.earlier_chunks);
  if (st.has_last_chunk) {
    SampleOutput last;
    backend_.finish_sample(slot, last);
    append_sample_output(last, out);
  } else {
    backend_.wait_fence(slot);
  }
  last_wait_seconds_ = st.wait_seconds + seconds_since(wait_start);
  last_graph_batch_ = st.graph_batch;
  st = Launched{};
  return device_status();
}

Status ModelRunner::execute_logits(const StepBatch& step, std::vector<float>* logits) {
  if (!step.pending_rows.empty()) {
    return make_error(ErrorCode::kInvalidArgument, "step input: execute_logits takes no pending rows");
  }
  PAGODA_RETURN_IF_ERROR(validate_step(step, limits(), /*sampling=*/false));
  for (const Launched& l : launched_) {
    if (l.active) return make_error(ErrorCode::kInternal, "execute_logits while a step is launched");
  }
  slot_ = 0;
  backend_.wait_fence(0);
  const ForwardRows rows = run_forward(step);
  if (!stage_.last()) {  // no lm_head here: the forward's part only
    logits->clear();
    backend_.synchronize();
    return device_status();
  }
  const int64_t num_rows = static_cast<int64_t>(step.logits_rows.size());
  const int64_t v = config_.vocab_size;
  logits->resize(static_cast<size_t>(num_rows * v));
  for (int64_t r0 = 0; r0 < num_rows; r0 += options_.max_num_seqs) {
    const int64_t r1 = std::min(num_rows, r0 + options_.max_num_seqs);
    const Tensor chunk = compute_logits(rows, r0, r1);
    backend_.copy_to_host(logits->data() + r0 * v, chunk.data, chunk.nbytes());
  }
  return device_status();
}

}  // namespace pagoda
