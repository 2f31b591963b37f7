// CudaBackend::linear with a block-dtype weight (GGUF quantization blocks,
// or AWQ / GPTQ repacked into the group formats). A 4-bit group weight
// prepare_block_weight repacked into the tile layout (cuda/w4_tiles.h;
// PAGODA_W4_TILES=0 skips that) runs up to cuda::kW4TileMaxRows rows on its
// tile kernel (9.. only with the wide kernel on), the rest through its tile
// dequantization below; the paths that follow are for every other weight.
// A _perm group format (GPTQ act order) gathers x's columns into its stored
// order first (up to
// kQuantWideMaxRows rows, into gather_scratch_) for the kernels; the
// dequantization writes its columns back to their logical order instead.
// Up to cuda::kQuantGemvMaxRows rows: a decode kernel, which streams the
// blocks once and dequantizes in registers: the tensor-core one
// (quant_mma_gemv.cu) for the formats it has, else the CUDA-core ones
// (group_gemv.cu for the group formats, quant_gemv.cu for GGUF's); q8_0,
// q4_0 and q4_1 first on the staged one (quant_staged_gemv.cu).
// set_quant_decode (PAGODA_QUANT_GEMV=unstaged / legacy) skips the staged
// kernel / every tensor-core one, PAGODA_QUANT_GEMV=staged-v1 runs the
// staged kernel's first schedule (cuda::StagedPlan::kDoubleBuffered) (A/B
// timing). kQuantGemvMaxRows + 1 ..
// cuda::kQuantWideRouteMaxRows rows (batch 9..32): the tensor-core kernel for
// wider x (launch_quant_mma_wide, every format, the weight still read in
// blocks) unless set_quant_wide(false) / PAGODA_QUANT_WIDE=dequant or its
// alignment is not met. cuda::quant_tiled_route (33..64 rows of a weight
// with >= 16384 output features): the tiled tensor-core GEMM (launch_quant_tiled_gemm: q4_0,
// q4_1, q8_0, q4_K, q5_K, q6_K, w4g* / w8g* without _perm, K a multiple of
// 256) unless set_quant_tiled(false) / PAGODA_QUANT_TILED=0. The rest (GPTQ
// act order, q2_K, q3_K, q5_0, q5_1, other K, those switches): the weight
// is dequantized chunk by chunk (chunk_rows() whole rows) into
// dequant_scratch_ and each chunk is one cuBLASLt GEMM writing its columns
// of out (row stride N). None allocates or waits, so all are
// graph-capturable.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>

#include "backend/cuda/activation_kernels.h"
#include "backend/cuda/cublaslt_linear.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/gather_kernels.h"
#include "backend/cuda/quant_linear_kernels.h"
#include "backend/cuda/w4_tiles.h"

namespace pagoda {
namespace {

// Elements of one dequantized chunk: 32 MiB of bf16.
constexpr int64_t kDequantChunkElems = int64_t{16} << 20;

bool is_half(DType t) {
  return t == DType::kBF16 || t == DType::kF16;
}

// Rows of w [n, k] per dequantized chunk: a multiple of 64, so every chunk's
// columns of the output start 128-byte aligned (cuBLASLt's fast algorithms).
int64_t chunk_rows(int64_t n, int64_t k) {
  return std::min(n, std::max<int64_t>(64, kDequantChunkElems / k / 64 * 64));
}

std::string describe(const Tensor& t) {
  std::string s = "[";
  for (int i = 0; i < t.ndim; ++i) s += fmt::format("{}{}", i ? ", " : "", t.shape[i]);
  return fmt::format("{}] {}", s, dtype_name(t.dtype));
}

// Grows the device allocation *ptr of *have bytes to at least `bytes`
// (contents not kept).
Status grow_scratch(void** ptr, size_t* have, size_t bytes, const char* what) {
  if (bytes <= *have) return Status::Ok();
  if (*ptr != nullptr) cudaFree(*ptr);
  *ptr = nullptr;
  *have = 0;
  if (cudaMalloc(ptr, bytes) != cudaSuccess) {
    *ptr = nullptr;
    cudaGetLastError();
    return make_error(ErrorCode::kResourceExhausted,
                      fmt::format("out of device memory for the {}-byte {}", bytes, what));
  }
  *have = bytes;
  return Status::Ok();
}

// The block kernels' parameters for out = x w^T (+ bias), x [rows, k]; a
// _perm format as its format without the permutation (x then gathered);
// tiles: w in the 4-bit tile layout.
cuda::QuantGemvParams gemv_params(const Tensor& x, const Tensor& w, const Tensor& bias,
                                  const Tensor& out, int64_t rows, bool tiles) {
  cuda::QuantGemvParams g;
  g.dtype = x.dtype;
  g.w_dtype = without_k_perm(w.dtype);
  g.x = x.data;
  g.w = w.data;
  g.bias = bias.empty() ? nullptr : bias.data;
  g.bias_dtype = bias.dtype;
  g.out = out.data;
  g.out_dtype = out.dtype;
  g.rows = static_cast<int>(rows);
  g.n = w.dim(0);
  g.k = w.dim(1);
  g.w_tiles = tiles;
  return g;
}

}  // namespace

Status CudaBackend::prepare_block_weight(const Tensor& w) {
  if (!is_block_dtype(w.dtype) || w.ndim != 2 || w.dim(1) % dtype_block_elems(w.dtype) != 0)
    return make_error(ErrorCode::kInvalidArgument,
                      "prepare_block_weight: not a block-dtype weight: " + describe(w));
  const size_t es = dtype_size(compute_dtype_);
  const size_t bytes = static_cast<size_t>(chunk_rows(w.dim(0), w.dim(1)) * w.dim(1)) * es;
  PAGODA_RETURN_IF_ERROR(grow_scratch(&dequant_scratch_.ptr, &dequant_scratch_.bytes, bytes,
                                      "dequantization scratch"));
  if (has_k_perm(w.dtype)) {
    PAGODA_RETURN_IF_ERROR(grow_scratch(
        &gather_scratch_.ptr, &gather_scratch_.bytes,
        static_cast<size_t>(cuda::kQuantWideMaxRows * w.dim(1)) * es, "act-order gather scratch"));
  }
  if (!w4_tiles_ || !cuda::w4_tiles_apply(w.dtype, w.dim(0), w.dim(1)) ||
      reinterpret_cast<uintptr_t>(w.data) % 16 != 0 || in_w4_tiles(w))
    return Status::Ok();  // kept in blocks (or already repacked, or a view of a repacked weight)
  return repack_w4_tiles(w);
}

Status CudaBackend::repack_w4_tiles(const Tensor& w) {
  const size_t tile_bytes = cuda::w4_tile_bytes(w.dtype, w.dim(1));
  const int64_t num_tiles = w.dim(0) / cuda::kW4TileRows;
  // The scratch holds >= 64 rows (or all N) of K 16-bit elements: >= 3 tiles.
  const int64_t per_pass = static_cast<int64_t>(dequant_scratch_.bytes / tile_bytes);
  if (per_pass < 1) return make_error(ErrorCode::kInternal, "repack_w4_tiles: " + describe(w));
  for (int64_t t0 = 0; t0 < num_tiles; t0 += per_pass) {
    const int64_t tiles = std::min(per_pass, num_tiles - t0);
    char* at = static_cast<char*>(w.data) + static_cast<size_t>(t0) * tile_bytes;
    cuda::W4TileRepackParams r;
    r.w_dtype = w.dtype;
    r.src = dequant_scratch_.ptr;
    r.dst = at;
    r.num_tiles = tiles;
    r.k = w.dim(1);
    cudaError_t e =
        cudaMemcpyAsync(dequant_scratch_.ptr, at, static_cast<size_t>(tiles) * tile_bytes,
                        cudaMemcpyDeviceToDevice, stream_);
    if (e == cudaSuccess) e = cuda::launch_w4_tile_repack(r, stream_);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return make_error(ErrorCode::kInternal,
                        fmt::format("repack_w4_tiles {}: {}", describe(w), cudaGetErrorString(e)));
    }
  }
  W4TileWeight& entry = w4_tile_weights_[w.data];
  entry.bytes = static_cast<size_t>(num_tiles) * tile_bytes;
  entry.dtype = w.dtype;
  entry.k = w.dim(1);
  return Status::Ok();
}

bool CudaBackend::in_w4_tiles(const Tensor& w) const {
  return w4_tiles_at(w.data) != w4_tile_weights_.end();
}

std::map<const void*, CudaBackend::W4TileWeight>::const_iterator CudaBackend::w4_tiles_at(
    const void* p) const {
  auto it = w4_tile_weights_.upper_bound(p);
  if (it == w4_tile_weights_.begin()) return w4_tile_weights_.end();
  --it;
  const char* start = static_cast<const char*>(it->first);
  return static_cast<const char*>(p) < start + it->second.bytes ? it : w4_tile_weights_.end();
}

bool CudaBackend::w4_tile_view_ok(const Tensor& w) const {
  const auto it = w4_tiles_at(w.data);
  const size_t tile_bytes = cuda::w4_tile_bytes(it->second.dtype, it->second.k);
  const size_t offset =
      static_cast<size_t>(static_cast<const char*>(w.data) - static_cast<const char*>(it->first));
  return without_k_perm(w.dtype) == without_k_perm(it->second.dtype) && w.dim(1) == it->second.k &&
         w.dim(0) % cuda::kW4TileRows == 0 && offset % tile_bytes == 0 &&
         offset + w.nbytes() - dtype_k_perm_bytes(w.dtype, w.dim(1)) <= it->second.bytes;
}

void CudaBackend::linear_blocks(const Tensor& x, const Tensor& w, const Tensor& bias, Tensor& out) {
  const int64_t k = x.ndim > 0 ? x.dim(-1) : 0;
  const int64_t rows = k > 0 ? x.numel() / k : 0;
  const int64_t n = w.ndim == 2 ? w.dim(0) : 0;
  const bool out_ok = out.dtype == x.dtype || out.dtype == DType::kF32;
  const bool bias_ok =
      bias.empty() || (bias.numel() == n && (is_half(bias.dtype) || bias.dtype == DType::kF32));
  if (!is_half(x.dtype) || !out_ok || !bias_ok || k == 0 || w.ndim != 2 || w.dim(1) != k ||
      k % dtype_block_elems(w.dtype) != 0 || out.numel() != rows * n) {
    return fail(fmt::format("linear: x {} w {} bias {} out {}", describe(x), describe(w),
                            bias.empty() ? std::string("none") : describe(bias), describe(out)));
  }
  if (rows == 0) return;
  const bool tiles = in_w4_tiles(w);
  if (tiles && !w4_tile_view_ok(w))
    return fail(
        fmt::format("linear: w {} is not whole 16-row tiles of the tile-layout weight "
                    "it lies in",
                    describe(w)));
  if (quant_tiled_ && cuda::quant_tiled_route(rows, n) && !has_k_perm(w.dtype)) {
    const cuda::QuantGemvParams g = gemv_params(x, w, bias, out, rows, tiles);
    if (cuda::quant_tiled_gemm_supports(g)) {
      check(cuda::launch_quant_tiled_gemm(g, stream_), "linear (quant tiled gemm)");
      return;
    }
  }
  const bool wide = quant_wide_ && rows > cuda::kQuantGemvMaxRows &&
                    rows <= cuda::kQuantWideRouteMaxRows;
  if (rows <= cuda::kQuantGemvMaxRows || wide) {
    cuda::QuantGemvParams g = gemv_params(x, w, bias, out, rows, tiles);
    if (has_k_perm(w.dtype)) {  // x's columns in the weight's stored order
      if (static_cast<size_t>(rows * k) * 2 > gather_scratch_.bytes)
        return fail(fmt::format("linear: block weight {} was not prepared (prepare_block_weight)",
                                describe(w)));
      cuda::GatherColumnsParams gc;
      gc.src = static_cast<const uint16_t*>(x.data);
      gc.indices = w.k_perm();
      gc.num_rows = rows;
      gc.num_cols = k;
      gc.out = static_cast<uint16_t*>(gather_scratch_.ptr);
      if (!check(cuda::launch_gather_columns(gc, stream_), "linear (act-order gather)")) return;
      g.x = gather_scratch_.ptr;
    }
    if (tiles) {
      if (cuda::w4_tile_gemv_supports(g)) {
        check(cuda::launch_w4_tile_gemv(g, stream_), "linear (w4 tile gemv)");
        return;
      }
    } else if (wide) {
      if (cuda::quant_mma_wide_supports(g)) {
        check(cuda::launch_quant_mma_wide(g, stream_), "linear (quant mma wide)");
        return;
      }
    } else if ((quant_decode_ == QuantDecode::kStaged || quant_decode_ == QuantDecode::kStagedV1) &&
               cuda::quant_staged_gemv_supports(g)) {
      const cuda::StagedPlan plan = quant_decode_ == QuantDecode::kStaged
                                        ? cuda::StagedPlan::kPipelined
                                        : cuda::StagedPlan::kDoubleBuffered;
      check(cuda::launch_quant_staged_gemv(g, stream_, plan), "linear (staged quant gemv)");
      return;
    } else if (quant_decode_ != QuantDecode::kLegacy && cuda::quant_mma_gemv_supports(g)) {
      check(cuda::launch_quant_mma_gemv(g, stream_), "linear (quant mma gemv)");
      return;
    } else if (cuda::group_gemv_supports(g)) {
      check(cuda::launch_group_gemv(g, stream_), "linear (group gemv)");
      return;
    } else if (cuda::quant_gemv_supports(g)) {
      check(cuda::launch_quant_gemv(g, stream_), "linear (quant gemv)");
      return;
    }
  }
  const int64_t chunk = chunk_rows(n, k);
  const size_t need = static_cast<size_t>(chunk * k) * dtype_size(x.dtype);
  if (need > dequant_scratch_.bytes) {
    return fail(fmt::format("linear: block weight {} was not prepared (prepare_block_weight)",
                            describe(w)));
  }
  const size_t out_es = dtype_size(out.dtype);
  for (int64_t n0 = 0; n0 < n; n0 += chunk) {
    cuda::DequantizeBlocksParams d;
    d.w_dtype = w.dtype;
    d.w = w.data;
    d.k = k;
    d.first_row = n0;
    d.num_rows = std::min(chunk, n - n0);
    d.out_dtype = x.dtype;
    d.out = dequant_scratch_.ptr;
    d.k_perm = w.k_perm();
    d.w_tiles = tiles;
    if (!check(cuda::launch_dequantize_blocks(d, stream_), "linear (dequantize)")) return;
    cuda::LinearArgs a;
    a.x = x.data;
    a.w = dequant_scratch_.ptr;
    a.out = static_cast<char*>(out.data) + static_cast<size_t>(n0) * out_es;
    a.ldo = n;
    a.rows = rows;
    a.n = d.num_rows;
    a.k = k;
    a.in_dtype = x.dtype;
    a.bias_dtype = out.dtype;
    a.out_dtype = out.dtype;
    const Status st = linear_->run(a, stream_);
    if (!st.ok()) return fail(st.error().message);
  }
  if (!bias.empty()) {
    cuda::BiasAddParams b;
    b.out_dtype = out.dtype;
    b.out = out.data;
    b.bias_dtype = bias.dtype;
    b.bias = bias.data;
    b.num_rows = rows;
    b.num_cols = n;
    check(cuda::launch_bias_add(b, stream_), "linear (bias)");
  }
}

}  // namespace pagoda
