// Decode products (T = 1..8 rows of x) for q8_0, q4_0 and q4_1 weights
// with the weight streamed through shared memory in 16-byte copies:
// launch_quant_staged_gemv (quant_linear_kernels.h).
//
// Why: these blocks are 34 / 18 / 20 bytes, so a row starts only 2-byte
// aligned and the direct loaders (quant_fragments.cuh, 2- and 4-byte loads
// from global memory) issue ~5 (q8_0) load instructions per 34 bytes, each
// touching 8 rows' sectors: bound by L1 wavefronts, not DRAM (H200, 8B
// Q8_0 file: 0.72x llama.cpp's decode). Here the global side is only
// 16-byte cp.async copies (L2 -> shared, no registers, no L1 allocation)
// and the narrow reads move to shared memory.
//
// Layout (as quant_mma_gemv.cu, quant_mma_step.cuh): a CTA of kWarps warps
// owns 16 rows (an m16 tile); warp w takes steps w, w + kWarps, ... of 256
// elements of K (8 blocks: 272 / 144 / 160 contiguous bytes of each row).
// For each of its steps the warp copies, for each of the 16 rows, the
// 16-byte chunks covering the row's step bytes [a, a + bytes) (from
// a & ~15, so up to 14 bytes before them; the last chunk cut at a + bytes)
// into row r's slot of one of its kStages shared buffers, lanes 2r and
// 2r + 1 taking row r's even and odd chunks (RowCopier); the copies of the
// warp's next kStages - 1 steps are in flight while the current step is
// computed (cp.async groups). Lane (g, c) then reads its share of rows g
// and g + 8 (the same Raw quant_fragments.cuh's F::load gives) from its
// row slot at the row's head offset with 2-byte shared loads, and the
// tensor-core step of quant_mma_step.cuh does the math (one row of x is
// the n8 B side with 7 zero columns: the same instruction count as 8).
//
// Configurations (quant_staged_gemv_config, StagedPlan): kPipelined (the
// default) runs whole steps: the copies with sizes fixed per lane
// (RowCopier::copy_whole), the x loads without a branch per chunk, every
// block's shared reads before the math and no branch between blocks
// (accumulate_whole_step: the mma chains of the 8 blocks overlap); ptxas,
// bf16 q8_0 at 4 x 3: ~690 instructions a warp's step against ~870 a block
// at a time (copies ~50 vs ~140, x ~45 vs ~120, math ~565 vs ~610); no
// spills. It picks per shape:
//  - n >= 16384 (>= 1024 tiles, e.g. the 8B's gate_up, 1792): 4 warps,
//    2 buffers, 5 CTAs a SM (min_ctas_per_sm: 77-92 registers) as the
//    first version (78% of the copy ceiling at T = 1 on an H100);
//  - else K <= 8192 (<= 32 steps; qkv 6144 x 4096: 384 tiles, o_proj 4096
//    x 4096: 256): 4 warps, 3 buffers (93-112 registers). With 8 warps
//    (kDoubleBuffered) a
//    warp had 2 steps of K = 4096: both copies issued up front, the math
//    only after they landed and beside no other copies of its SM, and the
//    384 8-warp CTAs of qkv were 1.45 waves of 264 slots (2 a SM); now a
//    warp has 4 steps with two copies in flight during each step's math,
//    and qkv's 384 4-warp CTAs fit one wave (3 a SM for q8_0: 60 KB of
//    shared memory each; more for q4_0 / q4_1);
//  - else (down 4096 x 14336: 56 steps): 8 warps, 2 buffers, as before
//    (7 steps a warp already overlap copies and math; 93-112 registers).
// kDoubleBuffered (CudaBackend::QuantDecode::kStagedV1) is the first
// version: 8 warps below 1024 tiles, else 4, 2 buffers, a block at a time.
//
// Reads outside the weight: a copy ends at the row step's last byte, but
// starts at the 16-byte aligned address at or before its first: when w is
// not 16-byte aligned, the first row's first copy reads up to 14 bytes
// before w, in the granule holding w's first byte (never another page);
// those bytes are not used.
//
// Shared memory per warp: kStages buffers x 16 rows x kRowChunks 16-byte
// chunks, kRowChunks odd so that rows g and g + 4 start on different banks
// (q8_0: 19 chunks, 4864 B a buffer; q4_0 / q4_1: 11, 2816 B).
//
// Numerics: those of quant_mma_gemv.cu (exact integer quants times x in
// the tensor core, f32 scale per block); deterministic, graph-capturable.
// The f32 partial sums are per warp (its steps in order) and then summed in
// warp order, so configurations with different warp counts differ in
// summation order only.
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/kernel_launch.cuh"
#include "backend/cuda/mma_helpers.cuh"
#include "backend/cuda/quant_fragments.cuh"
#include "backend/cuda/quant_linear_kernels.h"
#include "backend/cuda/quant_mma_step.cuh"

namespace pagoda::cuda {
namespace {

using qmma::kStepElems;
using qmma::kTileRows;
constexpr int64_t kManyTiles = 1024;  // from here on 4 warps a CTA (quant_staged_gemv_config)
// K of at most this many steps (8192) and fewer tiles: 4 warps, 3 buffers
// each (kPipelined). 8 warps would leave a warp <= 4 steps (2 for the 8B's
// qkv / o_proj), every copy issued before any math and the math after the
// last copy landed; 4 warps give a warp 4 steps of K = 4096, two in flight
// while it computes one.
constexpr int64_t kShortSteps = 32;
// Resident warps per SM the register allocation must allow (<= 128
// registers a thread): each has one step's copies in flight while it
// computes, 16 x 4352 B = 70 KB a SM for q8_0 (~2x the bytes the H200's
// DRAM latency needs at full bandwidth).
constexpr int kMinWarpsPerSm = 16;
// CTAs a SM the register allocation must allow: kMinWarpsPerSm warps, and
// 5 4-warp CTAs (<= 96 registers) for the whole-step kernel of >= 1024
// tiles, as many as the first version's 87 registers gave it (5 x 41 KB
// of q8_0 shared memory fit).
constexpr int min_ctas_per_sm(int warps, int stages, bool whole_steps) {
  return warps == 4 && stages == 2 && whole_steps ? 5 : kMinWarpsPerSm / warps;
}

// Shared-memory geometry of format F's staged steps.
template <class F>
struct StagedShape {
  static constexpr int kStepBytes = F::kStepBlocks * F::kBytes;  // 272, 144, 160
  static_assert(kStepBytes % 16 == 0, "a row's step start keeps its offset in a 16-byte chunk");
  static_assert(F::kElems == 32 && F::kStepBlocks == qmma::kChunks, "a block is a chunk");
  // 16-byte chunks holding kStepBytes bytes that start at an even offset
  // (<= 14) into the first chunk.
  static constexpr int kSpanChunks = (14 + kStepBytes + 15) / 16;  // 18, 10, 11
  static constexpr int kRowChunks = kSpanChunks | 1;  // a row's slot: 19, 11, 11 chunks
  static constexpr int kRowStride = 16 * kRowChunks;
  static constexpr int kBufferBytes = kTileRows * kRowStride;  // one step of the 16 rows
  // Dynamic shared memory of a CTA of kWarps warps with kStages buffers each.
  static constexpr int smem_bytes(int warps, int stages) { return warps * stages * kBufferBytes; }
};

// ---- 2-byte reads of a shared-memory copy (2-byte aligned) ----
__device__ __forceinline__ uint32_t lds_u16(const uint8_t* p) {
  return *reinterpret_cast<const uint16_t*>(p);
}
__device__ __forceinline__ uint32_t lds_u32_a2(const uint8_t* p) {
  return lds_u16(p) | (lds_u16(p + 2) << 16);
}

// Lane c's share of block h of one row's step at b (a shared-memory copy
// of the row's bytes), into the fields of block h of the Raw that F::load
// (quant_fragments.cuh) fills from global memory.
__device__ __forceinline__ void load_shared(qfrag::FmtQ8_0::Raw& r, const uint8_t* b, int h,
                                            int c) {
  const uint8_t* block = b + h * qfrag::FmtQ8_0::kBytes;
  r.d[h] = lds_u16(block);
  r.q[h][0] = lds_u32_a2(block + 2 + 4 * c);
  r.q[h][1] = lds_u32_a2(block + 18 + 4 * c);
}
__device__ __forceinline__ void load_shared(qfrag::FmtQ4_0::Raw& r, const uint8_t* b, int h,
                                            int c) {
  const uint8_t* block = b + h * qfrag::FmtQ4_0::kBytes;
  r.d[h] = lds_u16(block);
  r.q[h] = lds_u32_a2(block + 2 + 4 * c);
}
__device__ __forceinline__ void load_shared(qfrag::FmtQ4_1::Raw& r, const uint8_t* b, int h,
                                            int c) {
  const uint8_t* block = b + h * qfrag::FmtQ4_1::kBytes;
  r.dm[h] = lds_u32_a2(block);
  r.q[h] = lds_u32_a2(block + 4 + 4 * c);
}

// Copies the first `bytes` (1..16) of the 16 bytes at src (16-byte
// aligned) to shared memory at dst, zero-filling the rest; bytes past them
// are not read.
__device__ __forceinline__ void cp_async_upto_16(uint32_t dst, const void* src, int bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(bytes)
               : "memory");
}

// One lane's part of its warp's copies: lanes 2r and 2r + 1 copy row r of
// the tile (rows past n: row n - 1) into slot r, the even and the odd
// 16-byte chunks, so each copy instruction of the warp reads 16 whole
// 32-byte sectors.
template <class F>
struct RowCopier {
  using S = StagedShape<F>;
  const uint8_t* row;  // the row's first byte
  int slot;            // byte offset of the row's slot in a buffer
  int half;            // 0: even chunks, 1: odd

  __device__ RowCopier(const uint8_t* w, size_t row_bytes, int64_t row0, int64_t n, int lane) {
    const int64_t r = row0 + lane / 2 < n ? row0 + lane / 2 : n - 1;
    row = w + static_cast<size_t>(r) * row_bytes;
    slot = (lane / 2) * S::kRowStride;
    half = lane & 1;
  }

  // Issues the copies of `bytes` bytes of the row from step `step` on into
  // its slot of `buf`: 16-byte chunks from the aligned address at or before
  // them, the last one cut at the last byte.
  __device__ __forceinline__ void copy(uint8_t* buf, int64_t step, int bytes) const {
    const uintptr_t start =
        reinterpret_cast<uintptr_t>(row) + static_cast<size_t>(step) * S::kStepBytes;
    const int head = static_cast<int>(start & 15u);
    const uintptr_t base = start & ~uintptr_t{15};
    const uint32_t dst = smem_addr(buf + slot);
#pragma unroll
    for (int i = 0; i < (S::kSpanChunks + 1) / 2; ++i) {
      const int chunk = 2 * i + half;
      const int left = head + bytes - 16 * chunk;  // the row's bytes from this chunk on
      if (left > 0) {
        cp_async_upto_16(dst + 16 * chunk, reinterpret_cast<const void*>(base + 16 * chunk),
                         left < 16 ? left : 16);
      }
    }
  }

  // copy(buf, step, kStepBytes) with fewer instructions: kStepBytes is a
  // multiple of 16, so every step of the row starts at the row's offset
  // `head` into its first chunk, chunks [0, kStepBytes / 16) are whole and
  // chunk kStepBytes / 16 holds `head` bytes (none when head is 0).
  __device__ __forceinline__ void copy_whole(uint8_t* buf, int64_t step) const {
    constexpr int kFull = S::kStepBytes / 16;
    const uintptr_t start =
        reinterpret_cast<uintptr_t>(row) + static_cast<size_t>(step) * S::kStepBytes;
    const int head = static_cast<int>(start & 15u);
    const uint8_t* base = reinterpret_cast<const uint8_t*>(start & ~uintptr_t{15});
    const uint32_t dst = smem_addr(buf + slot);
#pragma unroll
    for (int i = 0; i < (kFull + 1) / 2; ++i) {
      const int chunk = 2 * i + half;
      if (chunk < kFull) cp_async_upto_16(dst + 16 * chunk, base + 16 * chunk, 16);
    }
    if (half == (kFull & 1) && head > 0)
      cp_async_upto_16(dst + 16 * kFull, base + 16 * kFull, head);
  }
};

// acc += one whole step (all kChunks blocks) of rows g (slot_a) and g + 8
// (slot_b) times x (xr): every block's shared reads first, then the math,
// with no branch between blocks, so the reads of later blocks and the mma
// chains of earlier ones overlap. Same order of additions into acc as the
// block-at-a-time loop (bit-identical results).
template <typename T, class F>
__device__ __forceinline__ void accumulate_whole_step(float (&acc)[4], const uint8_t* slot_a,
                                                      const uint8_t* slot_b, const qmma::XRaw& xr,
                                                      int c) {
  typename F::Raw ra, rb;
#pragma unroll
  for (int h = 0; h < qmma::kChunks; ++h) {
    load_shared(ra, slot_a, h, c);
    load_shared(rb, slot_b, h, c);
  }
#pragma unroll
  for (int h = 0; h < qmma::kChunks; ++h) {
    qmma::accumulate_chunk<T, F>(acc, F::template chunk<T>(ra, h), F::template chunk<T>(rb, h),
                                 xr.v[h]);
  }
}

// acc += blocks [0, valid_chunks) of one step, a block at a time (fewer
// live registers; the last, partial step of a row).
template <typename T, class F>
__device__ __forceinline__ void accumulate_partial_step(float (&acc)[4], const uint8_t* slot_a,
                                                        const uint8_t* slot_b, const qmma::XRaw& xr,
                                                        int valid_chunks, int c) {
#pragma unroll
  for (int h = 0; h < qmma::kChunks; ++h) {
    if (h >= valid_chunks) break;
    typename F::Raw cur_a, cur_b;  // block h only
    load_shared(cur_a, slot_a, h, c);
    load_shared(cur_b, slot_b, h, c);
    qmma::accumulate_chunk<T, F>(acc, F::template chunk<T>(cur_a, h),
                                 F::template chunk<T>(cur_b, h), xr.v[h]);
  }
}

// kStages buffers a warp: the copies of the warp's next kStages - 1 steps
// are in flight while it computes one. kWholeSteps: full steps through
// accumulate_whole_step (else every step a block at a time, the
// kDoubleBuffered plan).
template <typename T, class F, int kWarps, int kStages, bool kWholeSteps>
__global__ void __launch_bounds__(kWarps * 32, min_ctas_per_sm(kWarps, kStages, kWholeSteps))
    quant_staged_gemv_kernel(QuantGemvParams p) {
  static_assert(kStages >= 2, "one step computed while the next is copied");
  using S = StagedShape<F>;
  extern __shared__ __align__(16) uint8_t staged[];  // [kWarps][kStages][kBufferBytes]
  __shared__ float partial[kWarps][4][32];
  pdl_enter();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, c = lane & 3;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kTileRows;
  const int64_t ra = row0 + g < p.n ? row0 + g : p.n - 1;
  const int64_t rb = row0 + g + 8 < p.n ? row0 + g + 8 : p.n - 1;
  const uint8_t* w = static_cast<const uint8_t*>(p.w);
  const int64_t num_blocks = p.k / F::kElems;
  const size_t row_bytes = static_cast<size_t>(num_blocks) * F::kBytes;
  // Offsets of rows ra, rb in their slots (the same for every step).
  const int head_a = static_cast<int>(reinterpret_cast<uintptr_t>(w + ra * row_bytes) & 15u);
  const int head_b = static_cast<int>(reinterpret_cast<uintptr_t>(w + rb * row_bytes) & 15u);
  const bool has_x = g < p.rows;  // token g; lanes of absent tokens give B = 0
  const T* xg = static_cast<const T*>(p.x) + static_cast<int64_t>(has_x ? g : 0) * p.k;
  const int64_t num_steps = (num_blocks + F::kStepBlocks - 1) / F::kStepBlocks;
  auto valid_blocks = [&](int64_t step) {
    const int64_t left = num_blocks - step * F::kStepBlocks;
    return static_cast<int>(left < F::kStepBlocks ? left : F::kStepBlocks);
  };
  uint8_t* buffers = staged + warp * kStages * S::kBufferBytes;
  const RowCopier<F> copier(w, row_bytes, row0, p.n, lane);
  auto issue = [&](uint8_t* buf, int64_t step) {  // the copies of `step` into buf
    const int valid = valid_blocks(step);
    if (kWholeSteps && valid == F::kStepBlocks) {
      copier.copy_whole(buf, step);
    } else {
      copier.copy(buf, step, valid * F::kBytes);
    }
  };

  float acc[4] = {};
  // Steps warp + s * kWarps (s < kStages - 1) into buffers s: one group each.
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    const int64_t ahead = warp + s * kWarps;
    if (ahead < num_steps) issue(buffers + s * S::kBufferBytes, ahead);
    cp_async_commit();
  }
  int buf = 0;  // the i-th step of the warp is in buffer i % kStages
  for (int64_t step = warp; step < num_steps; step += kWarps) {
    const int64_t ahead = step + (kStages - 1) * kWarps;
    const int ahead_buf = buf == 0 ? kStages - 1 : buf - 1;  // (buf + kStages - 1) % kStages
    __syncwarp();  // every lane has read ahead_buf (the previous step)
    if (ahead < num_steps) issue(buffers + ahead_buf * S::kBufferBytes, ahead);
    cp_async_commit();                            // maybe empty: the wait below counts groups
    const int valid_chunks = valid_blocks(step);  // one chunk a block
    const bool whole = kWholeSteps && valid_chunks == qmma::kChunks;
    qmma::XRaw xr = {};
    if (has_x && whole) {  // the loads without a branch per chunk
      qmma::load_x<F::kX>(xr, xg + step * kStepElems, qmma::kChunks, c);
    } else if (has_x) {
      qmma::load_x<F::kX>(xr, xg + step * kStepElems, valid_chunks, c);
    }
    cp_async_wait<kStages - 1>();  // this lane's copies of `step` landed
    __syncwarp();                  // and every lane's
    const uint8_t* slots = buffers + buf * S::kBufferBytes;
    const uint8_t* slot_a = slots + g * S::kRowStride + head_a;
    const uint8_t* slot_b = slots + (g + 8) * S::kRowStride + head_b;
    if (whole) {
      accumulate_whole_step<T, F>(acc, slot_a, slot_b, xr, c);
    } else {
      accumulate_partial_step<T, F>(acc, slot_a, slot_b, xr, valid_chunks, c);
    }
    buf = buf + 1 == kStages ? 0 : buf + 1;
  }
  cp_async_wait<0>();
  qmma::store_tile<T, kWarps>(partial, acc, p, row0);
}

// Calls f(F{}) with the traits of w_dtype; false for other formats.
template <typename Fn>
bool dispatch_staged_format(DType t, Fn&& f) {
  switch (t) {
    case DType::kQ4_0:
      f(qfrag::FmtQ4_0{});
      return true;
    case DType::kQ4_1:
      f(qfrag::FmtQ4_1{});
      return true;
    case DType::kQ8_0:
      f(qfrag::FmtQ8_0{});
      return true;
    default:
      return false;
  }
}

// A kernel configuration (StagedConfig) as types.
template <int kWarps, int kStages, bool kWholeSteps>
struct Config {
  static constexpr int warps = kWarps, stages = kStages;
  static constexpr bool whole_steps = kWholeSteps;
};

// Calls f(Config{}) for every configuration quant_staged_gemv_config
// returns (or only the one equal to `only`, when given); false when none is.
template <typename Fn>
bool dispatch_config(const StagedConfig* only, Fn&& f) {
  bool found = false;
  auto visit = [&](auto cfg) {
    using C = decltype(cfg);
    if (only == nullptr || (only->warps == C::warps && only->stages == C::stages &&
                            only->whole_steps == C::whole_steps)) {
      f(cfg);
      found = true;
    }
  };
  visit(Config<4, 2, false>{});  // kDoubleBuffered
  visit(Config<8, 2, false>{});
  visit(Config<4, 2, true>{});  // kPipelined
  visit(Config<4, 3, true>{});
  visit(Config<8, 2, true>{});
  return found;
}

template <typename T, class F>
cudaError_t configure_format() {
  cudaError_t e = cudaSuccess;
  dispatch_config(nullptr, [&](auto cfg) {
    using C = decltype(cfg);
    const cudaError_t r =
        cudaFuncSetAttribute(quant_staged_gemv_kernel<T, F, C::warps, C::stages, C::whole_steps>,
                             cudaFuncAttributeMaxDynamicSharedMemorySize,
                             StagedShape<F>::smem_bytes(C::warps, C::stages));
    if (e == cudaSuccess) e = r;
  });
  return e;
}

template <typename T>
cudaError_t configure_type() {
  const cudaError_t errors[] = {configure_format<T, qfrag::FmtQ4_0>(),
                                configure_format<T, qfrag::FmtQ4_1>(),
                                configure_format<T, qfrag::FmtQ8_0>()};
  for (cudaError_t e : errors) {
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace

bool quant_staged_gemv_supports(const QuantGemvParams& p) {
  if (p.w_tiles) return false;  // the tile layout (w4_tiles.h): launch_w4_tile_gemv only
  const bool in_ok = p.dtype == DType::kBF16 || p.dtype == DType::kF16;
  const bool out_ok = p.out_dtype == p.dtype || p.out_dtype == DType::kF32;
  const bool bias_ok = p.bias == nullptr || p.bias_dtype == DType::kF32 ||
                       p.bias_dtype == DType::kBF16 || p.bias_dtype == DType::kF16;
  const bool format_ok =
      p.w_dtype == DType::kQ4_0 || p.w_dtype == DType::kQ4_1 || p.w_dtype == DType::kQ8_0;
  return in_ok && out_ok && bias_ok && format_ok && p.rows >= 1 && p.rows <= kQuantGemvMaxRows &&
         p.n > 0 && p.k > 0 && p.k % 32 == 0 && is_aligned(p.x, 16) && is_aligned(p.w, 2);
}

cudaError_t init_quant_staged_gemv() {
  const cudaError_t e = configure_type<bf16>();
  return e != cudaSuccess ? e : configure_type<f16>();
}

StagedConfig quant_staged_gemv_config(const QuantGemvParams& p, StagedPlan plan) {
  const int64_t tiles = ceil_div(p.n, kTileRows);
  if (plan == StagedPlan::kDoubleBuffered) return {tiles >= kManyTiles ? 4 : 8, 2, false};
  const int64_t num_steps = ceil_div(p.k, kStepElems);
  if (tiles >= kManyTiles) return {4, 2, true};
  if (num_steps <= kShortSteps) return {4, 3, true};
  return {8, 2, true};
}

cudaError_t launch_quant_staged_gemv(const QuantGemvParams& p, cudaStream_t stream,
                                     StagedPlan plan) {
  if (!quant_staged_gemv_supports(p)) return cudaErrorInvalidValue;
  const int64_t tiles = ceil_div(p.n, kTileRows);
  if (tiles > 0x7fffffff) return cudaErrorInvalidValue;
  const dim3 grid(static_cast<unsigned>(tiles));
  const StagedConfig config = quant_staged_gemv_config(p, plan);
  return dispatch_half(p.dtype, [&](auto t) {
    using T = decltype(t);
    bool launched = false;
    dispatch_staged_format(p.w_dtype, [&](auto f) {
      using F = decltype(f);
      launched = dispatch_config(&config, [&](auto cfg) {
        using C = decltype(cfg);
        launch_kernel(quant_staged_gemv_kernel<T, F, C::warps, C::stages, C::whole_steps>, grid,
                      C::warps * 32, StagedShape<F>::smem_bytes(C::warps, C::stages), stream, p);
      });
    });
    return launched ? cudaGetLastError() : cudaErrorInvalidValue;
  });
}

}  // namespace pagoda::cuda
