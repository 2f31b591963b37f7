// ModelRunner: the model's weights, KV cache and scratch on one backend, and
// the forward step that turns a plain-data StepBatch (batch/step_batch.h)
// into sampled tokens.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/communicator.h"
#include "batch/step_batch.h"
#include "core/result.h"
#include "io/model_config.h"
#include "io/weight_source.h"
#include "model/forward_context.h"
#include "model/kv_budget.h"
#include "model/kv_scales.h"
#include "model/pipeline_parallel.h"
#include "model/runner.h"
#include "model/runner_options.h"
#include "model/tensor_parallel.h"
#include "model/weights.h"

namespace pagoda {

struct Architecture;  // architecture.h
struct StepLimits;    // step_validation.h

class ModelRunner final : public Runner {
 public:
  // Validates the config, uploads the weights (progress bar + log line:
  // tensors, bytes, seconds), precomputes the rope table and allocates
  // scratch for max_num_batched_tokens. On a device backend (not cpu) it then
  // runs one profile step at that size (memory_profile.h) so every lazy
  // allocation has happened, sizes the KV pool (budget_kv_blocks) and, unless enforce_eager or the
  // backend has no graphs, captures the decode graphs and, with
  // options.verify_graph_query_len > 1, the verification graphs
  // (verify_graphs.h). The engine logs the KV capacity.
  //
  // KV groups (options.sliding_kv_group, a model with both sliding-window and
  // full-attention layers): the sliding layers' KV lives in a second pool of
  // num_sliding_kv_blocks() blocks (kv_budget.h's split_kv_budget /
  // kv_pools_for_blocks: both pools hold the same number of max_model_len
  // sequences), read and written through each step's sliding_* tables and
  // slots, which launch() then requires; block copies apply per group.
  //
  // Tensor parallelism (options.tp of size N): first validate_tensor_parallel
  // (tensor_parallel.h); the runner then holds rank tp->rank()'s shard (its
  // query / kv heads and intermediate rows; the lm_head whole, so every rank
  // computes the full logits and samples the same tokens) and sizes its QKV
  // layout, scratch, KV blocks and graphs from the shard's sizes; config()
  // stays the whole model's. The N ranks' runners must be created
  // concurrently (one thread each on the cpu): the profile step's forward,
  // the KV sizing (every rank takes the smallest pool, so all report the same
  // num_kv_blocks and max_model_len) and the decode-graph captures run
  // collectives. After that every rank must get the same calls with the same
  // steps, in the same order. Only rank 0 shows the load progress and log.
  //
  // Pipeline parallelism (options.pp of size M; pipeline_parallel.h): first
  // validate_pipeline_parallel; the runner then holds stage pp->rank()'s
  // layers (pp_layers) and their KV caches only, the embedding on stage 0 and
  // the final norm and lm_head on the last stage. Combined with tp, options.tp
  // is the stage's tensor-parallel group and options.pp the group of the
  // ranks with the same tp rank across the stages. The runners of every stage
  // (and tp rank) must be created concurrently and then get the same calls
  // with the same steps: the forward hands the hidden states from stage to
  // stage, the KV sizing takes the smallest pool over every rank of both
  // groups (each stage sizes its pool for its own layers), and the ranks of
  // both groups agree on every decode graph. Only the last stage computes
  // logits and samples (is_last_stage()); steps with pending rows are refused
  // (the sampled ids would be on the last stage's device, not stage 0's).
  static Result<std::unique_ptr<ModelRunner>> create(Backend& backend, const ModelConfig& config,
                                                     WeightSource& weights,
                                                     const RunnerOptions& options);
  ~ModelRunner() override;
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  int64_t num_kv_blocks() const override { return num_kv_blocks_; }
  int64_t num_sliding_kv_blocks() const override { return num_sliding_kv_blocks_; }
  // How the pool was sized, for the start-up log: "--num-kv-blocks",
  // "--kv-cache-memory-bytes 2.00 GiB", "room for 256 seqs x 2048 tokens[
  // would take ...; capped at ...]" (cpu) or "--gpu-memory-utilization 0.90".
  const std::string& kv_sizing() const override { return kv_sizing_; }
  // Bytes of one KV block across the layers of this runner (its pipeline
  // stage's; k and v) that keep their whole context: all of them without a
  // sliding-window group.
  int64_t kv_block_bytes() const override;
  // The same across its layers in the sliding-window group (0 without one).
  int64_t sliding_kv_block_bytes() const override;
  DType kv_cache_dtype() const override { return kv_dtype_; }
  const std::string& kv_scales_source() const override { return kv_scales_source_; }
  int block_size() const override { return options_.block_size; }
  int64_t max_model_len() const override { return max_model_len_; }
  int64_t max_num_batched_tokens() const override { return options_.max_num_batched_tokens; }
  int64_t max_num_seqs() const override { return options_.max_num_seqs; }
  int64_t max_blocks_per_seq() const { return max_blocks_per_seq_; }  // table width limit
  const ModelConfig& config() const { return config_; }
  // The uploaded weights; bytes_by_dtype says which formats they are in.
  const ModelWeights& weights() const { return weights_; }
  // The decoder layers this runner holds (global indices; all without pp).
  IndexRange layers() const { return layers_; }
  // Whether this runner ends the pipeline: computes logits and samples
  // (always without pp). Other stages' collect() returns an empty
  // SampleOutput and their execute_logits no rows.
  bool is_last_stage() const { return stage_.last(); }
  Backend& backend() const { return backend_; }
  // Batch sizes with a captured decode graph, ascending (empty: all eager).
  const std::vector<int64_t>& decode_graph_sizes() const override { return graph_sizes_; }
  // Batch sizes (sequences) with a captured verification graph of
  // verify_graph_query_len() rows per sequence, ascending (empty: none).
  const std::vector<int64_t>& verify_graph_sizes() const { return verify_graph_sizes_; }
  int32_t verify_graph_query_len() const { return options_.verify_graph_query_len; }
  // The padded batch size (sequences) of the graph the last collected step
  // replayed, decode or verification graph; 0 when it ran eagerly.
  int64_t last_graph_batch_size() const override { return last_graph_batch_; }
  // Seconds the last launch() + collect() spent waiting for the device (the
  // lm_head chunks' samples and the collect).
  double last_step_wait_seconds() const override { return last_wait_seconds_; }

  // The final normed hidden states of the last launched forward (the rows
  // its lm_head reads; an EAGLE head's output hidden states): rows [0, T) of
  // this [max_num_batched_tokens, H] compute-dtype view are valid from that
  // launch() until the next one begins (ops enqueued in between read them in
  // stream order). A pipeline stage other than the last holds none.
  Tensor hidden_states() const override;
  // The row of hidden_states() that holds row `row` of the last launched
  // step: itself, except after a verification-graph replay (verify_row_map;
  // a sequence's rows stay consecutive).
  int32_t hidden_row(int32_t row) const override {
    return hidden_row_map_.empty() ? row : hidden_row_map_[static_cast<size_t>(row)];
  }
  // RunnerOptions::architecture: the hidden-state pool [(num_kv_blocks() + 1)
  // * block_size(), H] the head reads (row = KV slot); empty otherwise.
  Tensor hidden_pool() const;
  // RunnerOptions::aux_hidden_layers: [n, max_num_batched_tokens, H] cd;
  // rows [0, T) of [j] hold the last launched forward's residual entering
  // layer aux_hidden_layers[j], row for row as hidden_states() (hidden_row),
  // valid as long. Empty without aux layers.
  Tensor aux_hidden_states() const override;
  // The residual stream after the last layer (before any final norm) of the
  // last launched forward: rows [0, T) of this [max_num_batched_tokens, H]
  // compute-dtype view, valid as hidden_states() (an EAGLE-3 head's
  // pre-norm output, which its chained drafts read).
  Tensor residual_states() const;

  // While paused, every step runs eagerly, the decode and verification
  // graphs kept for later (bench --profile-ops: per-op timing needs the ops
  // enqueued one by one). Set between steps, from any thread.
  void pause_graphs(bool paused) { graphs_paused_.store(paused); }

  // One forward + sampling: launch(step, 0) then collect(0).
  Status execute(const StepBatch& step, SampleOutput* out) override;
  // The pipelined halves of execute(). launch() checks every size and index
  // of `step` first (T <= max_num_batched_tokens, S <= max_num_seqs, ids <
  // vocab, slots and blocks in range, pending rows, ...) and returns an error
  // naming the field; then it uploads the step through the slot's host
  // staging and enqueues the forward and the sampling, and returns without
  // waiting for the device (except between lm_head chunks when R >
  // max_num_seqs). A decode-only step whose S fits a captured size replays
  // that decode graph; another step that fits a verification graph
  // (fits_verify_graph, S within its sizes) replays that one; the lm_head
  // and sampling always run eagerly. collect(slot)
  // waits for that step and returns its samples. slot is 0 or 1; a slot is
  // collected before it is launched again (a launch that returned an error
  // is not collected), and steps are collected in launch order. While step N runs the caller may
  // launch step N + 1 on the other slot (the device runs them in order). On a pipeline stage other
  // than the last, launch() enqueues the forward only and collect() waits
  // for it and returns no samples; a step with pending rows is an internal
  // error on every stage of a pipeline (M > 1).
  // With step.defer_sampling the launch stops after the lm_head (R <=
  // max_num_seqs, no pipeline); launch_sampling(slot, batch) then checks
  // `batch` as launch() checks step.sampling and enqueues the sampler on the
  // logits kept for it. Until then collect(slot) and any other launch() are
  // refused (the logits buffer and the device's sampled ids are the slot's).
  Status launch(const StepBatch& step, int slot) override;
  Status launch_sampling(int slot, const SamplingBatch& batch) override;
  Status collect(int slot, SampleOutput* out) override;
  // The same forward, returning the f32 logits [R, V] instead of sampling
  // (tests, prompt-logprob tools). step.sampling is ignored. A pipeline
  // stage other than the last runs its part of the forward and returns no
  // rows.
  Status execute_logits(const StepBatch& step, std::vector<float>* logits) override;

 private:
  struct Buffers;  // device scratch, index arrays, KV pool (model_runner.cpp)

  ModelRunner(Backend& backend, const ModelConfig& config, const RunnerOptions& options);
  // Resolves options.kv_cache_dtype against the backend and, for FP8, reads
  // this runner's layers' k/v scales from `weights` (kv_scales.h).
  Status resolve_kv_cache(WeightSource& weights);
  Status allocate(int64_t max_len);
  // Runs make_profile_step's batch on a temporary KV pool and logs the
  // device memory it took beyond the preallocated scratch.
  Status profile_memory(int64_t max_len);
  Status allocate_kv(int64_t max_len);
  // Fills the first max_len rows of the rope tables (cos_sin, and
  // cos_sin_local when allocated) for a max_model_len of max_len, which
  // picks longrope's factor set (rope.h).
  Status fill_rope_tables(int64_t max_len);
  KvPoolSizes budget_kv_pools(int64_t max_len);
  // The groups' block bytes and sizes (kv_budget.h).
  KvGroupShape kv_group_shape() const;
  // Whether layer `l` of this runner (local index) keeps its KV in the
  // sliding-window group.
  bool in_sliding_group(int64_t l) const;
  // Bytes of one block of one layer's k (or v).
  int64_t half_block_bytes() const;
  // Points buf_->caches at pools of `num_blocks` (full group) and
  // `num_sliding_blocks` blocks starting at `base` and `sliding_base`.
  void map_kv_caches(void* base, int64_t num_blocks, void* sliding_base,
                     int64_t num_sliding_blocks);
  // Warm-up run and capture of the forward over every size of `sizes`
  // (sequences) at `query_len` rows each (1: decode graphs, decode_graphs.h;
  // more: verification graphs, verify_graphs.h), into *out_sizes and
  // *out_ids; on a failed capture every graph of that kind is dropped (those
  // steps run eagerly from then on). `what` names the kind in the log.
  void capture_graphs(const std::vector<int64_t>& sizes, int32_t query_len, const char* what,
                      std::vector<int64_t>* out_sizes, std::vector<int>* out_ids);
  StepLimits limits() const;  // of validate_step, without the pending-source bound
  // The backend's sticky status as this step's result: once an op has failed
  // (a CUDA error, a rejected shape) every later step fails with its message;
  // the same for the tensor-parallel communicator's.
  Status device_status() const;
  // Ranks of the tensor-parallel group (1 without one).
  int tp_size() const { return options_.tp != nullptr ? options_.tp->size() : 1; }
  // Whether `ok` holds on every rank of the tensor-parallel group and the
  // pipeline (one all-reduce in each; all ranks call it together); `ok`
  // itself without either.
  bool all_ranks(bool ok);
  // The smallest `value` over the same ranks (tp_min over tp, then over pp).
  int64_t min_over_ranks(int64_t value);
  // The rows of an enqueued forward: T (padded for a graph) and the step's
  // logits rows [R] as rows of it.
  struct ForwardRows {
    int64_t num_tokens = 0;
    const int32_t* logits_rows = nullptr;
  };
  // The forward of a validated step: graph replay (decode or verification)
  // or eager.
  ForwardRows run_forward(const StepBatch& step);
  // Uploads the index arrays, fills the pending tokens, applies block copies
  // and runs the forward.
  void prepare_and_forward(const StepBatch& step);
  // write_padded_decode_index (query_len 1) or write_padded_verify_index
  // into the staging buffer for a graph of `batch` sequences, then the
  // uploads.
  void upload_padded_index(const StepBatch& step, int64_t batch, int32_t query_len);
  // Sets the pending tokens of the first `num_tokens` ids (after their
  // upload): rows / sources are pending_rows (renumbered for a padded batch)
  // / pending_sources. A source in the previous step's last lm_head chunk
  // is copied on the device (copy_sampled_tokens, its sampling being the
  // latest); one in an earlier chunk takes its id from earlier_chunk_ids_
  // (the staged ids patched and their runs uploaded again).
  void fill_pending_tokens(const std::vector<int32_t>& rows, const std::vector<int32_t>& sources,
                           int64_t num_tokens);
  // The metadata a graph of `batch` sequences of `query_len` rows is
  // captured with, of the full group's tables or of the sliding group's.
  AttentionMetadata graph_metadata(int64_t batch, int32_t query_len, bool sliding) const;
  // Block copies of both groups.
  void apply_block_copies(const StepBatch& step);
  // The family's forward (Architecture::forward) over the first `num_tokens`
  // scratch rows; leaves the final normed hidden states [T, H] in the scratch.
  // `sliding_meta`: the same sequences with the sliding group's tables (read
  // only with that group).
  void forward(int64_t num_tokens, const AttentionMetadata& meta,
               const AttentionMetadata& sliding_meta);
  // Views of the mixture-of-experts scratch for a step of t tokens.
  void set_moe_scratch(int64_t t, ForwardContext* ctx) const;
  // Logits [r1 - r0, V] f32 of rows.logits_rows[r0, r1) (at most max_num_seqs rows).
  Tensor compute_logits(const ForwardRows& rows, int64_t r0, int64_t r1);
  // Host staging of slot_ -> device index buffer at `offset` (i32 elements).
  void upload_index(int64_t offset, const int32_t* data, int64_t n);
  // Staging of slot_ -> device index buffer for elements [offset, offset + n).
  void upload_staged(int64_t offset, int64_t n);
  int32_t* staging() const;  // slot_'s host staging, i32 at the index layout

  Backend& backend_;
  ModelConfig config_;  // the whole model's
  RunnerOptions options_;
  ModelConfig local_;  // config_ with the shard's heads, kv heads and intermediate size
  PpStage stage_;      // this runner's pipeline stage ({0, 1} without pp)
  IndexRange layers_;  // its decoder layers
  const Architecture* arch_ = nullptr;  // the family: its forward reads weights_
  ModelWeights weights_;
  QkvLayout layout_;
  float attention_scale_ = 1.0f;
  DType kv_dtype_ = DType::kF32;  // of every layer's cache (options.kv_cache_dtype resolved)
  // An FP8 cache's scales per layer of this runner (kv_scales.h); all
  // 1.0 otherwise, and then never read.
  std::vector<KvScales> kv_scales_;
  std::string kv_scales_source_;  // empty unless FP8
  int64_t max_model_len_ = 0;
  int64_t max_blocks_per_seq_ = 0;
  std::string kv_sizing_;
  int64_t num_kv_blocks_ = 0;  // blocks sequences may use: [0, num_kv_blocks_)
  // options.sliding_kv_group and the model has both sliding and full layers.
  bool sliding_group_ = false;
  int64_t num_sliding_kv_blocks_ = 0;  // the sliding pool's blocks sequences may use
  bool use_graphs_ = false;
  std::atomic<bool> graphs_paused_{false};  // pause_graphs()
  int32_t scratch_block_ = -1;  // = num_kv_blocks_ when graphs are used: padding rows' block
  int32_t sliding_scratch_block_ = -1;  // = num_sliding_kv_blocks_ likewise, with the group
  std::vector<int64_t> graph_sizes_;
  std::vector<int> graph_ids_;  // backend graph id per graph_sizes_ entry
  // Verification graphs (options_.verify_graph_query_len rows per sequence).
  std::vector<int64_t> verify_graph_sizes_;
  std::vector<int> verify_graph_ids_;
  // A verification replay's renumbered rows (verify_row_map), kept for the
  // lm_head chunks and the pending-token fill of the step being launched.
  std::vector<int32_t> padded_logits_rows_;
  std::vector<int32_t> padded_pending_rows_;
  // The last launched step's rows in the padded batch (hidden_row); empty:
  // the identity.
  std::vector<int32_t> hidden_row_map_;
  int64_t last_graph_batch_ = 0;
  double last_wait_seconds_ = 0.0;
  // Pipelining state: the slot whose staging the current launch writes, the
  // rows the last launched step sampled (bound of the next step's
  // pending_sources), the ids it drew for all rows but its last lm_head
  // chunk's (launch() waited for those chunks: the next step's pending tokens
  // from them come from the host; those of the last chunk stay on the device,
  // copy_sampled_tokens), and per slot what collect() returns.
  int slot_ = 0;
  int64_t last_launched_rows_ = 0;
  std::vector<int32_t> earlier_chunk_ids_;
  // fill_pending_tokens' scratch: the rows taking last-chunk (device) ids,
  // their sources within that chunk, and the rows given host ids.
  std::vector<int32_t> device_pending_rows_, device_pending_sources_, host_pending_rows_;
  struct Launched {
    bool active = false;
    SampleOutput earlier_chunks;  // samples of all chunks but the last (R > max_num_seqs)
    bool has_last_chunk = false;  // the last chunk's sampling is outstanding
    bool sampling_deferred = false;  // launch_sampling is still to come
    Tensor logits;                   // [R, V] f32 while sampling_deferred
    int64_t graph_batch = 0;
    double wait_seconds = 0.0;
  };
  std::array<Launched, kNumStepSlots> launched_;
  size_t free_at_start_ = 0;  // device memory free before the weights (budget_kv_blocks)
  std::unique_ptr<Buffers> buf_;
};

}  // namespace pagoda
