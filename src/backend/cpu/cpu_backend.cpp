#include "backend/cpu/cpu_backend.h"

#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "backend/cpu/cpu_kernels.h"
#include "backend/cpu/cpu_ops.h"
#include "core/thread_pool.h"

namespace pagoda {
namespace {

constexpr size_t kAlignment = 64;  // one cache line; also covers every vector load

// Value in bytes of a "Key:   N kB" line of /proc/meminfo, or 0.
size_t meminfo_bytes(const char* text, const char* key) {
  const char* at = std::strstr(text, key);
  if (at == nullptr) return 0;
  unsigned long long kib = 0;
  if (std::sscanf(at + std::strlen(key), " %llu", &kib) != 1) return 0;
  return static_cast<size_t>(kib) * 1024;
}

}  // namespace

CpuBackend::CpuBackend() = default;

std::string CpuBackend::name() const {
  return fmt::format("cpu ({} threads, {})", num_cpu_threads(), cpu::kernels().isa);
}

void* CpuBackend::allocate(size_t bytes) {
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  return std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
}

void CpuBackend::deallocate(void* ptr) {
  std::free(ptr);
}

void CpuBackend::copy_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

void CpuBackend::copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
}

void CpuBackend::copy_device(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memmove(dst, src, bytes);
}

void CpuBackend::memory_info(size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = 0;
  *total_bytes = 0;
  std::FILE* f = std::fopen("/proc/meminfo", "r");
  if (f == nullptr) return;
  char text[8192];
  size_t n = std::fread(text, 1, sizeof(text) - 1, f);
  std::fclose(f);
  text[n] = '\0';
  *free_bytes = meminfo_bytes(text, "MemAvailable:");
  *total_bytes = meminfo_bytes(text, "MemTotal:");
}

void CpuBackend::embedding(const Tensor& table, const Tensor& ids, int64_t first_row,
                           Tensor& out) {
  cpu::embedding(table, ids, first_row, out);
}

void CpuBackend::rms_norm(const Tensor& x, const Tensor& w, float eps, Tensor& out) {
  cpu::rms_norm(x, w, eps, out);
}

void CpuBackend::add_rms_norm(Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                              Tensor& out) {
  cpu::add_rms_norm(residual, x, w, eps, out);
}

void CpuBackend::linear(const Tensor& x, const LinearWeight& w, const Tensor& bias, Tensor& out) {
  cpu::linear(x, w, bias, out);
}

void CpuBackend::qk_norm(Tensor& qkv, const QkvLayout& layout, const Tensor& q_w, const Tensor& k_w,
                         float eps) {
  cpu::qk_norm(qkv, layout, q_w, k_w, eps);
}

void CpuBackend::rope(Tensor& qkv, const QkvLayout& layout, const Tensor& positions,
                      const Tensor& cos_sin) {
  cpu::rope(qkv, layout, positions, cos_sin);
}

void CpuBackend::kv_write(const Tensor& qkv, const QkvLayout& layout, const Tensor& slots,
                          KvCacheView& cache) {
  cpu::kv_write(qkv, layout, slots, cache);
}

void CpuBackend::paged_attention(const Tensor& qkv, const QkvLayout& layout,
                                 const KvCacheView& cache, const AttentionMetadata& meta,
                                 const AttentionScoring& scoring, Tensor& out) {
  cpu::paged_attention(qkv, layout, cache, meta, scoring, out);
}

void CpuBackend::silu_mul(const Tensor& gate_up, Tensor& out) {
  cpu::silu_mul(gate_up, out);
}

void CpuBackend::rms_norm_fp8(const Tensor& x, const Tensor& w, float eps, Tensor& out,
                              Fp8Rows& q) {
  cpu::rms_norm(x, w, eps, out);
  cpu::fp8_quantize_rows(out, q);
}

void CpuBackend::add_rms_norm_fp8(Tensor& residual, const Tensor& x, const Tensor& w, float eps,
                                  Tensor& out, Fp8Rows& q) {
  cpu::add_rms_norm(residual, x, w, eps, out);
  cpu::fp8_quantize_rows(out, q);
}

void CpuBackend::silu_mul_fp8(const Tensor& gate_up, Tensor& out, Fp8Rows& q) {
  cpu::silu_mul(gate_up, out);
  cpu::fp8_quantize_rows(out, q);
}

void CpuBackend::linear_fp8_rows(const Fp8Rows& x, const LinearWeight& w, const Tensor& bias,
                                 Tensor& out) {
  cpu::linear_fp8_rows(x, w, bias, out);
}

void CpuBackend::gelu_tanh_mul(const Tensor& gate_up, Tensor& out) {
  cpu::gelu_tanh_mul(gate_up, out);
}

void CpuBackend::scale(Tensor& x, float s) {
  cpu::scale(x, s);
}

void CpuBackend::softcap(Tensor& x, float cap) {
  cpu::softcap(x, cap);
}

void CpuBackend::moe_route(const Tensor& logits, bool renormalize, Tensor& ids, Tensor& weights) {
  cpu::moe_route(logits, renormalize, ids, weights);
}

void CpuBackend::moe_experts(const Tensor& x, const Tensor& gate_up, const Tensor& down,
                             const Tensor& ids, const Tensor& weights, Tensor&, Tensor&,
                             Tensor& out) {
  cpu::moe_experts(x, gate_up, down, ids, weights, out);
}

void CpuBackend::add_sigmoid_gated(Tensor& out, const Tensor& y, const Tensor& x,
                                   const Tensor& gate_w) {
  cpu::add_sigmoid_gated(out, y, x, gate_w);
}

void CpuBackend::gather_rows(const Tensor& x, const Tensor& indices, Tensor& out) {
  cpu::gather_rows(x, indices, out);
}

void CpuBackend::copy_blocks(std::vector<KvCacheView>& caches, const std::vector<int32_t>& src,
                             const std::vector<int32_t>& dst) {
  cpu::copy_blocks(caches, src, dst);
}

void CpuBackend::sample_async(const Tensor& logits, const SamplingBatch& batch, int slot) {
  SampleOutput& out = results_.at(static_cast<size_t>(slot));
  cpu::sample(logits, batch, out);
  last_ids_ = out.token_ids;
}

void CpuBackend::finish_sample(int slot, SampleOutput& out) {
  out = std::move(results_.at(static_cast<size_t>(slot)));
  results_[static_cast<size_t>(slot)] = SampleOutput{};
}

void CpuBackend::copy_sampled_tokens(const Tensor& rows, const Tensor& src_rows, Tensor& ids) {
  const int64_t n = rows.numel();
  const int32_t* dst = rows.ptr<int32_t>();
  const int32_t* src = src_rows.ptr<int32_t>();
  int32_t* out = ids.ptr<int32_t>();
  const int64_t num_ids = ids.numel();
  const auto num_sampled = static_cast<int64_t>(last_ids_.size());
  for (int64_t i = 0; i < n; ++i) {
    if (dst[i] < 0 || dst[i] >= num_ids || src[i] < 0 || src[i] >= num_sampled) continue;
    out[dst[i]] = last_ids_[static_cast<size_t>(src[i])];
  }
}

std::unique_ptr<Backend> create_cpu_backend() {
  return std::make_unique<CpuBackend>();
}

}  // namespace pagoda
