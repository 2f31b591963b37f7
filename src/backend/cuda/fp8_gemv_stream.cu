// Decode products with an FP8 weight on tensor cores, streamed through a
// shared-memory ring (fp8_linear_kernels.h, launch_fp8_gemv_stream): 1 ..
// 8 rows of activation codes read the weight once.
//
// Persistent: the grid is at most kCtasPerSm CTAs per SM, and CTA b walks
// the 16-row tiles b, b + grid, ... (every CTA the same number, give or take
// one). Its work is one flat sequence of stages (tile, 512 columns); a stage
// is the tile's 16 x 512 weight codes plus the same 512 columns of the
// activation rows, copied by cp.async into a ring of kStages slots, kStages
// - 1 stages ahead of the stage being multiplied, across tile boundaries,
// so the memory pipe never drains between tiles. Each cp.async of a warp
// reads 512 contiguous bytes of one weight row. Zero-filled past n and k.
//
// Per stage, warp w multiplies columns 64 w .. 64 w + 63 of the slot: lane
// 4 g + q reads 16 codes of weight rows g and g + 8 and of activation row g
// (zero for g >= rows) and runs mma_e4m3_k64 (fp8_mma.cuh). Sums are
// promoted to f32 every 64 columns, scaled there with block scales (a
// multiple of 64: a warp's 64 columns lie in one group), as the tensor-core
// kernel does (fp8_gemv_tc.cu). At a tile's last stage the warps' sums meet
// in shared memory; per-row scales s_t * w_scale[n] and the bias follow.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/element_access.cuh"
#include "backend/cuda/fp8_linear_kernels.h"
#include "backend/cuda/fp8_mma.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/mma_helpers.cuh"

namespace pagoda::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kTileRows = 16;
constexpr int kStageCols = 64 * kWarps;  // 512: warp w owns columns 64 w .. of a stage
constexpr int kStages = 6;               // 5 stages (40 KiB of weight) in flight per CTA
constexpr int kCtasPerSm = 2;
// A slot row is padded by 64 bytes: the 8 lanes of one 16-byte shared load
// (rows g, g + 1; 64 bytes each) then fall in disjoint banks.
constexpr int kRowBytes = kStageCols + 64;
constexpr int kWeightBytes = kTileRows * kRowBytes;          // 9,216
constexpr int kSlotBytes = kWeightBytes + kFp8GemvMaxRows * kRowBytes;  // + 8 activation rows
constexpr size_t kSmemBytes = size_t{kStages} * kSlotBytes;  // 82,944: 2 CTAs per SM

static_assert(kFp8GemvMaxRows == 8, "the mma's n = 8 holds every activation row");
static_assert(kTileRows * kStageCols / 16 == 2 * kThreads, "two weight copies per thread");

struct Walk {
  int64_t num_tiles, stages_per_tile, num_stages;  // num_stages: this CTA's
};

// Issues the copies of stage s (tile blockIdx.x + (s / spt) * grid, columns
// (s % spt) * 512 ..) into slot `slot`.
__device__ __forceinline__ void issue_stage(const Fp8LinearParams& p, const Walk& wk, int64_t s,
                                            uint8_t* slot) {
  const int64_t tile = blockIdx.x + (s / wk.stages_per_tile) * gridDim.x;
  const int64_t col0 = (s % wk.stages_per_tile) * kStageCols;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int piece = threadIdx.x + i * kThreads;  // row piece / 32, 16 bytes piece % 32
    const int r = piece >> 5, c = 16 * (piece & 31);
    const int64_t row = tile * kTileRows + r, col = col0 + c;
    const bool ok = row < p.n && col < p.k;  // k % 16 == 0: a piece is all in or all out
    cp_async_16(smem_addr(slot + r * kRowBytes + c), ok ? p.w + row * p.k + col : p.w, ok);
  }
  if (threadIdx.x < p.rows * 32) {
    const int t = threadIdx.x >> 5, c = 16 * (threadIdx.x & 31);
    const int64_t col = col0 + c;
    const bool ok = col < p.k;
    cp_async_16(smem_addr(slot + kWeightBytes + t * kRowBytes + c),
                ok ? p.x_codes + t * p.k + col : p.x_codes, ok);
  }
}

template <bool kBlock>
__global__ void __launch_bounds__(kThreads, kCtasPerSm) fp8_gemv_stream_kernel(Fp8LinearParams p) {
  extern __shared__ __align__(16) uint8_t ring[];
  __shared__ float4 partial[kWarps][32];
  pdl_enter();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, q = lane & 3;
  Walk wk;
  wk.num_tiles = (p.n + kTileRows - 1) / kTileRows;
  wk.stages_per_tile = (p.k + kStageCols - 1) / kStageCols;
  wk.num_stages = (wk.num_tiles - blockIdx.x + gridDim.x - 1) / gridDim.x * wk.stages_per_tile;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < wk.num_stages) issue_stage(p, wk, s, ring + s * kSlotBytes);
    cp_async_commit();
  }
  const int64_t num_groups = kBlock ? (p.k + p.block - 1) / p.block : 1;
  const bool x_ok = g < p.rows;
  const bool t0_ok = 2 * q < p.rows, t1_ok = 2 * q + 1 < p.rows;
  const float* xs0 = p.x_scales + (t0_ok ? 2 * q : 0) * num_groups;
  const float* xs1 = p.x_scales + (t1_ok ? 2 * q + 1 : 0) * num_groups;
  const uint4 zero = make_uint4(0, 0, 0, 0);
  float acc[4] = {};
  for (int64_t s = 0; s < wk.num_stages; ++s) {
    cp_async_wait<kStages - 2>();  // stage s landed (this thread's copies) ...
    __syncthreads();               // ... and everyone's; slot (s - 1) % kStages is free
    const int64_t next = s + kStages - 1;
    if (next < wk.num_stages) issue_stage(p, wk, next, ring + (next % kStages) * kSlotBytes);
    cp_async_commit();
    const uint8_t* slot = ring + (s % kStages) * kSlotBytes;
    const int64_t tile = blockIdx.x + (s / wk.stages_per_tile) * gridDim.x;
    const int64_t kc = s % wk.stages_per_tile;
    const int64_t col = kc * kStageCols + 64 * warp;
    if (col < p.k) {  // uniform over the warp: every lane runs each mma
      const int off = 64 * warp + 16 * q;
      const uint4 lo = *reinterpret_cast<const uint4*>(slot + g * kRowBytes + off);
      const uint4 hi = *reinterpret_cast<const uint4*>(slot + (g + 8) * kRowBytes + off);
      const uint4 xv =
          x_ok ? *reinterpret_cast<const uint4*>(slot + kWeightBytes + g * kRowBytes + off) : zero;
      float d[4] = {};
      mma_e4m3_k64(d, lo, hi, xv);
      if constexpr (kBlock) {
        const int64_t kb = col / p.block;
        const float ws = p.w_scales[(tile * kTileRows / p.block) * num_groups + kb];
        const float s0 = t0_ok ? xs0[kb] * ws : 0.0f;
        const float s1 = t1_ok ? xs1[kb] * ws : 0.0f;
        acc[0] += d[0] * s0;
        acc[1] += d[1] * s1;
        acc[2] += d[2] * s0;
        acc[3] += d[3] * s1;
      } else {
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[i] += d[i];
      }
    }
    if (kc != wk.stages_per_tile - 1) continue;
    // The tile's last stage. partial's previous readers passed this
    // iteration's barrier before anyone writes it again.
    partial[warp][lane] = make_float4(acc[0], acc[1], acc[2], acc[3]);
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[i] = 0.0f;
    __syncthreads();
    // Thread 4 l + i (< 128) finishes accumulator i of lane l: output feature
    // n0 + l / 4 (+ 8 for i >= 2), activation row 2 (l % 4) + i % 2.
    if (threadIdx.x >= 128) continue;
    const int l = threadIdx.x >> 2, i = threadIdx.x & 3;
    const int64_t row = tile * kTileRows + (l >> 2) + (i >= 2 ? 8 : 0);
    const int t = 2 * (l & 3) + (i & 1);
    if (row >= p.n || t >= p.rows) continue;
    float v = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      const float4 f = partial[w][l];
      v += i == 0 ? f.x : i == 1 ? f.y : i == 2 ? f.z : f.w;
    }
    if (!kBlock) v = v * p.x_scales[t] * p.w_scales[row];
    if (p.bias != nullptr) v += load_as_float(p.bias, p.bias_dtype, row);
    store_as_float(p.out, p.out_dtype, t * p.n + row, v);
  }
  cp_async_wait<0>();  // no copy outlives the kernel (all were empty past num_stages)
}

// The SM count of the current device, and its kernels' shared-memory limit
// raised once (cached per thread and device).
int prepare_device() {
  thread_local int cached_device = -1, cached_sms = 0;
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  if (device != cached_device) {
    int sms = 0;
    if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaFuncSetAttribute(fp8_gemv_stream_kernel<false>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kSmemBytes)) != cudaSuccess ||
        cudaFuncSetAttribute(fp8_gemv_stream_kernel<true>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             static_cast<int>(kSmemBytes)) != cudaSuccess) {
      return 0;
    }
    cached_device = device;
    cached_sms = sms;
  }
  return cached_sms;
}

}  // namespace

bool fp8_gemv_stream_supports(const Fp8LinearParams& p) {
  return fp8_gemv_supports(p) && p.x == nullptr && p.k % 16 == 0 && is_aligned(p.w, 16) &&
         is_aligned(p.x_codes, 16) && (p.block == 0 || p.block % 64 == 0);
}

cudaError_t launch_fp8_gemv_stream(const Fp8LinearParams& p, cudaStream_t stream) {
  if (!fp8_gemv_stream_supports(p)) return cudaErrorInvalidValue;
  const int sms = prepare_device();
  if (sms <= 0) return cudaErrorInvalidDevice;
  // Equal work per CTA: the fewest tiles per CTA that the resident CTAs
  // cover, then the fewest CTAs at that count.
  const int64_t tiles = ceil_div(p.n, kTileRows);
  const int64_t per_cta = ceil_div(tiles, int64_t{sms} * kCtasPerSm);
  const dim3 grid(static_cast<unsigned>(ceil_div(tiles, per_cta)));
  if (p.block > 0) {
    launch_kernel(fp8_gemv_stream_kernel<true>, grid, kThreads, kSmemBytes, stream, p);
  } else {
    launch_kernel(fp8_gemv_stream_kernel<false>, grid, kThreads, kSmemBytes, stream, p);
  }
  return cudaGetLastError();
}

}  // namespace pagoda::cuda
