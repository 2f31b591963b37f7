// ParallelRunner: N tensor-parallel ranks behind one Runner. Rank r's runner
// (a ModelRunner holding rank r's shard, RunnerOptions::tp) lives on worker
// thread r, and every call on that runner -- its creation, launch, collect,
// execute_logits and destruction -- runs on that thread (a CUDA device is
// current per thread, and NCCL needs a thread per device). The engine thread
// hands each call to every rank and waits for all of them; the ranks run the
// same step and meet in their collectives.
//
// Samples: every rank samples the whole batch (the lm_head is replicated),
// so the ranks' tokens must be identical; collect() returns rank 0's and
// fails with an internal error when another rank's differ. A divergence
// never passes silently.
//
// Pipeline parallelism: with `stages` > 1 the ranks are M stages of N =
// size / M tensor-parallel ranks, rank s * N + t being rank t of stage s
// (RunnerOptions::pp). Every call still runs on every rank; only the last
// stage samples, so the samples and logits are those of its rank 0, checked
// against its other ranks.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "backend/communicator.h"
#include "core/result.h"
#include "model/runner.h"

namespace pagoda {

// What the ranks' runners use: kept alive until every runner is destroyed;
// then rank r's backend is destroyed on rank r's thread (after its runner),
// and the communicators last (NCCL waits for the backends' CUDA graphs that
// captured their ops to be gone). Either may be empty (tests whose ranks
// own nothing).
struct RankResources {
  std::vector<std::unique_ptr<Backend>> backends;            // [N] or empty
  std::vector<std::unique_ptr<Communicator>> communicators;  // [N] or empty
};

class ParallelRunner final : public Runner {
 public:
  // Creates rank `rank`'s runner; called once per rank, on that rank's
  // worker thread, all ranks concurrently (their collectives meet).
  using RankFactory = std::function<Result<std::unique_ptr<Runner>>(int rank)>;

  // Starts `size` (>= 1) worker threads and creates every rank's runner on
  // its own. On failure (a rank's failure aborts the communicators, as
  // described at launch(), so peers waiting in create's collectives return)
  // every runner created is destroyed (on its thread) and the failing rank's
  // error is returned, prefixed "tensor-parallel rank R: " (with stages:
  // "rank R (pipeline stage S, tensor-parallel rank T): "). `stages` must
  // divide `size`.
  static Result<std::unique_ptr<ParallelRunner>> create(int size, const RankFactory& make_rank,
                                                        RankResources resources = {},
                                                        int stages = 1);
  ~ParallelRunner() override;
  ParallelRunner(const ParallelRunner&) = delete;
  ParallelRunner& operator=(const ParallelRunner&) = delete;

  int size() const { return static_cast<int>(workers_.size()); }
  // Rank r's runner (tests); only while no call is in flight.
  Runner& rank(int r) const;

  // The minimum over the ranks: each rank sized its own pools.
  int64_t num_kv_blocks() const override { return num_kv_blocks_; }
  int64_t num_sliding_kv_blocks() const override { return num_sliding_kv_blocks_; }
  // Rank 0's.
  const std::string& kv_sizing() const override;
  // Of one rank (each holds its kv heads' share of every block; with
  // stages, the largest: a stage's share of the layers).
  int64_t kv_block_bytes() const override;
  int64_t sliding_kv_block_bytes() const override;  // the same for the sliding-window group
  DType kv_cache_dtype() const override;                // rank 0's (every rank has the same)
  const std::string& kv_scales_source() const override;  // rank 0's
  int block_size() const override;
  // The minimum over the ranks.
  int64_t max_model_len() const override { return max_model_len_; }
  int64_t max_num_batched_tokens() const override;
  int64_t max_num_seqs() const override;
  // Rank 0's (every rank captures the same sizes). The wait: the sampling
  // rank's.
  const std::vector<int64_t>& decode_graph_sizes() const override;
  int64_t last_graph_batch_size() const override;
  double last_step_wait_seconds() const override;

  // Each runs the call on every rank and returns once all are done. When a
  // rank fails (create too), its thread at once aborts every communicator of
  // RankResources (Communicator::abort), so that peers waiting for it in a
  // collective or a stage hand-off return instead of hanging; their errors
  // are echoes of the abort. The error returned is the failing rank's (the
  // lowest one's when several failed before the abort), prefixed with its
  // rank unless every rank failed alike. A failed call ends the runner: every
  // later launch / collect / execute / execute_logits returns that same error
  // at once without reaching the ranks (the engine then fails each step's
  // requests); it can only be destroyed. (Divergent samples or logits are
  // an error of that call only.) collect /
  // execute: rank 0's samples, after checking that every rank sampled the
  // same tokens (kInternal "tensor-parallel ranks sampled different tokens
  // at row I: ..." otherwise). execute_logits: rank 0's logits, checked
  // bitwise against every rank's.
  Status execute(const StepBatch& step, SampleOutput* out) override;
  Status launch(const StepBatch& step, int slot) override;
  Status launch_sampling(int slot, const SamplingBatch& batch) override;
  Status collect(int slot, SampleOutput* out) override;
  Status execute_logits(const StepBatch& step, std::vector<float>* logits) override;

 private:
  struct Worker;  // parallel_runner.cpp
  enum class Op {
    kCreate,
    kLaunch,
    kLaunchSampling,
    kCollect,
    kExecute,
    kExecuteLogits,
    kDestroy,
    kStop
  };
  struct Job {
    Op op = Op::kStop;
    const StepBatch* step = nullptr;
    const SamplingBatch* sampling = nullptr;  // kLaunchSampling
    int slot = 0;
    const RankFactory* make_rank = nullptr;
  };

  explicit ParallelRunner(RankResources resources);
  // Hands `job` to every rank, then waits until all have done it.
  void run_on_all(const Job& job);
  // After run_on_all: ok when no rank failed; else the error described at
  // launch(), which is also kept in broken_.
  Status first_error(bool name_rank_always);
  // On rank w's thread when its call failed: marks w primary and aborts the
  // communicators, unless another rank already did.
  void on_rank_failure(Worker& w);
  // "tensor-parallel rank R" or "rank R (pipeline stage S, tensor-parallel rank T)".
  std::string describe_rank(int rank) const;
  // The first rank of the last stage: the one whose samples are returned.
  size_t sampler() const { return workers_.size() - workers_.size() / static_cast<size_t>(stages_); }
  // The sampler's samples vs every other rank's of its stage (after a
  // collect or execute).
  Status check_same_samples() const;
  void stop_workers();

  RankResources resources_;
  std::vector<std::unique_ptr<Worker>> workers_;  // [N], rank order
  std::vector<Worker*> all_;                      // workers_' pointers
  int stages_ = 1;
  std::mutex failure_mu_;  // guards aborted_ and the workers' `primary`
  bool aborted_ = false;   // the communicators were aborted
  Status broken_;          // the error that ended the runner; ok while usable
  int64_t num_kv_blocks_ = 0;
  int64_t num_sliding_kv_blocks_ = 0;
  int64_t max_model_len_ = 0;
};

}  // namespace pagoda
