// ProfilingBackend: a decorator Backend that forwards every call to the
// backend it owns and, while a profile is running (start() .. stop()),
// brackets each op enqueued on the device with an OpTimer interval and
// records what the op was (`pagoda bench latency --profile-ops`,
// docs/benchmarks.md).
//
// Why a decorator: the engine and the runner are unchanged and a normal run
// never constructs one, so profiling costs nothing when it is off; with the
// decorator in place but no profile running, each op pays one extra virtual
// call and one flag test on the host, and graph replays none (the graph's
// ops were enqueued on the real backend at capture).
//
// Threads: start() and stop() are called while no other thread calls the
// backend (the engine idle between bench batches); the ops come from one
// thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.h"
#include "backend/op_timer.h"

namespace pagoda {

// One timed op of a profile.
struct ProfiledOp {
  // The op's name, with its weight for linears: "rms_norm",
  // "linear qkv 6144x4096 f8e4m3", "moe_experts 128x1536x2048 bf16".
  std::string label;
  int64_t step = 0;   // index into ProfileTrace::steps
  // Bytes the op must move to and from device memory (weights, activations,
  // the KV it reads): linears, paged_attention and moe_experts; 0 for the
  // others (not estimated). paged_attention assumes every sequence at
  // max_seq_len and moe_experts min(E, T * k) distinct experts: exact for
  // the latency bench at batch 1, an upper bound otherwise.
  int64_t bytes = 0;
  double us = 0.0;  // device time of the op (OpTimer interval)
};

// A step of a profile: the ops up to and including a sampling (sample_async).
struct ProfiledStep {
  int64_t num_tokens = 0;     // rows of the step's embedding (0: none seen)
  int32_t max_query_len = 0;  // max over its paged_attention calls (1: decode only)
};

struct ProfileTrace {
  std::vector<ProfiledOp> ops;  // in enqueue order
  std::vector<ProfiledStep> steps;
  std::string method;  // OpTimer::method()
};

class ProfilingBackend final : public Backend {
 public:
  ProfilingBackend(std::unique_ptr<Backend> inner, std::unique_ptr<OpTimer> timer);

  Backend& inner() const { return *inner_; }
  // Names linears by their weight's data pointer ("qkv", "lm_head", ...);
  // an unnamed weight is labelled by its shape alone.
  void set_weight_names(std::unordered_map<const void*, std::string> names);
  // Starts recording (drops any earlier trace).
  void start();
  // Stops recording, waits for the device and returns the trace.
  ProfileTrace stop();
  bool recording() const { return recording_; }

  DeviceKind kind() const override { return inner_->kind(); }
  std::string name() const override { return inner_->name(); }
  DType compute_dtype() const override { return inner_->compute_dtype(); }
  void* allocate(size_t bytes) override { return inner_->allocate(bytes); }
  void deallocate(void* ptr) override { inner_->deallocate(ptr); }
  void* allocate_host(size_t bytes) override { return inner_->allocate_host(bytes); }
  void deallocate_host(void* ptr) override { inner_->deallocate_host(ptr); }
  void copy_to_device(void* dst, const void* src, size_t bytes) override;
  void copy_to_device_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch,
                         size_t row_bytes, size_t rows) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override {
    inner_->copy_to_host(dst, src, bytes);  // waits: not an op
  }
  void copy_device(void* dst, const void* src, size_t bytes) override;
  void synchronize() override { inner_->synchronize(); }
  void memory_info(size_t* free_bytes, size_t* total_bytes) override {
    inner_->memory_info(free_bytes, total_bytes);
  }

  void embedding(const Tensor& table, const Tensor& ids, int64_t first_row, Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                    Tensor& out) override;
  void rms_norm_fp8(const Tensor& x, const Tensor& w, float eps, Tensor& out,
                    Fp8Rows& q) override;
  void add_rms_norm_fp8(Tensor& residual, const Tensor& x, const Tensor& w, float eps, Tensor& out,
                        Fp8Rows& q) override;
  void silu_mul_fp8(const Tensor& gate_up, Tensor& out, Fp8Rows& q) override;
  void linear(const Tensor& x, const LinearWeight& w, const Tensor& bias, Tensor& out) override;
  void linear_fp8_rows(const Fp8Rows& x, const LinearWeight& w, const Tensor& bias,
                       Tensor& out) override;
  Status prepare_block_weight(const Tensor& w) override { return inner_->prepare_block_weight(w); }
  Status prepare_fp8_weight(const LinearWeight& w) override {
    return inner_->prepare_fp8_weight(w);
  }
  void qk_norm(Tensor& qkv, const QkvLayout& layout, const Tensor& q_w, const Tensor& k_w,
               float eps) override;
  void rope(Tensor& qkv, const QkvLayout& layout, const Tensor& positions,
            const Tensor& cos_sin) override;
  void kv_write(const Tensor& qkv, const QkvLayout& layout, const Tensor& slots,
                KvCacheView& cache) override;
  void qk_norm_rope_kv_write(Tensor& qkv, const QkvLayout& layout, const Tensor& q_w,
                             const Tensor& k_w, float eps, const Tensor& positions,
                             const Tensor& cos_sin, const Tensor& slots,
                             KvCacheView& cache) override;
  void paged_attention(const Tensor& qkv, const QkvLayout& layout, const KvCacheView& cache,
                       const AttentionMetadata& meta, const AttentionScoring& scoring,
                       Tensor& out) override;
  void silu_mul(const Tensor& gate_up, Tensor& out) override;
  void gelu_tanh_mul(const Tensor& gate_up, Tensor& out) override;
  void scale(Tensor& x, float s) override;
  void softcap(Tensor& x, float cap) override;
  void moe_route(const Tensor& logits, bool renormalize, Tensor& ids, Tensor& weights) override;
  void moe_experts(const Tensor& x, const Tensor& gate_up, const Tensor& down, const Tensor& ids,
                   const Tensor& weights, Tensor& gate_up_scratch, Tensor& act_scratch,
                   Tensor& out) override;
  void add_sigmoid_gated(Tensor& out, const Tensor& y, const Tensor& x,
                         const Tensor& gate_w) override;
  void gather_rows(const Tensor& x, const Tensor& indices, Tensor& out) override;
  void copy_blocks(std::vector<KvCacheView>& caches, const std::vector<int32_t>& src,
                   const std::vector<int32_t>& dst) override;
  void sample_async(const Tensor& logits, const SamplingBatch& batch, int slot) override;
  void finish_sample(int slot, SampleOutput& out) override { inner_->finish_sample(slot, out); }
  void copy_sampled_tokens(const Tensor& rows, const Tensor& src_rows, Tensor& ids) override;
  void record_fence(int slot) override { inner_->record_fence(slot); }
  void wait_fence(int slot) override { inner_->wait_fence(slot); }

  Status status() const override { return inner_->status(); }
  bool supports_graphs() const override { return inner_->supports_graphs(); }
  int capture_graph(const std::function<void()>& record) override {
    return inner_->capture_graph(record);
  }
  void replay_graph(int graph_id) override;

 private:
  // Runs `op` on the inner backend, inside a timed interval labelled
  // label() when recording.
  template <typename Label, typename Op>
  void timed(Label&& label, int64_t bytes, Op&& op);
  // "linear qkv 6144x4096 f8e4m3" and the bytes of a linear.
  std::string linear_label(const char* op, const LinearWeight& w) const;
  ProfiledStep& current_step();

  std::unique_ptr<Backend> inner_;
  std::unique_ptr<OpTimer> timer_;
  std::unordered_map<const void*, std::string> weight_names_;
  bool recording_ = false;
  ProfileTrace trace_;
};

}  // namespace pagoda
