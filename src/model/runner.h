// Runner: what the engine needs of the thing that runs the model's steps --
// one ModelRunner (the whole model on one backend, model_runner.h) or a
// ParallelRunner (N tensor-parallel ranks behind one runner,
// parallel_runner.h). The contracts of each method are ModelRunner's; an
// implementation states where it differs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "batch/sampling_batch.h"
#include "batch/step_batch.h"
#include "core/dtype.h"
#include "core/result.h"
#include "core/tensor.h"

namespace pagoda {

class Runner {
 public:
  virtual ~Runner() = default;

  // KV blocks sequences may use: [0, num_kv_blocks()) (the full-attention
  // group's pool when there are two KV groups).
  virtual int64_t num_kv_blocks() const = 0;
  // The sliding-window group's pool (RunnerOptions::sliding_kv_group; steps
  // must then carry its tables, StepBatch::sliding_*): [0,
  // num_sliding_kv_blocks()); 0 without that group.
  virtual int64_t num_sliding_kv_blocks() const = 0;
  // How the pool was sized, for the start-up log.
  virtual const std::string& kv_sizing() const = 0;
  // Bytes of one KV block across all layers (k and v; the full-attention
  // group's layers when there are two groups) on one backend (with tensor
  // parallelism: on each rank's device).
  virtual int64_t kv_block_bytes() const = 0;
  // The same for one block of the sliding-window group's layers (0 without it).
  virtual int64_t sliding_kv_block_bytes() const = 0;
  // The KV cache's element type (--kv-cache-dtype, core/kv_cache_dtype.h).
  virtual DType kv_cache_dtype() const = 0;
  // Where an FP8 cache's k/v scales came from, for the start-up log
  // (load_kv_scales' source); empty for a 16/32-bit cache.
  virtual const std::string& kv_scales_source() const = 0;
  virtual int block_size() const = 0;
  virtual int64_t max_model_len() const = 0;
  virtual int64_t max_num_batched_tokens() const = 0;
  virtual int64_t max_num_seqs() const = 0;
  // Batch sizes with a captured decode graph, ascending (empty: all eager).
  virtual const std::vector<int64_t>& decode_graph_sizes() const = 0;
  // The padded batch size of the graph the last collected step replayed; 0
  // when it ran eagerly.
  virtual int64_t last_graph_batch_size() const = 0;
  // Seconds the last launch() + collect() spent waiting for the device.
  virtual double last_step_wait_seconds() const = 0;

  // The final normed hidden states [max_num_batched_tokens, H] of the last
  // launched forward on the runner's backend (ModelRunner::hidden_states);
  // empty where the runner cannot give them (tensor parallelism).
  virtual Tensor hidden_states() const { return {}; }
  // Its row holding row `row` of the last launched step (a sequence's rows
  // are consecutive there too).
  virtual int32_t hidden_row(int32_t row) const { return row; }
  // RunnerOptions::aux_hidden_layers: the residual streams entering those
  // layers in the last launched forward, [n, max_num_batched_tokens, H]
  // (ModelRunner::aux_hidden_states; rows as hidden_states()); empty without.
  virtual Tensor aux_hidden_states() const { return {}; }

  // One forward + sampling: launch(step, 0) then collect(0).
  virtual Status execute(const StepBatch& step, SampleOutput* out) = 0;
  // The pipelined halves of execute(): launch() validates and enqueues the
  // step on `slot` (0 or 1) and returns without waiting for the device;
  // collect(slot) waits for it and returns its samples. A launch that
  // returned an error is not collected; steps are collected in launch order.
  virtual Status launch(const StepBatch& step, int slot) = 0;
  virtual Status collect(int slot, SampleOutput* out) = 0;
  // The sampler of a step launched with StepBatch::defer_sampling, on
  // `batch` (one row per logits row); required before that slot's collect()
  // and before the next launch().
  virtual Status launch_sampling(int slot, const SamplingBatch& batch) = 0;
  // The forward returning the f32 logits [R, V] instead of sampling.
  virtual Status execute_logits(const StepBatch& step, std::vector<float>* logits) = 0;
};

}  // namespace pagoda
