// The CPU backend's op implementations, one family per .cpp file; CpuBackend
// forwards to these. Contracts and shapes: backend.h and sampling_batch.h.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/backend.h"

namespace pagoda::cpu {

// cpu_elementwise.cpp
void embedding(const Tensor& table, const Tensor& ids, int64_t first_row, Tensor& out);
void silu_mul(const Tensor& gate_up, Tensor& out);
void gelu_tanh_mul(const Tensor& gate_up, Tensor& out);
void scale(Tensor& x, float s);
void softcap(Tensor& x, float cap);
void gather_rows(const Tensor& x, const Tensor& indices, Tensor& out);
void rope(Tensor& qkv, const QkvLayout& layout, const Tensor& positions, const Tensor& cos_sin);

// cpu_norm.cpp
void rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out);
void add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, float eps, Tensor& out);
void qk_norm(Tensor& qkv, const QkvLayout& layout, const Tensor& q_w, const Tensor& k_w, float eps);

// cpu_linear.cpp (an FP8 w: linear_fp8)
void linear(const Tensor& x, const LinearWeight& w, const Tensor& bias, Tensor& out);
// cpu_fp8_linear.cpp
void linear_fp8(const Tensor& x, const LinearWeight& w, const Tensor& bias, Tensor& out);
// q = a's per-token FP8 codes and scales (backend.h Fp8Rows); a [T, K] f32.
void fp8_quantize_rows(const Tensor& a, Fp8Rows& q);
void linear_fp8_rows(const Fp8Rows& x, const LinearWeight& w, const Tensor& bias, Tensor& out);

// cpu_moe.cpp
void moe_route(const Tensor& logits, bool renormalize, Tensor& ids, Tensor& weights);
void moe_experts(const Tensor& x, const Tensor& gate_up, const Tensor& down, const Tensor& ids,
                 const Tensor& weights, Tensor& out);
void add_sigmoid_gated(Tensor& out, const Tensor& y, const Tensor& x, const Tensor& gate_w);

// cpu_attention.cpp
void kv_write(const Tensor& qkv, const QkvLayout& layout, const Tensor& slots, KvCacheView& cache);
void paged_attention(const Tensor& qkv, const QkvLayout& layout, const KvCacheView& cache,
                     const AttentionMetadata& meta, const AttentionScoring& scoring, Tensor& out);
void copy_blocks(std::vector<KvCacheView>& caches, const std::vector<int32_t>& src,
                 const std::vector<int32_t>& dst);

// cpu_sampling.cpp
void sample(const Tensor& logits, const SamplingBatch& batch, SampleOutput& out);

}  // namespace pagoda::cpu
