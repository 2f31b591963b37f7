// The CPU reference backend: every op of backend.h in f32 with f32
// accumulation, written to be read first and threaded with parallel_for.
// It is the specification the CUDA backend is tested against.
//
// Properties other code may rely on:
//  - compute_dtype() is f32; every tensor an op receives must be f32 (index
//    tensors i32). Ops run synchronously on the calling thread (plus the pool).
//  - Batch invariance: an output row depends only on its own inputs, never
//    on which other rows or sequences share the batch (fixed summation order,
//    see cpu_kernels.h), so a request gives bit-identical results alone or
//    batched.
//  - Device memory is host memory (64-byte aligned); copies are memcpy.
#pragma once

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace pagoda {

class CpuBackend final : public Backend {
 public:
  CpuBackend();

  DeviceKind kind() const override { return DeviceKind::kCpu; }
  std::string name() const override;  // "cpu (2 threads, avx2+fma)"
  DType compute_dtype() const override { return DType::kF32; }

  void* allocate(size_t bytes) override;
  void deallocate(void* ptr) override;
  void* allocate_host(size_t bytes) override { return allocate(bytes); }
  void deallocate_host(void* ptr) override { deallocate(ptr); }
  void copy_to_device(void* dst, const void* src, size_t bytes) override;
  void copy_to_host(void* dst, const void* src, size_t bytes) override;
  void copy_device(void* dst, const void* src, size_t bytes) override;
  void synchronize() override {}
  // From /proc/meminfo: MemAvailable and MemTotal (0, 0 when unreadable).
  void memory_info(size_t* free_bytes, size_t* total_bytes) override;

  void embedding(const Tensor& table, const Tensor& ids, int64_t first_row, Tensor& out) override;
  void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) override;
  void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                    Tensor& out) override;
  void linear(const Tensor& x, const LinearWeight& w, const Tensor& bias, Tensor& out) override;
  // The _fp8 producers: the op, then its f32 output quantised per token.
  void rms_norm_fp8(const Tensor& x, const Tensor& w, float eps, Tensor& out, Fp8Rows& q) override;
  void add_rms_norm_fp8(Tensor& residual, const Tensor& x, const Tensor& w, float eps, Tensor& out,
                        Fp8Rows& q) override;
  void silu_mul_fp8(const Tensor& gate_up, Tensor& out, Fp8Rows& q) override;
  void linear_fp8_rows(const Fp8Rows& x, const LinearWeight& w, const Tensor& bias,
                       Tensor& out) override;
  void qk_norm(Tensor& qkv, const QkvLayout& layout, const Tensor& q_w, const Tensor& k_w,
               float eps) override;
  void rope(Tensor& qkv, const QkvLayout& layout, const Tensor& positions,
            const Tensor& cos_sin) override;
  void kv_write(const Tensor& qkv, const QkvLayout& layout, const Tensor& slots,
                KvCacheView& cache) override;
  void paged_attention(const Tensor& qkv, const QkvLayout& layout, const KvCacheView& cache,
                       const AttentionMetadata& meta, const AttentionScoring& scoring,
                       Tensor& out) override;
  void silu_mul(const Tensor& gate_up, Tensor& out) override;
  void gelu_tanh_mul(const Tensor& gate_up, Tensor& out) override;
  void scale(Tensor& x, float s) override;
  void softcap(Tensor& x, float cap) override;
  void gather_rows(const Tensor& x, const Tensor& indices, Tensor& out) override;
  void moe_route(const Tensor& logits, bool renormalize, Tensor& ids, Tensor& weights) override;
  // Computes each routed expert plainly, token by token (the scratch is unused).
  void moe_experts(const Tensor& x, const Tensor& gate_up, const Tensor& down, const Tensor& ids,
                   const Tensor& weights, Tensor& gate_up_scratch, Tensor& act_scratch,
                   Tensor& out) override;
  void add_sigmoid_gated(Tensor& out, const Tensor& y, const Tensor& x,
                         const Tensor& gate_w) override;
  void copy_blocks(std::vector<KvCacheView>& caches, const std::vector<int32_t>& src,
                   const std::vector<int32_t>& dst) override;
  // Samples at once into the slot's result. Top-K rows (SampleOutput::top_*)
  // beyond a row's num_top_logprobs hold id -1 and logprob NaN. A row whose
  // every token is banned (-inf) yields token 0 (the lowest id of the maximum).
  void sample_async(const Tensor& logits, const SamplingBatch& batch, int slot) override;
  void finish_sample(int slot, SampleOutput& out) override;
  void copy_sampled_tokens(const Tensor& rows, const Tensor& src_rows, Tensor& ids) override;

 private:
  std::array<SampleOutput, kNumStepSlots> results_;  // per slot, until finish_sample
  std::vector<int32_t> last_ids_;                    // the latest sampling's token ids
};

std::unique_ptr<Backend> create_cpu_backend();

}  // namespace pagoda
