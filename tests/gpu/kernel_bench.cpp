// Microbenchmarks of the CUDA backend against the device's measured
// ceilings: a large D2D copy (bytes read + written) and an 8192^3 bf16
// cuBLASLt product. Reports achieved GB/s for rms_norm and decode
// paged_attention (Llama-3.1-8B shapes: 32 q heads, 8 kv heads, D 128),
// causal TFLOP/s for prefill paged_attention (same heads; 2048-token chunks
// over 0..6144 cached tokens, 8 x 512 from scratch) and TFLOP/s for linear
// at the 8B model's shapes. --moe: GB/s and TFLOP/s of moe_experts at the
// Qwen3-30B-A3B and Mixtral-8x7B layer shapes (bench_moe).
//
// Timing: each measurement captures `kIters` calls into a CUDA graph (no
// launch gaps), replays it kReps times between CUDA events and takes the
// median per call. Inputs that would fit in L2 rotate over several copies so
// the numbers are from device memory. Data is random, never zeros.
//
// Usage: kernel_bench [--quick]              (prefill attention runs in both)
//        kernel_bench --attention BATCH CTX [fp8]  (one decode-attention shape, e.g. under
//                                                   ncu; fp8: over an FP8 e4m3 KV cache,
//                                                   PAGODA_FP8_KV_DECODE=old: staged kernel)
//        kernel_bench --prefill               (prefill attention only, e.g. under ncu)
//        kernel_bench --fused                 (the fused decode op beside its unfused
//                                              calls: bench_fused_decode)
//        kernel_bench --moe                   (moe_experts only; decode-path rows beside
//                                              the v1 kernels, PAGODA_MOE_DECODE=v1)
//        kernel_bench --quant [FORMAT...]     (block-format linear at T 1, 2, 4, 8, 16, 32,
//                                              64, 128, 256, 512, 4096 beside bf16, or only
//                                              the named formats, e.g. q5_0 q2_K; q8_0 /
//                                              q4_0 / q4_1 at T <= 8 under each decode-kernel
//                                              choice: staged, staged-v1, unstaged, legacy;
//                                              T 16, 32 on the wide kernel and on dequant +
//                                              cuBLASLt; T 64..512 on the tiled GEMM and on
//                                              dequant + cuBLASLt (T 64 also the wide
//                                              kernel launched directly); TFLOP/s column;
//                                              PAGODA_QUANT_GEMV=legacy: the other formats
//                                              on the CUDA-core decode kernels; w4g* in the
//                                              tile layout ("tiles-v1" / "tiles-v2": each
//                                              decode kernel at T <= 8, w4_tiles.h; v2
//                                              hands down at T 8 to v1), "tiles"
//                                              T 16, 32, then in blocks
//                                              as "w4g128-blk" rows; PAGODA_W4_TILES=0:
//                                              blocks only)
//        kernel_bench --fp8-kv                (decode attention at 8k and 32k contexts, bf16
//                                              KV, then FP8 KV through the register decode
//                                              kernel and the staged one
//                                              (PAGODA_FP8_KV_DECODE=old): GB/s of the cache
//                                              bytes read)
//        kernel_bench --fp8                   (FP8 W8A8 linear beside bf16, cuBLASLt's
//                                              scale modes beside the old paths
//                                              (PAGODA_FP8_LT_SCALES=0), and the FP8
//                                              cuBLASLt e4m3 8192^3 ceiling)
//        kernel_bench --producers             (rms_norm / add_rms_norm / silu_mul plain,
//                                              plain + FP8 quantise kernel, and the fused FP8
//                                              producer op, widths 4096..28672, T 1, 8, 64)
//        kernel_bench --fp8-gemv              (each FP8 decode kernel alone on quantised
//                                              codes at T 1, 2, 4, 8, 8B and 70B shapes:
//                                              tc / rows side by side)
//        kernel_bench --sample                (the sampling kernel, one CTA per row beside
//                                              rows split over several CTAs; then masked
//                                              rows, the mask on the fly beside the old
//                                              scratch copy)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/cublaslt_linear.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/fp8_linear_kernels.h"
#include "backend/cuda/quant_linear_kernels.h"
#include "backend/cuda/sampling_kernels.h"
#include "backend/cuda/w4_tiles.h"
#include "core/fp8.h"
#include "core/half.h"

namespace pagoda {
namespace {

constexpr int kIters = 10;
constexpr int kReps = 7;
constexpr size_t kRotateBytes = size_t{256} << 20;  // > 4x the H100/H200 L2

bool g_ok = true;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "CUDA error in %s: %s\n", what, cudaGetErrorString(e));
    g_ok = false;
  }
}

// Fills `bytes` of device memory with random bf16/f16-safe values (|x| < 1).
void fill_random(CudaBackend& gpu, void* dst, size_t bytes) {
  static std::vector<uint16_t> pattern;
  if (pattern.empty()) {
    std::mt19937 gen(1234);
    std::uniform_real_distribution<float> d(-1.0f, 1.0f);
    pattern.resize((size_t{64} << 20) / 2);
    for (uint16_t& x : pattern) x = float_to_bf16(d(gen) * 0.5f);
  }
  const size_t chunk = pattern.size() * 2;
  for (size_t off = 0; off < bytes; off += chunk) {
    const size_t n = std::min(chunk, bytes - off);
    check(cudaMemcpy(static_cast<char*>(dst) + off, pattern.data(), n, cudaMemcpyHostToDevice),
          "fill_random");
  }
  gpu.synchronize();
}

// `bytes` of e4m3 codes of values in [-224, 224] (never NaN).
void fill_random_fp8(CudaBackend& gpu, void* dst, size_t bytes) {
  static std::vector<uint8_t> pattern;
  if (pattern.empty()) {
    std::mt19937 gen(4321);
    std::uniform_real_distribution<float> d(-224.0f, 224.0f);
    pattern.resize(size_t{64} << 20);
    for (uint8_t& x : pattern) x = float_to_e4m3(d(gen));
  }
  for (size_t off = 0; off < bytes; off += pattern.size()) {
    const size_t n = std::min(pattern.size(), bytes - off);
    check(cudaMemcpy(static_cast<char*>(dst) + off, pattern.data(), n, cudaMemcpyHostToDevice),
          "fill_random_fp8");
  }
  gpu.synchronize();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median milliseconds per call of op(i), i = 0..kIters-1 within one graph.
double time_op(CudaBackend& gpu, const std::function<void(int)>& op) {
  for (int i = 0; i < kIters; ++i) op(i);  // eager warm-up: plans, caches
  gpu.synchronize();
  const int id = gpu.capture_graph([&] {
    for (int i = 0; i < kIters; ++i) op(i);
  });
  if (id < 0) {
    g_ok = false;
    return NAN;
  }
  cudaStream_t stream = gpu.stream();
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  gpu.replay_graph(id);
  gpu.synchronize();
  std::vector<double> ms;
  for (int r = 0; r < kReps; ++r) {
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    gpu.replay_graph(id);
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float t = 0.0f;
    check(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
    ms.push_back(static_cast<double>(t) / kIters);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return median(ms);
}

struct Ceilings {
  double copy_gbps = 0.0;
  double gemm_tflops = 0.0;
};

Ceilings measure_ceilings(CudaBackend& gpu) {
  Ceilings c;
  const size_t bytes = size_t{1} << 30;
  DeviceBuffer a(&gpu, bytes), b(&gpu, bytes);
  fill_random(gpu, a.data(), bytes);
  const double copy_ms = time_op(gpu, [&](int) { gpu.copy_device(b.data(), a.data(), bytes); });
  c.copy_gbps = 2.0 * static_cast<double>(bytes) / (copy_ms * 1e-3) / 1e9;
  const int64_t n = 8192;
  DeviceBuffer x(&gpu, n * n * 2), w(&gpu, n * n * 2), out(&gpu, n * n * 2);
  fill_random(gpu, x.data(), n * n * 2);
  fill_random(gpu, w.data(), n * n * 2);
  Tensor tx = x.tensor(DType::kBF16, {n, n}), tw = w.tensor(DType::kBF16, {n, n});
  Tensor to = out.tensor(DType::kBF16, {n, n});
  const double gemm_ms = time_op(gpu, [&](int) { gpu.linear(tx, tw, Tensor(), to); });
  c.gemm_tflops = 2.0 * n * n * n / (gemm_ms * 1e-3) / 1e12;
  std::printf("ceilings: D2D copy %.0f GB/s (read+write, 1 GiB); bf16 GEMM 8192^3 %.0f TFLOP/s\n\n",
              c.copy_gbps, c.gemm_tflops);
  return c;
}

void bench_rms_norm(CudaBackend& gpu, const Ceilings& c, bool quick) {
  std::printf("rms_norm (bf16, H=4096)\n%8s %10s %10s %8s\n", "rows", "us", "GB/s", "%copy");
  const int64_t hidden = 4096;
  DeviceBuffer w(&gpu, hidden * 2);
  fill_random(gpu, w.data(), hidden * 2);
  const Tensor tw = w.tensor(DType::kBF16, {hidden});
  for (int64_t rows : {int64_t{1}, int64_t{64}, int64_t{256}, int64_t{4096}, int64_t{32768}}) {
    if (quick && rows > 4096) continue;
    const size_t bytes = static_cast<size_t>(rows * hidden * 2);
    const int sets = static_cast<int>(std::clamp<size_t>(kRotateBytes / (2 * bytes), 1, kIters));
    DeviceBuffer in(&gpu, bytes * sets), out(&gpu, bytes * sets);
    fill_random(gpu, in.data(), bytes * sets);
    const double ms = time_op(gpu, [&](int i) {
      char* base_in = static_cast<char*>(in.data()) + (i % sets) * bytes;
      char* base_out = static_cast<char*>(out.data()) + (i % sets) * bytes;
      Tensor x(base_in, DType::kBF16, {rows, hidden}), o(base_out, DType::kBF16, {rows, hidden});
      gpu.rms_norm(x, tw, 1e-5f, o);
    });
    const double gbps = 2.0 * static_cast<double>(bytes) / (ms * 1e-3) / 1e9;
    std::printf("%8lld %10.2f %10.0f %7.0f%%\n", static_cast<long long>(rows), ms * 1e3, gbps,
                100.0 * gbps / c.copy_gbps);
  }
  std::printf("\n");
}

// The fused decode op beside the unfused calls it replaces (the Backend
// default, each op its own kernel), in one graph each: qk_norm_rope_kv_write
// at the Llama-3.1-8B (32 q / 8 kv heads, no qk_norm: the op makes the calls,
// so both columns time them), Phi-4-mini (24 / 8, no qk_norm, rotary over 96
// of 128 dims) and Qwen3-30B-A3B (32 / 4, qk_norm) attention shapes, T = 1
// and 8.
void bench_fused_decode(CudaBackend& gpu) {
  std::printf("fused decode op (bf16): us per call, fused vs unfused\n%-34s %4s %9s %9s %7s\n",
              "op / shape", "T", "fused", "unfused", "saved");
  struct RopeShape {
    const char* name;
    int hq, hkv;
    bool norm;
    int64_t rotary;  // the table's width: the rotated dims of each head
  };
  const int64_t d = 128, num_blocks = 1024, block_size = 16, num_positions = 4096;
  DeviceBuffer table(&gpu, num_positions * d * 4), norm_w(&gpu, d * 2);
  fill_random(gpu, table.data(), num_positions * d * 4);  // any finite f32 bits: timing only
  fill_random(gpu, norm_w.data(), d * 2);
  for (const RopeShape& r : {RopeShape{"qk_norm_rope_kv_write 8B", 32, 8, false, d},
                             RopeShape{"qk_norm_rope_kv_write Phi-4-mini", 24, 8, false, 96},
                             RopeShape{"qk_norm_rope_kv_write 30B-A3B", 32, 4, true, d}}) {
    const QkvLayout layout{r.hq, r.hkv, static_cast<int>(d)};
    const int64_t cache_bytes = num_blocks * block_size * r.hkv * d * 2;
    DeviceBuffer k(&gpu, cache_bytes), v(&gpu, cache_bytes);
    for (int64_t tokens : {int64_t{1}, int64_t{8}}) {
      DeviceBuffer qkv(&gpu, tokens * layout.row_width() * 2), pos(&gpu, tokens * 4),
          slots(&gpu, tokens * 4);
      fill_random(gpu, qkv.data(), tokens * layout.row_width() * 2);
      std::vector<int32_t> host(static_cast<size_t>(tokens));
      std::iota(host.begin(), host.end(), 100);
      check(cudaMemcpy(pos.data(), host.data(), tokens * 4, cudaMemcpyHostToDevice), "pos");
      for (int32_t& s : host) s *= 37;
      check(cudaMemcpy(slots.data(), host.data(), tokens * 4, cudaMemcpyHostToDevice), "slots");
      Tensor tq = qkv.tensor(DType::kBF16, {tokens, layout.row_width()});
      const Tensor tp = pos.tensor(DType::kI32, {tokens}), ts = slots.tensor(DType::kI32, {tokens});
      const Tensor tt = table.tensor(DType::kF32, {num_positions, r.rotary});
      const Tensor tw = r.norm ? norm_w.tensor(DType::kBF16, {d}) : Tensor();
      KvCacheView cache{k.tensor(DType::kBF16, {num_blocks, block_size, r.hkv, d}),
                        v.tensor(DType::kBF16, {num_blocks, block_size, r.hkv, d}), 16, Tensor()};
      const double fused = time_op(gpu, [&](int) {
        gpu.qk_norm_rope_kv_write(tq, layout, tw, tw, 1e-6f, tp, tt, ts, cache);
      });
      const double unfused = time_op(gpu, [&](int) {
        gpu.Backend::qk_norm_rope_kv_write(tq, layout, tw, tw, 1e-6f, tp, tt, ts, cache);
      });
      std::printf("%-34s %4lld %9.2f %9.2f %7.2f\n", r.name, static_cast<long long>(tokens),
                  fused * 1e3, unfused * 1e3, (unfused - fused) * 1e3);
    }
  }
  std::printf("\n");
}

// kv_dtype: kBF16 (the compute dtype) or kF8E4M3 (the FP8 cache, scales 1;
// through the decode kernel gpu.fp8_kv_decode_staged() picks).
void bench_decode_attention(CudaBackend& gpu, const Ceilings& c, const std::vector<int>& batches,
                            const std::vector<int>& contexts, DType kv_dtype = DType::kBF16) {
  const int hq = 32, hkv = 8, d = 128, block_size = 16;
  const QkvLayout layout{hq, hkv, d};
  const bool fp8 = kv_dtype == DType::kF8E4M3;
  std::printf(
      "decode paged_attention (bf16, %s KV, Hq=%d Hkv=%d D=%d, block %d; bytes = KV read)\n"
      "%6s %6s %10s %10s %8s\n",
      !fp8                         ? "bf16"
      : gpu.fp8_kv_decode_staged() ? "fp8_e4m3 (staged decode, PAGODA_FP8_KV_DECODE=old)"
                                   : "fp8_e4m3 (register decode)",
      hq, hkv, d, block_size, "batch", "ctx", "us", "GB/s", "%copy");
  const size_t token_bytes = static_cast<size_t>(hkv) * d * dtype_size(kv_dtype);  // one of k or v
  const size_t max_kv_tokens = std::max<size_t>(static_cast<size_t>(batches.back()) * contexts.back(),
                                                kRotateBytes / (2 * token_bytes));
  const int64_t num_blocks = static_cast<int64_t>(max_kv_tokens / block_size) + 1;
  DeviceBuffer k(&gpu, num_blocks * block_size * token_bytes), v(&gpu, num_blocks * block_size * token_bytes);
  for (const DeviceBuffer* b : {&k, &v}) {
    if (fp8) {
      fill_random_fp8(gpu, b->data(), b->size());
    } else {
      fill_random(gpu, b->data(), b->size());
    }
  }
  const float unit_scales[2] = {1.0f, 1.0f};
  DeviceBuffer scales(&gpu, sizeof(unit_scales));
  gpu.copy_to_device(scales.data(), unit_scales, sizeof(unit_scales));
  gpu.synchronize();
  const Tensor tk = k.tensor(kv_dtype, {num_blocks, block_size, hkv, d});
  const Tensor tv = v.tensor(kv_dtype, {num_blocks, block_size, hkv, d});
  KvCacheView cache{tk, tv, block_size, scales.tensor(DType::kF32, {2})};
  for (int batch : batches) {
    for (int ctx : contexts) {
      const int blocks_per_seq = (ctx + block_size - 1) / block_size;
      const size_t kv_bytes = static_cast<size_t>(batch) * ctx * token_bytes * 2;
      const int sets = static_cast<int>(std::clamp<size_t>(kRotateBytes / kv_bytes, 1, kIters));
      // Set i uses blocks [i * batch * blocks_per_seq, ...): disjoint, contiguous.
      std::vector<int32_t> tables(static_cast<size_t>(sets) * batch * blocks_per_seq);
      for (size_t i = 0; i < tables.size(); ++i) tables[i] = static_cast<int32_t>(i % static_cast<size_t>(num_blocks));
      std::vector<int32_t> qsl(static_cast<size_t>(batch) + 1), lens(static_cast<size_t>(batch), ctx);
      for (int s = 0; s <= batch; ++s) qsl[static_cast<size_t>(s)] = s;
      DeviceBuffer d_tables(&gpu, tables.size() * 4), d_qsl(&gpu, qsl.size() * 4), d_lens(&gpu, lens.size() * 4);
      gpu.copy_to_device(d_tables.data(), tables.data(), tables.size() * 4);
      gpu.copy_to_device(d_qsl.data(), qsl.data(), qsl.size() * 4);
      gpu.copy_to_device(d_lens.data(), lens.data(), lens.size() * 4);
      DeviceBuffer qkv(&gpu, static_cast<size_t>(batch) * layout.row_width() * 2);
      DeviceBuffer out(&gpu, static_cast<size_t>(batch) * hq * d * 2);
      fill_random(gpu, qkv.data(), qkv.size());
      const Tensor tq = qkv.tensor(DType::kBF16, {batch, layout.row_width()});
      Tensor to = out.tensor(DType::kBF16, {batch, static_cast<int64_t>(hq) * d});
      const double ms = time_op(gpu, [&](int i) {
        AttentionMetadata meta;
        meta.query_start_loc = d_qsl.tensor(DType::kI32, {batch + 1});
        meta.seq_lens = d_lens.tensor(DType::kI32, {batch});
        meta.block_tables = Tensor(static_cast<int32_t*>(d_tables.data()) +
                                       static_cast<size_t>(i % sets) * batch * blocks_per_seq,
                                   DType::kI32, {batch, blocks_per_seq});
        meta.num_seqs = batch;
        meta.max_query_len = 1;
        meta.max_seq_len = ctx;
        meta.max_blocks_per_seq = blocks_per_seq;
        meta.num_decode_seqs = batch;
        gpu.paged_attention(tq, layout, cache, meta, 1.0f / std::sqrt(static_cast<float>(d)), to);
      });
      const double gbps = static_cast<double>(kv_bytes) / (ms * 1e-3) / 1e9;
      std::printf("%6d %6d %10.1f %10.0f %7.0f%%\n", batch, ctx, ms * 1e3, gbps, 100.0 * gbps / c.copy_gbps);
    }
  }
  std::printf("\n");
}

// Prefill paged_attention, Llama-3.1-8B shapes: one sequence of 2048 new
// tokens over 0 / 2048 / 4096 / 6144 cached tokens (the four chunks of an
// 8k prefill) and 8 sequences of 512 new tokens from scratch. FLOP count:
// 4 * q_len * (average keys a query attends, causal) * Hq * D (two matmuls,
// 2 FLOP per multiply-add, only the unmasked causal part).
void bench_prefill_attention(CudaBackend& gpu, const Ceilings& c) {
  const int hq = 32, hkv = 8, d = 128, block_size = 16;
  const QkvLayout layout{hq, hkv, d};
  struct PrefillCase {
    int seqs, q_len, cached;
  };
  const PrefillCase cases[] = {{1, 2048, 0}, {1, 2048, 2048}, {1, 2048, 4096}, {1, 2048, 6144}, {8, 512, 0}};
  std::printf("prefill paged_attention (bf16, causal, Hq=%d Hkv=%d D=%d, block %d)\n"
              "%5s %6s %7s %10s %9s %8s\n", hq, hkv, d, block_size, "seqs", "q_len", "cached", "us",
              "TFLOP/s", "%gemm");
  const size_t token_bytes = static_cast<size_t>(hkv) * d * 2;  // one of k or v
  int64_t max_blocks = 0;
  for (const PrefillCase& pc : cases) {
    max_blocks = std::max<int64_t>(max_blocks, static_cast<int64_t>(pc.seqs) *
                                                   ((pc.q_len + pc.cached + block_size - 1) / block_size));
  }
  DeviceBuffer k(&gpu, max_blocks * block_size * token_bytes), v(&gpu, max_blocks * block_size * token_bytes);
  fill_random(gpu, k.data(), k.size());
  fill_random(gpu, v.data(), v.size());
  const Tensor tk = k.tensor(DType::kBF16, {max_blocks, block_size, hkv, d});
  const Tensor tv = v.tensor(DType::kBF16, {max_blocks, block_size, hkv, d});
  KvCacheView cache{tk, tv, block_size, Tensor()};
  for (const PrefillCase& pc : cases) {
    const int seq_len = pc.q_len + pc.cached;
    const int blocks_per_seq = (seq_len + block_size - 1) / block_size;
    const int64_t tokens = static_cast<int64_t>(pc.seqs) * pc.q_len;
    std::vector<int32_t> tables(static_cast<size_t>(pc.seqs) * blocks_per_seq);
    for (size_t i = 0; i < tables.size(); ++i) tables[i] = static_cast<int32_t>(i);
    std::vector<int32_t> qsl(static_cast<size_t>(pc.seqs) + 1), lens(static_cast<size_t>(pc.seqs), seq_len);
    for (int s = 0; s <= pc.seqs; ++s) qsl[static_cast<size_t>(s)] = s * pc.q_len;
    DeviceBuffer d_tables(&gpu, tables.size() * 4), d_qsl(&gpu, qsl.size() * 4), d_lens(&gpu, lens.size() * 4);
    gpu.copy_to_device(d_tables.data(), tables.data(), tables.size() * 4);
    gpu.copy_to_device(d_qsl.data(), qsl.data(), qsl.size() * 4);
    gpu.copy_to_device(d_lens.data(), lens.data(), lens.size() * 4);
    DeviceBuffer qkv(&gpu, static_cast<size_t>(tokens) * layout.row_width() * 2);
    DeviceBuffer out(&gpu, static_cast<size_t>(tokens) * hq * d * 2);
    fill_random(gpu, qkv.data(), qkv.size());
    const Tensor tq = qkv.tensor(DType::kBF16, {tokens, layout.row_width()});
    Tensor to = out.tensor(DType::kBF16, {tokens, static_cast<int64_t>(hq) * d});
    const double ms = time_op(gpu, [&](int) {
      AttentionMetadata meta;
      meta.query_start_loc = d_qsl.tensor(DType::kI32, {pc.seqs + 1});
      meta.seq_lens = d_lens.tensor(DType::kI32, {pc.seqs});
      meta.block_tables = d_tables.tensor(DType::kI32, {pc.seqs, blocks_per_seq});
      meta.num_seqs = pc.seqs;
      meta.max_query_len = pc.q_len;
      meta.max_seq_len = seq_len;
      meta.max_blocks_per_seq = blocks_per_seq;
      meta.num_decode_seqs = 0;
      gpu.paged_attention(tq, layout, cache, meta, 1.0f / std::sqrt(static_cast<float>(d)), to);
    });
    // Query j (0-based) attends cached + j + 1 keys: average cached + (q_len + 1) / 2.
    const double avg_keys = pc.cached + (pc.q_len + 1) / 2.0;
    const double flop = 4.0 * static_cast<double>(tokens) * avg_keys * hq * d;
    const double tflops = flop / (ms * 1e-3) / 1e12;
    std::printf("%5d %6d %7d %10.1f %9.1f %7.0f%%\n", pc.seqs, pc.q_len, pc.cached, ms * 1e3, tflops,
                100.0 * tflops / c.gemm_tflops);
  }
  std::printf("\n");
}

struct GemmShape {
  const char* name;
  int64_t n, k;
  bool f32_out;
};

void bench_linear(CudaBackend& gpu, const Ceilings& c, bool quick) {
  const GemmShape shapes[] = {{"qkv 4096->6144", 6144, 4096, false},
                              {"o_proj 4096x4096", 4096, 4096, false},
                              {"gate_up 4096->28672", 28672, 4096, false},
                              {"down 14336->4096", 4096, 14336, false},
                              {"lm_head 4096->128256 (f32 out)", 128256, 4096, true}};
  std::printf("linear (bf16 in, f32 accumulate; bytes = weights + x + out)\n%-32s %6s %10s %9s %8s %9s %8s\n",
              "shape (N x K)", "T", "us", "TFLOP/s", "%gemm", "GB/s", "%copy");  // + kernel
  for (const GemmShape& s : shapes) {
    const size_t w_bytes = static_cast<size_t>(s.n * s.k * 2);
    const int sets = static_cast<int>(std::clamp<size_t>(kRotateBytes / w_bytes, 1, 4));
    DeviceBuffer w(&gpu, w_bytes * sets);
    fill_random(gpu, w.data(), w.size());
    // T = 1 twice: the skinny-product kernel, then cuBLASLt.
    const std::pair<int64_t, bool> runs[] = {{1, true},   {1, false},   {4, false},
                                             {64, false}, {256, false}, {4096, false}};
    for (const auto& [t, skinny] : runs) {
      if (quick && t > 256) continue;
      gpu.set_skinny_linear(skinny);
      const size_t out_bytes = static_cast<size_t>(t * s.n) * (s.f32_out ? 4 : 2);
      DeviceBuffer x(&gpu, static_cast<size_t>(t * s.k * 2)), out(&gpu, out_bytes);
      fill_random(gpu, x.data(), x.size());
      const Tensor tx = x.tensor(DType::kBF16, {t, s.k});
      Tensor to = out.tensor(s.f32_out ? DType::kF32 : DType::kBF16, {t, s.n});
      const double ms = time_op(gpu, [&](int i) {
        const Tensor tw(static_cast<char*>(w.data()) + (i % sets) * w_bytes, DType::kBF16, {s.n, s.k});
        gpu.linear(tx, tw, Tensor(), to);
      });
      const double tflops = 2.0 * t * s.n * s.k / (ms * 1e-3) / 1e12;
      const double gbps = static_cast<double>(w_bytes + x.size() + out_bytes) / (ms * 1e-3) / 1e9;
      std::printf("%-32s %6lld %10.1f %9.1f %7.0f%% %9.0f %7.0f%% %s\n", s.name,
                  static_cast<long long>(t), ms * 1e3, tflops, 100.0 * tflops / c.gemm_tflops, gbps,
                  100.0 * gbps / c.copy_gbps, skinny ? "skinny" : "cublaslt");
    }
  }
  gpu.set_skinny_linear(true);
  std::printf("\n");
}

// The name of a decode-kernel choice (CudaBackend::set_quant_decode).
const char* quant_decode_name(CudaBackend::QuantDecode d) {
  switch (d) {
    case CudaBackend::QuantDecode::kStaged:
      return "staged";
    case CudaBackend::QuantDecode::kUnstaged:
      return "unstaged";
    case CudaBackend::QuantDecode::kLegacy:
      return "legacy";
    case CudaBackend::QuantDecode::kStagedV1:
      return "staged-v1";
  }
  return "?";
}

// Block-format weights (GGUF quantization blocks, and the group formats AWQ
// / GPTQ are repacked into: w4g128, w8g128, w4g128_perm = GPTQ act order) on
// the Llama-3.1-8B decode shapes, beside the bf16 weight (cuBLASLt / skinny
// linear): T 1, 2, 4 and 8 run a decode kernel, T 16, 32 and 64 the wide
// tensor-core kernel ("wide", launch_quant_mma_wide) and then the
// dequantize-then-cuBLASLt path ("dequant", CudaBackend::set_quant_wide
// (false)), T 512 the latter. q8_0, q4_0 and q4_1 at T <= 8 run under
// each decode-kernel choice (CudaBackend::QuantDecode: "staged",
// quant_staged_gemv.cu; "staged-v1", its first schedule; "unstaged",
// quant_mma_gemv.cu from 2 rows and quant_gemv.cu for 1; "legacy",
// quant_gemv.cu), the other formats under the
// backend's (PAGODA_QUANT_GEMV, default staged: quant_mma_gemv.cu where it
// has the format, else quant_gemv.cu / group_gemv.cu). Weights are random
// bytes (timing only; a _perm format gets a random permutation). A 4-bit
// group format runs twice: repacked into the tile layout (w4_tiles.h;
// "tiles" up to 32 rows, "dequant" above and beside it at 9..32), then
// kept in blocks (format "w4g128-blk", the kernels above), unless the
// backend's repack is off (PAGODA_W4_TILES=0). GB/s
// counts the weight bytes + x + out, against the copy ceiling. `names`: the
// formats to run (dtype_name spellings), all when empty; false (nothing
// run) when one is not listed.
bool bench_quant_linear(CudaBackend& gpu, const Ceilings& c, const std::vector<std::string>& names) {
  const GemmShape shapes[] = {{"qkv 4096->6144", 6144, 4096, false},
                              {"o_proj 4096x4096", 4096, 4096, false},
                              {"gate_up 4096->28672", 28672, 4096, false},
                              {"down 14336->4096", 4096, 14336, false}};
  const DType formats[] = {DType::kBF16,   DType::kQ4_0,      DType::kQ4_1, DType::kQ5_0,
                           DType::kQ5_1,   DType::kQ8_0,      DType::kQ2_K, DType::kQ3_K,
                           DType::kQ4_K,   DType::kQ5_K,      DType::kQ6_K, DType::kW4G128,
                           DType::kW8G128, DType::kW4G128Perm};
  std::vector<DType> selected;
  for (DType f : formats) {
    if (names.empty() || std::find(names.begin(), names.end(), dtype_name(f)) != names.end())
      selected.push_back(f);
  }
  for (const std::string& name : names) {
    if (std::none_of(std::begin(formats), std::end(formats),
                     [&](DType f) { return dtype_name(f) == name; })) {
      std::fprintf(stderr, "kernel_bench --quant: no format %s\n", name.c_str());
      return false;
    }
  }
  using QuantDecode = CudaBackend::QuantDecode;
  const QuantDecode backend_choice = gpu.quant_decode();
  std::printf(
      "quantized linear (bf16 x, block weights; bytes = weight + x + out)\n"
      "%-11s %-24s %4s %-9s %10s %9s %8s %8s\n",
      "format", "shape (N x K)", "T", "kernel", "us", "GB/s", "%copy", "TFLOP/s");
  std::mt19937 gen(7);
  const bool tiles_on = gpu.w4_tiles();
  for (DType f : selected) {
    const bool staged_format = f == DType::kQ8_0 || f == DType::kQ4_0 || f == DType::kQ4_1;
    for (const GemmShape& s : shapes) {
      // A 4-bit group format runs in the tile layout (w4_tiles.h), then in
      // blocks ("-blk" rows; PAGODA_W4_TILES=0: blocks only).
      const bool w4 = tiles_on && cuda::w4_tiles_apply(f, s.n, s.k);
      for (int layout = 0; layout < (w4 ? 2 : 1); ++layout) {
        const bool tiles = w4 && layout == 0;
        const std::string label = std::string(dtype_name(f)) + (w4 && !tiles ? "-blk" : "");
        const size_t rows_bytes = dtype_nbytes(f, s.n * s.k);
        const size_t w_bytes = rows_bytes + dtype_k_perm_bytes(f, s.k);
        const int sets = static_cast<int>(std::clamp<size_t>(kRotateBytes / w_bytes, 1, 8));
        DeviceBuffer w(&gpu, w_bytes * sets);
        fill_random(gpu, w.data(), w.size());
        if (has_k_perm(f)) {
          std::vector<int32_t> perm(static_cast<size_t>(s.k));
          std::iota(perm.begin(), perm.end(), 0);
          std::shuffle(perm.begin(), perm.end(), gen);
          for (int i = 0; i < sets; ++i)
            gpu.copy_to_device(static_cast<char*>(w.data()) + i * w_bytes + rows_bytes, perm.data(),
                               perm.size() * 4);
          gpu.synchronize();
        }
        // Every set prepared (a 4-bit one repacked into tiles when `tiles`).
        gpu.set_w4_tiles(tiles);
        for (int i = 0; i < sets && is_block_dtype(f); ++i) {
          const Tensor set(static_cast<char*>(w.data()) + i * w_bytes, f, {s.n, s.k});
          if (!gpu.prepare_block_weight(set).ok() || gpu.in_w4_tiles(set) != tiles) g_ok = false;
        }
        gpu.set_w4_tiles(tiles_on);
        for (int64_t t : {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 4096}) {
          const size_t out_bytes = static_cast<size_t>(t * s.n) * 2;
          DeviceBuffer x(&gpu, static_cast<size_t>(t * s.k * 2)), out(&gpu, out_bytes);
          fill_random(gpu, x.data(), x.size());
          const Tensor tx = x.tensor(DType::kBF16, {t, s.k});
          Tensor to = out.tensor(DType::kBF16, {t, s.n});
          const Tensor first(w.data(), f, {s.n, s.k});
          // Decode-kernel choices (T <= 8), wide kernel on / off (T 9..64:
          // off is dequant up to 32, tiled or dequant above), tiled GEMM on /
          // off (T 33..512).
          struct Run {
            QuantDecode choice;
            bool wide, tiled;
            const char* kernel;
          };
          std::vector<Run> runs;
          // The tiled GEMM beside dequant at 64..512 rows, past its route too.
          cuda::QuantGemvParams tp;  // a direct launch's parameters (the first weight set)
          tp.w_dtype = f;
          tp.x = tx.data;
          tp.w = first.data;
          tp.out = to.data;
          tp.rows = static_cast<int>(t);
          tp.n = s.n;
          tp.k = s.k;
          const bool tiled_t = is_block_dtype(f) && t >= cuda::kQuantTiledMinRows && t <= 512 &&
                               cuda::quant_tiled_gemm_supports(tp);
          if (!is_block_dtype(f)) {
            runs = {{backend_choice, true, true, "bf16"}};
          } else if (tiles && t <= 8) {  // each tile decode kernel, launched directly
            runs = {{backend_choice, true, true, "tiles-v1"}, {backend_choice, true, true, "tiles-v2"}};
          } else if (tiles && t <= cuda::kW4TileMaxRows) {
            runs = {{backend_choice, true, true, "tiles"}};
            if (t > 8) runs.push_back({backend_choice, false, true, "dequant"});
          } else if (tiles) {  // the tile layout has no tiled GEMM
            runs = {{backend_choice, true, true, "dequant"}};
          } else if (t <= 8) {
            if (staged_format) {
              for (QuantDecode q : {QuantDecode::kStaged, QuantDecode::kStagedV1,
                                    QuantDecode::kUnstaged, QuantDecode::kLegacy})
                runs.push_back({q, true, true, quant_decode_name(q)});
            } else {
              runs = {{backend_choice, true, true, quant_decode_name(backend_choice)}};
            }
          } else if (t <= cuda::kQuantWideRouteMaxRows) {
            runs = {{backend_choice, true, true, "wide"}, {backend_choice, false, true, "dequant"}};
          } else if (tiled_t) {
            runs = {{backend_choice, true, true, "tiled"},
                    {backend_choice, true, false, "dequant"}};
            if (t <= cuda::kQuantWideMaxRows) runs.push_back({backend_choice, true, false, "wide"});
          } else {
            runs = {{backend_choice, true, true, "dequant"}};
          }
          for (const Run& r : runs) {
            gpu.set_quant_decode(r.choice);
            gpu.set_quant_wide(r.wide);
            gpu.set_quant_tiled(r.tiled);
            const bool direct_wide = std::strcmp(r.kernel, "wide") == 0 && t > 32;
            // The tiled GEMM launched directly: its route (quant_tiled_route) takes some shapes
            // only.
            const bool direct_tiled = std::strcmp(r.kernel, "tiled") == 0;
            const bool direct_v1 = std::strcmp(r.kernel, "tiles-v1") == 0;
            const bool direct_v2 = std::strcmp(r.kernel, "tiles-v2") == 0;
            const double ms = time_op(gpu, [&](int i) {
              const Tensor tw(static_cast<char*>(w.data()) + (i % sets) * w_bytes, f, {s.n, s.k});
              if (direct_v1 || direct_v2) {  // v2 hands what it does not take (K > 4096) to v1
                cuda::QuantGemvParams p = tp;
                p.w = tw.data;
                p.w_tiles = true;
                const cudaError_t e = cuda::launch_w4_tile_gemv(
                    p, direct_v1 ? cuda::W4TileKernel::kV1 : cuda::W4TileKernel::kV2, gpu.stream());
                if (e != cudaSuccess) g_ok = false;
              } else if (direct_wide ||
                         direct_tiled) {  // past the kernel's route (wide: two 32-row launches)
                cuda::QuantGemvParams p = tp;
                p.w = tw.data;
                const cudaError_t e = direct_wide ? cuda::launch_quant_mma_wide(p, gpu.stream())
                                                  : cuda::launch_quant_tiled_gemm(p, gpu.stream());
                if (e != cudaSuccess) g_ok = false;
              } else {
                gpu.linear(tx, tw, Tensor(), to);
              }
            });
            const double gbps =
                static_cast<double>(w_bytes + x.size() + out_bytes) / (ms * 1e-3) / 1e9;
            const double tflops = 2.0 * static_cast<double>(t * s.n * s.k) / (ms * 1e-3) / 1e12;
            std::printf("%-11s %-24s %4lld %-9s %10.1f %9.0f %7.0f%% %8.1f\n", label.c_str(),
                        s.name, static_cast<long long>(t), r.kernel, ms * 1e3, gbps,
                        100.0 * gbps / c.copy_gbps, tflops);
          }
          gpu.set_quant_tiled(true);
          gpu.set_quant_decode(backend_choice);
          gpu.set_quant_wide(true);
        }
      }
    }
  }
  std::printf("\n");
  return true;
}

// moe_experts (both fused paths, moe_kernels.h) on one layer of
// Qwen3-30B-A3B (H 2048, I 768, 128 experts, top-8) at T 1, 2, 4, 8, 16, 64,
// 512 and of Mixtral-8x7B (H 4096, I 14336, 8 experts, top-2) at T 1, 2, 4,
// 8, 16, 64; decode-path rows also time the v1 kernels (set_moe_decode_v1)
// in the last three columns. Routing:
// k distinct uniformly random experts per token, a new draw for each of the
// kIters calls in a graph (so the experts read differ from call to call, as
// in a model's consecutive layers). Active bytes: the distinct selected
// experts' gate_up and down weights + x + out; GB/s over those against the
// copy ceiling. TFLOP/s: 2 T k 3 I H against the GEMM ceiling.
void bench_moe(CudaBackend& gpu, const Ceilings& c) {
  struct MoeShape {
    const char* name;
    int64_t h, in, e, k;
    std::vector<int64_t> tokens;
  };
  const MoeShape shapes[] = {
      {"qwen3-30b-a3b", 2048, 768, 128, 8, {1, 2, 4, 8, 16, 64, 512}},
      {"mixtral-8x7b", 4096, 14336, 8, 2, {1, 2, 4, 8, 16, 64}}};
  std::printf(
      "moe_experts (bf16; bytes = distinct selected experts' weights + x + out)\n"
      "%-14s %5s %8s %10s %9s %8s %9s %8s %-8s %10s %8s %8s\n",
      "shape", "T", "experts", "us", "GB/s", "%copy", "TFLOP/s", "%gemm", "path", "v1 us",
      "v1 %copy", "v1/new");
  std::mt19937 gen(77);
  const bool v1_env = gpu.moe_decode_v1();  // PAGODA_MOE_DECODE=v1: restored at the end
  gpu.set_moe_decode_v1(false);
  for (const MoeShape& s : shapes) {
    const size_t expert_bytes = static_cast<size_t>(3 * s.in * s.h * 2);
    DeviceBuffer gu(&gpu, s.e * expert_bytes * 2 / 3), down(&gpu, s.e * expert_bytes / 3);
    fill_random(gpu, gu.data(), gu.size());
    fill_random(gpu, down.data(), down.size());
    const Tensor tgu = gu.tensor(DType::kBF16, {s.e, 2 * s.in, s.h});
    const Tensor tdown = down.tensor(DType::kBF16, {s.e, s.h, s.in});
    for (int64_t t : s.tokens) {
      const int64_t slots = t * s.k;
      std::vector<int32_t> ids(static_cast<size_t>(slots * kIters));
      double distinct = 0.0;
      for (int i = 0; i < kIters; ++i) {
        std::vector<bool> used(static_cast<size_t>(s.e), false);
        for (int64_t r = 0; r < t; ++r) {
          std::vector<int32_t> all(static_cast<size_t>(s.e));
          for (int64_t e = 0; e < s.e; ++e) all[static_cast<size_t>(e)] = static_cast<int32_t>(e);
          std::shuffle(all.begin(), all.end(), gen);
          for (int64_t j = 0; j < s.k; ++j) {
            ids[static_cast<size_t>(i * slots + r * s.k + j)] = all[static_cast<size_t>(j)];
            used[static_cast<size_t>(all[static_cast<size_t>(j)])] = true;
          }
        }
        distinct += static_cast<double>(std::count(used.begin(), used.end(), true)) / kIters;
      }
      std::vector<float> weights(static_cast<size_t>(slots * kIters),
                                 1.0f / static_cast<float>(s.k));
      DeviceBuffer dids(&gpu, ids.size() * 4), dw(&gpu, weights.size() * 4);
      check(cudaMemcpy(dids.data(), ids.data(), dids.size(), cudaMemcpyHostToDevice), "ids");
      check(cudaMemcpy(dw.data(), weights.data(), dw.size(), cudaMemcpyHostToDevice), "weights");
      DeviceBuffer x(&gpu, t * s.h * 2), out(&gpu, t * s.h * 2), act(&gpu, slots * s.in * 2);
      DeviceBuffer scratch(&gpu, moe_experts_scratch_bytes(t, s.k, s.h));
      fill_random(gpu, x.data(), x.size());
      const Tensor tx = x.tensor(DType::kBF16, {t, s.h});
      Tensor tout = out.tensor(DType::kBF16, {t, s.h});
      Tensor tscratch = scratch.tensor(DType::kBF16, {static_cast<int64_t>(scratch.size() / 2)});
      Tensor tact = act.tensor(DType::kBF16, {slots, s.in});
      auto time_experts = [&] {
        return time_op(gpu, [&](int i) {
          const Tensor ti(static_cast<int32_t*>(dids.data()) + i * slots, DType::kI32, {t, s.k});
          const Tensor tw(static_cast<float*>(dw.data()) + i * slots, DType::kF32, {t, s.k});
          gpu.moe_experts(tx, tgu, tdown, ti, tw, tscratch, tact, tout);
        });
      };
      const double ms = time_experts();
      const double bytes = distinct * static_cast<double>(expert_bytes) + 2.0 * x.size();
      const double gbps = bytes / (ms * 1e-3) / 1e9;
      const double tflops = 2.0 * static_cast<double>(slots) * 3 * s.in * s.h / (ms * 1e-3) / 1e12;
      const bool decode = t <= 16 && slots <= 128;  // moe_kernels.h's kMoeDecodeMax*
      std::printf("%-14s %5lld %8.1f %10.1f %9.0f %7.0f%% %9.1f %7.1f%% %-8s", s.name,
                  static_cast<long long>(t), distinct, ms * 1e3, gbps, 100.0 * gbps / c.copy_gbps,
                  tflops, 100.0 * tflops / c.gemm_tflops, decode ? "decode" : "grouped");
      if (decode) {  // the same graph of calls on the v1 kernels
        gpu.set_moe_decode_v1(true);
        const double v1_ms = time_experts();
        gpu.set_moe_decode_v1(false);
        std::printf(" %10.1f %7.0f%% %8.2f", v1_ms * 1e3,
                    100.0 * bytes / (v1_ms * 1e-3) / 1e9 / c.copy_gbps, v1_ms / ms);
      }
      std::printf("\n");
    }
  }
  gpu.set_moe_decode_v1(v1_env);
  std::printf("\n");
}

// The FP8 matrix ceiling: cuBLASLt's e4m3 x e4m3 GEMM (f32 accumulate and
// out, no scaling) at 8192^3.
double fp8_gemm_ceiling(CudaBackend& gpu) {
  Result<std::unique_ptr<cuda::CublasLtLinear>> lt = cuda::CublasLtLinear::create(size_t{32} << 20);
  if (!lt.ok()) {
    g_ok = false;
    return NAN;
  }
  const int64_t n = 8192;
  DeviceBuffer x(&gpu, n * n), w(&gpu, n * n), out(&gpu, n * n * 4);
  fill_random(gpu, x.data(), n * n);
  fill_random(gpu, w.data(), n * n);
  cuda::LinearArgs a;
  a.x = x.data();
  a.w = w.data();
  a.out = out.data();
  a.rows = a.n = a.k = n;
  a.in_dtype = DType::kF8E4M3;
  a.bias_dtype = a.out_dtype = DType::kF32;
  const double ms = time_op(gpu, [&](int) {
    if (!lt.value()->run(a, gpu.stream()).ok()) g_ok = false;
  });
  return 2.0 * n * n * n / (ms * 1e-3) / 1e12;
}

// FP8 W8A8 linear (per-channel and 128x128 block scales, dynamic per-token
// activations) beside bf16 on the Llama-3.1-8B shapes at T 1 .. 4096:
// microseconds of both, the FP8 call's GB/s (weight codes + x + out) against
// the copy ceiling and TFLOP/s against the FP8 GEMM ceiling. "fp8 us" is the
// default route (above 8 rows cuBLASLt's own scale modes: outer-vector for
// per-channel, 128x128 blocks x 1x128 groups for block 128), "old us" the
// same call with set_fp8_lt_scales(false) (cuBLASLt unscaled f32 + the
// scaling epilogue for per-channel, pagoda's FP8 GEMM for blocks); GB/s,
// TFLOP/s and %fp8 are the default route's, "old%" the old route's %fp8.
// Both times include the activation quantisation (and the epilogue);
// "quant us" times launch_fp8_quantize alone: the share a fused producer
// would save (at T = 1 the decode kernel quantises its own row: what that
// saved).
// Weight codes are random bytes (timing only).
void bench_fp8_linear(CudaBackend& gpu, const Ceilings& c) {
  const double fp8_tflops = fp8_gemm_ceiling(gpu);
  std::printf("ceiling: FP8 e4m3 GEMM 8192^3 (cuBLASLt, f32 out) %.0f TFLOP/s\n\n", fp8_tflops);
  const GemmShape shapes[] = {{"qkv 4096->6144", 6144, 4096, false},
                              {"o_proj 4096x4096", 4096, 4096, false},
                              {"gate_up 4096->28672", 28672, 4096, false},
                              {"down 14336->4096", 4096, 14336, false}};
  std::printf(
      "fp8 linear (bf16 x and out; bytes = codes + x + out)\n%-22s %-7s %4s %9s %9s %9s %9s %8s "
      "%7s %8s %7s %7s\n",
      "shape (N x K)", "scales", "T", "bf16 us", "fp8 us", "old us", "quant us", "GB/s", "%copy",
      "TFLOP/s", "%fp8", "old%");
  for (const GemmShape& s : shapes) {
    const size_t codes_bytes = static_cast<size_t>(s.n * s.k), bf16_bytes = codes_bytes * 2;
    const int sets = static_cast<int>(std::clamp<size_t>(kRotateBytes / codes_bytes, 1, 4));
    DeviceBuffer codes(&gpu, codes_bytes * sets), w16(&gpu, bf16_bytes * 2);
    fill_random(gpu, codes.data(), codes.size());
    fill_random(gpu, w16.data(), w16.size());
    for (int32_t block : {0, 128}) {
      const int64_t num_scales = block > 0 ? ((s.n + 127) / 128) * ((s.k + 127) / 128) : s.n;
      std::vector<float> host_scales(static_cast<size_t>(num_scales), 1e-3f);
      DeviceBuffer scales(&gpu, host_scales.size() * 4);
      gpu.copy_to_device(scales.data(), host_scales.data(), scales.size());
      auto weight = [&](int i) {
        LinearWeight w(Tensor(static_cast<char*>(codes.data()) + (i % sets) * codes_bytes,
                              DType::kF8E4M3, {s.n, s.k}));
        w.block = block;
        w.weight_scale = block > 0
                             ? scales.tensor(DType::kF32, {(s.n + 127) / 128, (s.k + 127) / 128})
                             : scales.tensor(DType::kF32, {s.n});
        return w;
      };
      if (!gpu.prepare_fp8_weight(weight(0)).ok()) g_ok = false;
      for (int64_t t : {1, 2, 4, 8, 16, 32, 64, 512, 4096}) {
        const size_t out_bytes = static_cast<size_t>(t * s.n) * 2;
        DeviceBuffer x(&gpu, static_cast<size_t>(t * s.k * 2)), out(&gpu, out_bytes);
        fill_random(gpu, x.data(), x.size());
        const Tensor tx = x.tensor(DType::kBF16, {t, s.k});
        Tensor to = out.tensor(DType::kBF16, {t, s.n});
        const double bf16_ms = time_op(gpu, [&](int i) {
          const Tensor tw(static_cast<char*>(w16.data()) + (i % 2) * bf16_bytes, DType::kBF16,
                          {s.n, s.k});
          gpu.linear(tx, tw, Tensor(), to);
        });
        const double ms = time_op(gpu, [&](int i) { gpu.linear(tx, weight(i), Tensor(), to); });
        gpu.set_fp8_lt_scales(false);
        const double old_ms =
            time_op(gpu, [&](int i) { gpu.linear(tx, weight(i), Tensor(), to); });
        gpu.set_fp8_lt_scales(true);
        const int64_t groups = block > 0 ? (s.k + block - 1) / block : 1;
        DeviceBuffer q_codes(&gpu, static_cast<size_t>(t * s.k)),
            q_scales(&gpu, static_cast<size_t>(t * groups) * 4);
        cuda::Fp8QuantizeParams qp;
        qp.dtype = DType::kBF16;
        qp.x = x.data();
        qp.rows = t;
        qp.k = s.k;
        qp.group = block;
        qp.codes = static_cast<uint8_t*>(q_codes.data());
        qp.scales = static_cast<float*>(q_scales.data());
        const double quant_ms = time_op(gpu, [&](int) {
          if (cuda::launch_fp8_quantize(qp, gpu.stream()) != cudaSuccess) g_ok = false;
        });
        const double gbps =
            static_cast<double>(codes_bytes + x.size() + out_bytes) / (ms * 1e-3) / 1e9;
        const double tflops = 2.0 * t * s.n * s.k / (ms * 1e-3) / 1e12;
        const double old_tflops = 2.0 * t * s.n * s.k / (old_ms * 1e-3) / 1e12;
        std::printf("%-22s %-7s %4lld %9.1f %9.1f %9.1f %9.1f %8.0f %6.0f%% %8.1f %6.0f%% %6.0f%%\n",
                    s.name, block > 0 ? "128x128" : "channel", static_cast<long long>(t),
                    bf16_ms * 1e3, ms * 1e3, old_ms * 1e3, quant_ms * 1e3, gbps,
                    100.0 * gbps / c.copy_gbps, tflops, 100.0 * tflops / fp8_tflops,
                    100.0 * old_tflops / fp8_tflops);
      }
    }
  }
  // Non-zero: some "fp8 us" rows ran the old route (the log names the first refusal).
  std::printf("cuBLASLt scale-mode refusals: %lld\n", static_cast<long long>(gpu.num_fp8_lt_refusals()));
  std::printf("\n");
}

// Each FP8 decode kernel alone (fp8_linear_kernels.h: tc, the tensor-core
// kernel; rows, the CUDA-core one, at T <= kFp8GemvRowsMaxRows) on codes
// quantised beforehand (the quantisation is not timed), per-channel and
// 128x128 block scales, bf16 out, at the Llama-3 8B and 70B linear shapes
// and T 1, 2, 4, 8: microseconds, GB/s (weight codes + activation codes +
// out) and % of the copy ceiling side by side. Weight sets rotate past L2.
void bench_fp8_gemv(CudaBackend& gpu, const Ceilings& c) {
  struct Variant {
    const char* name;
    cudaError_t (*launch)(const cuda::Fp8LinearParams&, cudaStream_t);
    int max_rows;
  };
  const Variant variants[] = {
      {"tc", cuda::launch_fp8_gemv_tc, cuda::kFp8GemvMaxRows},
      {"rows", cuda::launch_fp8_gemv_rows, cuda::kFp8GemvRowsMaxRows}};
  const GemmShape shapes[] = {{"8B qkv 4096->6144", 6144, 4096, false},
                              {"8B o 4096x4096", 4096, 4096, false},
                              {"8B gate_up 4096->28672", 28672, 4096, false},
                              {"8B down 14336->4096", 4096, 14336, false},
                              {"70B qkv 8192->10240", 10240, 8192, false},
                              {"70B o 8192x8192", 8192, 8192, false},
                              {"70B gate_up 8192->57344", 57344, 8192, false},
                              {"70B down 28672->8192", 8192, 28672, false}};
  std::printf("fp8 decode kernels alone (codes in, bf16 out; bytes = codes + x codes + out)\n");
  std::printf("%-24s %-7s %2s", "shape (N x K)", "scales", "T");
  for (const Variant& v : variants) std::printf(" %8s us %6s %5s", v.name, "GB/s", "%copy");
  std::printf("\n");
  for (const GemmShape& s : shapes) {
    const size_t codes_bytes = static_cast<size_t>(s.n * s.k);
    const int sets = static_cast<int>(std::clamp<size_t>(kRotateBytes / codes_bytes, 1, 4));
    DeviceBuffer codes(&gpu, codes_bytes * sets);
    fill_random_fp8(gpu, codes.data(), codes.size());
    for (int32_t block : {0, 128}) {
      const int64_t groups = block > 0 ? (s.k + block - 1) / block : 1;
      const int64_t num_scales = block > 0 ? ((s.n + block - 1) / block) * groups : s.n;
      std::vector<float> host_scales(static_cast<size_t>(num_scales), 1e-3f);
      DeviceBuffer scales(&gpu, host_scales.size() * 4);
      gpu.copy_to_device(scales.data(), host_scales.data(), scales.size());
      for (int t : {1, 2, 4, 8}) {
        const size_t out_bytes = static_cast<size_t>(t * s.n) * 2;
        DeviceBuffer x(&gpu, static_cast<size_t>(t * s.k * 2)), out(&gpu, out_bytes);
        DeviceBuffer x_codes(&gpu, static_cast<size_t>(t * s.k)),
            x_scales(&gpu, static_cast<size_t>(t * groups) * 4);
        fill_random(gpu, x.data(), x.size());
        cuda::Fp8QuantizeParams qp;
        qp.dtype = DType::kBF16;
        qp.x = x.data();
        qp.rows = t;
        qp.k = s.k;
        qp.group = block;
        qp.codes = static_cast<uint8_t*>(x_codes.data());
        qp.scales = static_cast<float*>(x_scales.data());
        check(cuda::launch_fp8_quantize(qp, gpu.stream()), "fp8 quantize");
        cuda::Fp8LinearParams p;
        p.x_codes = qp.codes;
        p.x_scales = qp.scales;
        p.w_scales = static_cast<const float*>(scales.data());
        p.block = block;
        p.out = out.data();
        p.out_dtype = DType::kBF16;
        p.rows = t;
        p.n = s.n;
        p.k = s.k;
        std::printf("%-24s %-7s %2d", s.name, block > 0 ? "128x128" : "channel", t);
        for (const Variant& v : variants) {
          if (t > v.max_rows) {
            std::printf(" %11s %6s %5s", "-", "-", "-");
            continue;
          }
          const double ms = time_op(gpu, [&](int i) {
            cuda::Fp8LinearParams pi = p;
            pi.w = static_cast<const uint8_t*>(codes.data()) + (i % sets) * codes_bytes;
            check(v.launch(pi, gpu.stream()), v.name);
          });
          const double gbps =
              static_cast<double>(codes_bytes + x_codes.size() + out_bytes) / (ms * 1e-3) / 1e9;
          std::printf(" %11.1f %6.0f %4.0f%%", ms * 1e3, gbps, 100.0 * gbps / c.copy_gbps);
        }
        std::printf("\n");
      }
    }
  }
  std::printf("\n");
}

// The FP8 producers (--producers): rms_norm, add_rms_norm and silu_mul at
// widths 4096, 8192, 14336, 28672 and T 1, 8, 64, bf16, each three ways in
// one graph per column: the plain op, the plain op + launch_fp8_quantize of
// its output (the path the producer replaces) and the fused producer op
// (rms_norm_fp8, add_rms_norm_fp8, silu_mul_fp8). Inputs stay in L2, as
// when the previous kernel of a decode step has just written them. "saved"
// is (plain + quantise) - fused: positive when the fused op pays.
void bench_producers(CudaBackend& gpu) {
  std::printf("fp8 producers (bf16, L2-resident inputs): us per call\n%-13s %6s %4s %9s %9s %9s %8s\n",
              "op", "width", "T", "plain", "+quant", "fused", "saved");
  for (int64_t width : {int64_t{4096}, int64_t{8192}, int64_t{14336}, int64_t{28672}}) {
    for (int64_t rows : {int64_t{1}, int64_t{8}, int64_t{64}}) {
      const size_t row_bytes = static_cast<size_t>(rows * width * 2);
      DeviceBuffer x(&gpu, 2 * row_bytes), res(&gpu, row_bytes), w(&gpu, width * 2);
      DeviceBuffer out(&gpu, row_bytes), codes(&gpu, ((rows + 15) / 16 * 16) * width),
          scales(&gpu, rows * 4);
      fill_random(gpu, x.data(), x.size());
      fill_random(gpu, res.data(), res.size());
      fill_random(gpu, w.data(), w.size());
      Tensor tx = x.tensor(DType::kBF16, {rows, width}), tres = res.tensor(DType::kBF16, {rows, width});
      Tensor tgu = x.tensor(DType::kBF16, {rows, 2 * width}), tw = w.tensor(DType::kBF16, {width});
      Tensor to = out.tensor(DType::kBF16, {rows, width});
      Fp8Rows q{Tensor(codes.data(), DType::kF8E4M3, {rows, width}),
                scales.tensor(DType::kF32, {rows})};
      auto quantise = [&] {
        cuda::Fp8QuantizeParams p;
        p.dtype = DType::kBF16;
        p.x = out.data();
        p.rows = rows;
        p.k = width;
        p.codes = static_cast<uint8_t*>(codes.data());
        p.scales = static_cast<float*>(scales.data());
        check(cuda::launch_fp8_quantize(p, gpu.stream()), "launch_fp8_quantize");
      };
      struct Op {
        const char* name;
        std::function<void()> plain, fused;
      };
      const Op ops[] = {
          {"rms_norm", [&] { gpu.rms_norm(tx, tw, 1e-5f, to); },
           [&] { gpu.rms_norm_fp8(tx, tw, 1e-5f, to, q); }},
          {"add_rms_norm", [&] { gpu.add_rms_norm(tres, tx, tw, 1e-5f, to); },
           [&] { gpu.add_rms_norm_fp8(tres, tx, tw, 1e-5f, to, q); }},
          {"silu_mul", [&] { gpu.silu_mul(tgu, to); }, [&] { gpu.silu_mul_fp8(tgu, to, q); }},
      };
      for (const Op& op : ops) {
        const double plain = time_op(gpu, [&](int) { op.plain(); });
        const double quant = time_op(gpu, [&](int) {
          op.plain();
          quantise();
        });
        const double fused = time_op(gpu, [&](int) { op.fused(); });
        std::printf("%-13s %6lld %4lld %9.2f %9.2f %9.2f %8.2f\n", op.name,
                    static_cast<long long>(width), static_cast<long long>(rows), plain * 1e3,
                    quant * 1e3, fused * 1e3, (quant - fused) * 1e3);
      }
    }
  }
  std::printf("\n");
}

// The sampling kernel at rows 1..256 x vocabularies 32k..152k, greedy and
// temperature 0.8 with top_p 0.9 or top_k 50 (no lists, masks or top-K):
// microseconds with one CTA per row (PAGODA_SAMPLE_GROUPS=1) and with the
// automatic split (G CTAs per row), in the same process on the same data,
// and the split's GB/s counting one read of the logits (the speed of light
// is that over the copy ceiling; the kernel reads a row several times, from
// L2 when the batch's logits fit there); at 152k tokens, rows 1 and 8,
// top_p, also G forced to 4..64 (as capped). "old" is the automatic split
// with PAGODA_SAMPLE_KERNEL=old (the passes before the fewer-pass path).
// A fourth mode (T 0.8 alone) and a fifth (top_k 50 with top_p 0.9) follow
// the three of earlier sessions.
// Masked rows (issue 17, constrained decoding): 256 rows x 151,936 tokens,
// every row masked (a random 50% or 1% of the tokens allowed, one mask per
// row), greedy / T 0.8 top_k 50 / T 0.8 top_p 0.9: microseconds with the
// mask read on the fly (the default: one launch) beside the old passes'
// way (PAGODA_SAMPLE_KERNEL=old: the row masked into a scratch copy first,
// in launches of at most 64 MiB of scratch, as cuda_sample.cpp chunks them:
// 110 rows), and the unmasked rows for reference.
void bench_sample_masked(CudaBackend& gpu) {
  constexpr int kRows = 256;
  constexpr int64_t kVocab = 151936;
  constexpr size_t kScratchBytes = size_t{64} << 20;  // cuda_sample.cpp's kSampleScratchBytes
  const int64_t words = (kVocab + 31) / 32;
  const int chunk = static_cast<int>(kScratchBytes / (kVocab * sizeof(float)));
  std::printf("sample, masked rows (%d x %lld; us per call)\n%-8s %-18s %9s %9s %8s %9s\n", kRows,
              static_cast<long long>(kVocab), "allowed", "mode", "on fly", "old", "vs old",
              "unmasked");
  DeviceBuffer group(&gpu, cuda::sample_group_scratch_bytes());
  check(cudaMemset(group.data(), 0, group.size()), "cudaMemset");
  std::mt19937 gen(11);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> host(static_cast<size_t>(kRows) * static_cast<size_t>(kVocab));
  for (float& x : host) x = d(gen);
  DeviceBuffer logits(&gpu, host.size() * 4), params(&gpu, kRows * sizeof(cuda::SampleRowParams)),
      results(&gpu, kRows * sizeof(cuda::SampleRowResult)),
      masks(&gpu, static_cast<size_t>(kRows * words) * 4),
      scratch(&gpu, static_cast<size_t>(chunk) * static_cast<size_t>(kVocab) * 4);
  check(cudaMemcpy(logits.data(), host.data(), host.size() * 4, cudaMemcpyHostToDevice),
        "cudaMemcpy");
  for (int percent : {50, 1}) {
    std::vector<uint32_t> bits(static_cast<size_t>(kRows * words), 0u);
    std::uniform_int_distribution<int> pick(0, 99);
    for (int64_t i = 0; i < kRows * kVocab; ++i) {
      const int64_t r = i / kVocab, t = i % kVocab;
      if (pick(gen) < percent) bits[static_cast<size_t>(r * words + (t >> 5))] |= 1u << (t & 31);
    }
    check(cudaMemcpy(masks.data(), bits.data(), bits.size() * 4, cudaMemcpyHostToDevice),
          "cudaMemcpy");
    for (int mode = 0; mode < 3; ++mode) {
      auto time_rows = [&](bool masked, bool old) {
        cuda::SampleRowParams rp;
        rp.temperature = mode == 0 ? 0.0f : 0.8f;
        rp.top_k = mode == 1 ? 50 : 0;
        rp.top_p = mode == 2 ? 0.9f : 1.0f;
        std::vector<cuda::SampleRowParams> rps(kRows, rp);
        for (int r = 0; r < kRows; ++r) {
          rps[static_cast<size_t>(r)].seed = static_cast<uint64_t>(r) + 1;
          rps[static_cast<size_t>(r)].mask_begin = masked ? static_cast<int32_t>(r * words) : -1;
        }
        check(cudaMemcpy(params.data(), rps.data(), rps.size() * sizeof(rp),
                         cudaMemcpyHostToDevice),
              "cudaMemcpy");
        if (old) setenv("PAGODA_SAMPLE_KERNEL", "old", 1);
        const int step = masked && old ? chunk : kRows;
        const double ms = time_op(gpu, [&](int) {
          for (int begin = 0; begin < kRows; begin += step) {
            cuda::SampleParams p;
            p.logits = static_cast<const float*>(logits.data()) + begin * kVocab;
            p.vocab = kVocab;
            p.num_rows = std::min(step, kRows - begin);
            p.rows = static_cast<const cuda::SampleRowParams*>(params.data()) + begin;
            p.allowed_words = static_cast<const uint32_t*>(masks.data());
            p.scratch = static_cast<float*>(scratch.data());
            p.results = static_cast<cuda::SampleRowResult*>(results.data()) + begin;
            p.group_scratch = group.data();
            p.group_scratch_bytes = group.size();
            p.narrowing_rows = mode == 0 ? 0 : p.num_rows;
            check(cuda::launch_sample(p, gpu.stream()), "launch_sample");
          }
        });
        unsetenv("PAGODA_SAMPLE_KERNEL");
        return ms * 1e3;
      };
      const double fly = time_rows(true, false), old = time_rows(true, true),
                   plain = time_rows(false, false);
      const char* names[] = {"greedy", "T0.8 top_k 50", "T0.8 top_p 0.9"};
      std::printf("%6d%%  %-18s %9.1f %9.1f %7.2fx %9.1f\n", percent, names[mode], fly, old,
                  old / fly, plain);
    }
  }
  std::printf("\n");
}

void bench_sample(CudaBackend& gpu, const Ceilings& c) {
  std::printf("sample (f32 logits ~ N(0, 3); us per call; GB/s of one logits read, copy %.0f)\n"
              "%6s %7s %-18s %9s %4s %9s %8s %7s %9s %8s\n",
              c.copy_gbps, "rows", "vocab", "mode", "1 CTA", "G", "split", "speedup", "GB/s",
              "old", "vs old");
  DeviceBuffer group(&gpu, cuda::sample_group_scratch_bytes());
  check(cudaMemset(group.data(), 0, group.size()), "cudaMemset");
  std::mt19937 gen(7);
  std::normal_distribution<float> d(0.0f, 3.0f);
  for (int64_t vocab : {32000, 128256, 151936}) {
    for (int rows : {1, 8, 64, 256}) {
      std::vector<float> host(static_cast<size_t>(rows) * static_cast<size_t>(vocab));
      for (float& x : host) x = d(gen);
      DeviceBuffer logits(&gpu, host.size() * 4),
          params(&gpu, rows * sizeof(cuda::SampleRowParams)),
          results(&gpu, rows * sizeof(cuda::SampleRowResult));
      check(cudaMemcpy(logits.data(), host.data(), host.size() * 4, cudaMemcpyHostToDevice),
            "cudaMemcpy");
      for (int mode = 0; mode < 5; ++mode) {
        cuda::SampleRowParams rp;
        rp.temperature = mode == 0 ? 0.0f : 0.8f;
        rp.top_p = mode == 1 || mode == 4 ? 0.9f : 1.0f;
        rp.top_k = mode == 2 || mode == 4 ? 50 : 0;
        std::vector<cuda::SampleRowParams> rps(static_cast<size_t>(rows), rp);
        for (int r = 0; r < rows; ++r)
          rps[static_cast<size_t>(r)].seed = static_cast<uint64_t>(r) + 1;
        check(
            cudaMemcpy(params.data(), rps.data(), rps.size() * sizeof(rp), cudaMemcpyHostToDevice),
            "cudaMemcpy");
        cuda::SampleParams p;
        p.logits = static_cast<const float*>(logits.data());
        p.vocab = vocab;
        p.num_rows = rows;
        p.rows = static_cast<const cuda::SampleRowParams*>(params.data());
        p.results = static_cast<cuda::SampleRowResult*>(results.data());
        p.group_scratch = group.data();
        p.group_scratch_bytes = group.size();
        const bool narrowing = cuda::sample_row_narrows(rp, vocab);
        p.narrowing_rows = narrowing ? rows : 0;
        auto time_with = [&](const char* groups) {
          setenv("PAGODA_SAMPLE_GROUPS", groups, 1);
          const double ms = time_op(
              gpu, [&](int) { check(cuda::launch_sample(p, gpu.stream()), "launch_sample"); });
          unsetenv("PAGODA_SAMPLE_GROUPS");
          return ms * 1e3;
        };
        const double one = time_with("1");
        const double split = time_with("");
        setenv("PAGODA_SAMPLE_KERNEL", "old", 1);
        const double old = time_with("");
        unsetenv("PAGODA_SAMPLE_KERNEL");
        const int groups = cuda::sample_groups(rows, vocab, narrowing);
        const char* names[] = {"greedy", "T0.8 top_p 0.9", "T0.8 top_k 50", "T0.8",
                               "T0.8 k50 p0.9"};
        const double gbps = static_cast<double>(host.size()) * 4.0 / (split * 1e-6) / 1e9;
        std::printf("%6d %7lld %-18s %9.1f %4d %9.1f %7.2fx %7.0f %9.1f %7.2fx\n", rows,
                    static_cast<long long>(vocab), names[mode], one, groups, split, one / split,
                    gbps, old, old / split);
        if (vocab == 151936 && rows <= 8 && mode == 1) {  // other G (the automatic choice's tuning)
          std::printf("%33s", "forced G:");
          for (const char* forced : {"4", "8", "16", "32", "64"}) {
            const double us = time_with(forced);
            setenv("PAGODA_SAMPLE_GROUPS", forced, 1);
            const int g = cuda::sample_groups(rows, vocab);
            unsetenv("PAGODA_SAMPLE_GROUPS");
            std::printf("  %d: %.1f", g, us);
          }
          std::printf("\n");
        }
      }
    }
  }
  std::printf("\n");
  bench_sample_masked(gpu);
}

}  // namespace
}  // namespace pagoda

int main(int argc, char** argv) {
  using namespace pagoda;
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  std::unique_ptr<Backend> backend = create_cuda_backend(0, DType::kBF16);
  if (backend == nullptr) {
    std::fprintf(stderr, "kernel_bench: no CUDA device\n");
    return 1;
  }
  auto& gpu = static_cast<CudaBackend&>(*backend);
  std::printf("kernel_bench on %s (%d SMs)%s\n\n", gpu.name().c_str(), gpu.num_sms(), quick ? " --quick" : "");
  const Ceilings c = measure_ceilings(gpu);
  if ((argc == 4 || argc == 5) && std::strcmp(argv[1], "--attention") == 0) {
    // One decode-attention shape only (for ncu: --attention BATCH CTX [fp8]).
    const bool fp8 = argc == 5 && std::strcmp(argv[4], "fp8") == 0;
    bench_decode_attention(gpu, c, {std::atoi(argv[2])}, {std::atoi(argv[3])},
                           fp8 ? DType::kF8E4M3 : DType::kBF16);
    return gpu.status().ok() && g_ok ? 0 : 1;
  }
  if (argc == 2 && std::strcmp(argv[1], "--fp8-kv") == 0) {
    // Long-context decode, where the FP8 cache's halved bytes should show:
    // bf16, then FP8 through the register decode kernel and the staged one.
    bench_decode_attention(gpu, c, {1, 8, 32, 64}, {8192, 32768}, DType::kBF16);
    for (bool staged : {false, true}) {
      gpu.set_fp8_kv_decode_staged(staged);
      bench_decode_attention(gpu, c, {1, 8, 32, 64}, {8192, 32768}, DType::kF8E4M3);
    }
    return gpu.status().ok() && g_ok ? 0 : 1;
  }
  // The block-format linear (not in the default run, which run.sh gives 90 s).
  if (argc >= 2 && std::strcmp(argv[1], "--quant") == 0) {
    if (!bench_quant_linear(gpu, c, std::vector<std::string>(argv + 2, argv + argc))) return 2;
    return gpu.status().ok() && g_ok ? 0 : 1;
  }
  if (argc == 2 && std::strcmp(argv[1], "--moe") == 0) {
    bench_moe(gpu, c);
    return gpu.status().ok() && g_ok ? 0 : 1;
  }
  if (argc == 2 && std::strcmp(argv[1], "--fp8") == 0) {
    bench_fp8_linear(gpu, c);
    return gpu.status().ok() && g_ok ? 0 : 1;
  }
  if (argc == 2 && std::strcmp(argv[1], "--fp8-gemv") == 0) {
    bench_fp8_gemv(gpu, c);
    return gpu.status().ok() && g_ok ? 0 : 1;
  }
  if (argc == 2 && std::strcmp(argv[1], "--fused") == 0) {
    bench_fused_decode(gpu);
    return gpu.status().ok() && g_ok ? 0 : 1;
  }
  if (argc == 2 && std::strcmp(argv[1], "--sample") == 0) {
    bench_sample(gpu, c);
    return gpu.status().ok() && g_ok ? 0 : 1;
  }
  if (argc == 2 && std::strcmp(argv[1], "--producers") == 0) {
    bench_producers(gpu);
    return gpu.status().ok() && g_ok ? 0 : 1;
  }
  if (argc == 2 && std::strcmp(argv[1], "--prefill") == 0) {
    bench_prefill_attention(gpu, c);
    return gpu.status().ok() && g_ok ? 0 : 1;
  }
  bench_rms_norm(gpu, c, quick);
  bench_decode_attention(gpu, c, quick ? std::vector<int>{1, 64} : std::vector<int>{1, 8, 32, 64, 128, 256},
                         quick ? std::vector<int>{1024} : std::vector<int>{1024, 4096, 8192});
  bench_prefill_attention(gpu, c);
  bench_linear(gpu, c, quick);
  if (!gpu.status().ok()) {
    std::fprintf(stderr, "kernel_bench: backend error: %s\n", gpu.status().error().message.c_str());
    return 1;
  }
  return g_ok ? 0 : 1;
}
