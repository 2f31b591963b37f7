// CudaBackend::linear with an FP8 weight (backend/linear_weight.h). With
// set_fp8_own_row(true), one row (batch-1 decode) goes to the tensor-core
// decode kernel with its 16-bit values, which it quantises itself, where that
// kernel applies (off by default: slower in the decode step). Else the
// activations are quantised (launch_fp8_quantize) in chunks of fp8_chunk_rows
// rows into fp8_codes_ / fp8_scales_. A chunk of up to cuda::kFp8GemvMaxRows
// rows runs the decode kernel (launch_fp8_gemv), which streams the e4m3
// weight once: by default 1 row on CUDA cores (fp8_gemv_rows.cu), 2-8 on
// tensor cores (fp8_gemv_tc.cu), the faster at each T on an H100;
// PAGODA_FP8_GEMV=tc takes the tensor-core kernel for every row count, =rows
// the CUDA-core one for 1-2 rows (fp8_linear_kernels.h fp8_gemv_variant).
// Larger chunks with a 16-bit output (bias absent or of the output's dtype) run cuBLASLt's FP8 GEMM with its own scale modes
// (fp8_lt_mode; set_fp8_lt_scales, on by default) when the chunk's row count
// is a multiple of 16: per-row weights whose k
// and n are multiples of 16 with outer-vector scales on both operands, and
// 128x128-block weights whose k is a multiple of 512 (cuBLASLt's block-scale
// grid pads its k-blocks to a multiple of 4, which is then the loader's
// layout) and n a multiple of 16 with the activations quantised per 128-column
// group into [groups, rows] scales; cuBLASLt writes the scaled output and the
// bias in one GEMM. Where that is off, does not apply or cuBLASLt refused
// the shape (counted, logged once; the block path then re-quantises into
// [rows, groups]), per-row weights run cuBLASLt's unscaled FP8 GEMM (f32
// result in fp8_acc_, rows rounded up to a multiple of 16: the padding rows'
// products are never read) and the scaling epilogue (launch_fp8_scale_rows).
// Block-wise weights (block % 128 == 0), and per-row weights cuBLASLt does
// not take (n not a multiple of 16, or cuBLASLt refused the FP8 GEMM: logged
// once), run the tiled tensor-core GEMM (launch_fp8_gemm) where k % 16 == 0;
// what remains (odd k, other blocks) runs the decode kernel on every 8 rows:
// correct, but it reads the weight once per 8 rows.
// linear_fp8_rows takes codes and per-token scales a producer wrote
// (backend.h Fp8Rows) and runs the same product on them, chunk by chunk.
// Nothing allocates or waits (cuBLASLt's plans are host-side, cached per
// shape): graph-capturable.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>

#include "backend/cuda/cublaslt_linear.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/fp8_linear_kernels.h"
#include "core/log.h"

namespace pagoda {
namespace {

// The f32 product of one GEMM chunk: 16 Mi elements (64 MiB).
constexpr int64_t kAccElems = int64_t{16} << 20;

bool is_half(DType t) {
  return t == DType::kBF16 || t == DType::kF16;
}

// Rows of x per chunk for a weight of n rows: a multiple of 64 in [64, 4096].
int64_t fp8_chunk_rows(int64_t n) {
  return std::clamp<int64_t>(kAccElems / std::max<int64_t>(n, 1) / 64 * 64, 64, 4096);
}

int64_t num_groups(const LinearWeight& w) {
  return w.block > 0 ? (w.dim(1) + w.block - 1) / w.block : 1;
}

std::string describe(const Tensor& t) {
  std::string s = "[";
  for (int i = 0; i < t.ndim; ++i) s += fmt::format("{}{}", i ? ", " : "", t.shape[i]);
  return fmt::format("{}] {}", s, dtype_name(t.dtype));
}

// cuBLASLt's FP8 GEMM takes the weight: k and n multiples of 16, rows of 16-byte alignment.
bool lt_takes(const LinearWeight& w) {
  return w.block == 0 && w.dim(1) % 16 == 0 && w.dim(0) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(w.data) % 16 == 0;
}

// cuBLASLt's block scale modes take the weight: 128x128 blocks, k a multiple
// of 512 (ceil(k / 128) % 4 == 0: the scale grid's rows need no padding), n a
// multiple of 16, rows of 16-byte alignment.
bool lt_block_takes(const LinearWeight& w) {
  return w.block == 128 && w.dim(1) % 512 == 0 && w.dim(0) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(w.data) % 16 == 0;
}

}  // namespace

cuda::Fp8Scales CudaBackend::fp8_lt_mode(const LinearWeight& w, int64_t rows, const Tensor& bias,
                                          DType out_dtype) const {
  // Row counts that are multiples of 16 only: cuBLASLt's FP8 GEMMs take no
  // others (it refused 10 rows on an H100), and these write `out` directly,
  // so they cannot pad as the unscaled path does into its f32 scratch.
  const bool eligible = fp8_lt_scales_ && rows > cuda::kFp8GemvMaxRows && rows % 16 == 0 &&
                        is_half(out_dtype) && (bias.empty() || bias.dtype == out_dtype);
  if (eligible && w.block == 0 && lt_takes(w)) return cuda::Fp8Scales::kOuterVec;
  if (eligible && lt_block_takes(w)) return cuda::Fp8Scales::kBlock128;
  return cuda::Fp8Scales::kNone;
}

bool CudaBackend::fp8_lt_scaled(const uint8_t* codes, const float* scales, int64_t nr,
                                const LinearWeight& w, const Tensor& bias, char* out_rows,
                                DType out_dtype, cuda::Fp8Scales mode) {
  cuda::LinearArgs a;
  a.x = codes;
  a.w = w.data;
  a.bias = bias.empty() ? nullptr : bias.data;
  a.out = out_rows;
  a.rows = nr;
  a.n = w.dim(0);
  a.k = w.dim(1);
  a.in_dtype = DType::kF8E4M3;
  a.bias_dtype = a.out_dtype = out_dtype;
  a.fp8_scales = mode;
  a.w_scales = w.weight_scale.ptr<float>();
  a.x_scales = scales;
  const Status st = linear_->run(a, stream_);
  if (st.ok()) return true;
  if (num_fp8_lt_refusals_++ == 0) {
    log_warn("cuBLASLt refused an FP8 GEMM with its own scales ({}); such linears run the "
             "unscaled GEMM and the scaling epilogue, or pagoda's FP8 GEMM",
             st.error().message);
  }
  return false;
}

Status CudaBackend::grow(Buffer& b, size_t bytes, const char* what) {
  if (bytes <= b.bytes) return Status::Ok();
  if (b.ptr != nullptr) cudaFree(b.ptr);
  b = Buffer{};
  if (cudaMalloc(&b.ptr, bytes) != cudaSuccess) {
    b.ptr = nullptr;
    cudaGetLastError();
    return make_error(ErrorCode::kResourceExhausted,
                      fmt::format("out of device memory for the {}-byte {}", bytes, what));
  }
  b.bytes = bytes;
  return Status::Ok();
}

Status CudaBackend::prepare_fp8_weight(const LinearWeight& w) {
  const bool block_ok = w.block == 0 || (w.block > 0 && w.block % 16 == 0);
  const int64_t n = w.ndim == 2 ? w.dim(0) : 0, k = w.ndim == 2 ? w.dim(1) : 0;
  const int64_t scales = w.block > 0 ? ((n + w.block - 1) / w.block) * num_groups(w) : n;
  if (!w.is_fp8() || n == 0 || k == 0 || w.weight_scale.dtype != DType::kF32 ||
      w.weight_scale.numel() != scales ||
      (!w.input_scale.empty() &&
       (w.input_scale.dtype != DType::kF32 || w.input_scale.numel() != 1 || w.block > 0)))
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("prepare_fp8_weight: not an FP8 weight with its scales: {}, "
                                  "weight_scale {}, block {}",
                                  describe(w), describe(w.weight_scale), w.block));
  if (!block_ok)
    return make_error(ErrorCode::kUnsupported,
                      fmt::format("FP8 weight {}: block {} is not a multiple of 16 (the cuda "
                                  "kernels' unit)",
                                  describe(w), w.block));
  const int64_t chunk = fp8_chunk_rows(n);
  PAGODA_RETURN_IF_ERROR(
      grow(fp8_codes_, static_cast<size_t>(chunk * k), "FP8 activation scratch"));
  PAGODA_RETURN_IF_ERROR(grow(fp8_scales_, static_cast<size_t>(chunk * num_groups(w)) * 4,
                              "FP8 activation-scale scratch"));
  if (lt_takes(w))
    PAGODA_RETURN_IF_ERROR(
        grow(fp8_acc_, static_cast<size_t>(chunk * n) * sizeof(float), "FP8 GEMM scratch"));
  return Status::Ok();
}

bool CudaBackend::fp8_product(const uint8_t* codes, const float* scales, int64_t nr,
                              const LinearWeight& w, const Tensor& bias, char* out_rows,
                              DType out_dtype) {
  const int64_t n = w.dim(0), k = w.dim(1), groups = num_groups(w);
  const size_t out_es = dtype_size(out_dtype);
  // The FP8 product's operands for m rows from row m0 of the codes.
  auto fp8_params = [&](int64_t m0, int64_t m) {
    cuda::Fp8LinearParams g;
    g.x_codes = codes + m0 * k;
    g.x_scales = scales + m0 * groups;
    g.w = static_cast<const uint8_t*>(w.data);
    g.w_scales = w.weight_scale.ptr<float>();
    g.block = w.block;
    g.bias = bias.empty() ? nullptr : bias.data;
    g.bias_dtype = bias.dtype;
    g.out = out_rows + static_cast<size_t>(m0 * n) * out_es;
    g.out_dtype = out_dtype;
    g.rows = static_cast<int>(m);
    g.n = n;
    g.k = k;
    return g;
  };
  if (fp8_lt_mode(w, nr, bias, out_dtype) == cuda::Fp8Scales::kOuterVec &&
      fp8_lt_scaled(codes, scales, nr, w, bias, out_rows, out_dtype, cuda::Fp8Scales::kOuterVec))
    return true;
  const bool many = nr > cuda::kFp8GemvMaxRows;
  bool lt_ran = false;
  if (many && lt_takes(w) && !fp8_gemm_refused_) {
    cuda::LinearArgs a;
    a.x = codes;
    a.w = w.data;
    a.out = fp8_acc_.ptr;
    a.rows = (nr + 15) / 16 * 16;  // within the chunk (a multiple of 64)
    a.n = n;
    a.k = k;
    a.in_dtype = DType::kF8E4M3;
    a.bias_dtype = DType::kF32;
    a.out_dtype = DType::kF32;
    const Status st = linear_->run(a, stream_);
    lt_ran = st.ok();
    if (!st.ok()) {
      log_warn(
          "cuBLASLt's FP8 GEMM is unavailable ({}); FP8 linears of more than {} rows run "
          "pagoda's FP8 GEMM (or the decode kernel per {} rows where it does not apply)",
          st.error().message, cuda::kFp8GemvMaxRows, cuda::kFp8GemvMaxRows);
      fp8_gemm_refused_ = true;
    }
  }
  if (many && !lt_ran) {
    const cuda::Fp8LinearParams m = fp8_params(0, nr);
    if (cuda::fp8_gemm_supports(m)) return check(cuda::launch_fp8_gemm(m, stream_), "linear (fp8 gemm)");
  }
  if (!lt_ran) {
    for (int64_t m0 = 0; m0 < nr; m0 += cuda::kFp8GemvMaxRows) {
      const cuda::Fp8LinearParams g = fp8_params(m0, std::min<int64_t>(cuda::kFp8GemvMaxRows, nr - m0));
      if (!check(cuda::launch_fp8_gemv(g, stream_), "linear (fp8 gemv)")) return false;
    }
    return true;
  }
  cuda::Fp8ScaleRowsParams e;
  e.acc = static_cast<const float*>(fp8_acc_.ptr);
  e.x_scales = scales;
  e.w_scales = w.weight_scale.ptr<float>();
  e.bias = bias.empty() ? nullptr : bias.data;
  e.bias_dtype = bias.dtype;
  e.out = out_rows;
  e.out_dtype = out_dtype;
  e.rows = nr;
  e.n = n;
  return check(cuda::launch_fp8_scale_rows(e, stream_), "linear (fp8 scale)");
}

// Whether the prepared scratch holds a chunk of `rows` rows of w's product.
bool CudaBackend::fp8_prepared(const LinearWeight& w, int64_t rows, bool codes) const {
  const int64_t n = w.dim(0), k = w.dim(1), m = std::min(fp8_chunk_rows(n), rows);
  const bool lt = lt_takes(w) && !fp8_gemm_refused_;
  return (!codes || (fp8_codes_.bytes >= static_cast<size_t>(m * k) &&
                     fp8_scales_.bytes >= static_cast<size_t>(m * num_groups(w)) * 4)) &&
         (!lt || rows <= cuda::kFp8GemvMaxRows ||
          fp8_acc_.bytes >= static_cast<size_t>(m * n) * sizeof(float));
}

void CudaBackend::linear_fp8(const Tensor& x, const LinearWeight& w, const Tensor& bias,
                             Tensor& out) {
  const int64_t k = x.ndim > 0 ? x.dim(-1) : 0;
  const int64_t rows = k > 0 ? x.numel() / k : 0;
  const int64_t n = w.ndim == 2 ? w.dim(0) : 0;
  const bool out_ok = out.dtype == x.dtype || out.dtype == DType::kF32;
  const bool bias_ok =
      bias.empty() || (bias.numel() == n && (is_half(bias.dtype) || bias.dtype == DType::kF32));
  if (!is_half(x.dtype) || !out_ok || !bias_ok || k == 0 || w.ndim != 2 || w.dim(1) != k ||
      out.numel() != rows * n) {
    return fail(fmt::format("linear: x {} w {} bias {} out {}", describe(x), describe(w),
                            bias.empty() ? std::string("none") : describe(bias), describe(out)));
  }
  if (rows == 0) return;
  if (!fp8_prepared(w, rows, true)) {
    return fail(
        fmt::format("linear: FP8 weight {} was not prepared (prepare_fp8_weight)", describe(w)));
  }
  auto* codes = static_cast<uint8_t*>(fp8_codes_.ptr);
  auto* scales = static_cast<float*>(fp8_scales_.ptr);
  const size_t x_es = dtype_size(x.dtype), out_es = dtype_size(out.dtype);
  if (rows == 1 && fp8_own_row_) {
    // Batch-1 decode: the tensor-core kernel quantises the row itself.
    cuda::Fp8LinearParams g;
    g.w = static_cast<const uint8_t*>(w.data);
    g.w_scales = w.weight_scale.ptr<float>();
    g.block = w.block;
    g.bias = bias.empty() ? nullptr : bias.data;
    g.bias_dtype = bias.dtype;
    g.out = out.data;
    g.out_dtype = out.dtype;
    g.rows = 1;
    g.n = n;
    g.k = k;
    g.x = x.data;
    g.x_dtype = x.dtype;
    g.input_scale = w.input_scale.empty() ? nullptr : w.input_scale.ptr<float>();
    if (cuda::fp8_gemv_tc_supports(g)) {
      check(cuda::launch_fp8_gemv(g, stream_), "linear (fp8 gemv, own quantisation)");
      return;
    }
  }
  const int64_t chunk = fp8_chunk_rows(n);
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t nr = std::min(chunk, rows - r0);
    cuda::Fp8QuantizeParams q;
    q.dtype = x.dtype;
    q.x = static_cast<const char*>(x.data) + static_cast<size_t>(r0 * k) * x_es;
    q.rows = nr;
    q.k = k;
    q.group = w.block;
    q.input_scale = w.input_scale.empty() ? nullptr : w.input_scale.ptr<float>();
    q.codes = codes;
    q.scales = scales;
    // Block scales for cuBLASLt: [groups, nr] (re-quantised to [nr, groups] if it refuses).
    q.scales_by_group = fp8_lt_mode(w, nr, bias, out.dtype) == cuda::Fp8Scales::kBlock128;
    if (!check(cuda::launch_fp8_quantize(q, stream_), "linear (fp8 quantize)")) return;
    char* out_rows = static_cast<char*>(out.data) + static_cast<size_t>(r0 * n) * out_es;
    if (q.scales_by_group) {
      if (fp8_lt_scaled(codes, scales, nr, w, bias, out_rows, out.dtype,
                        cuda::Fp8Scales::kBlock128))
        continue;
      q.scales_by_group = false;
      if (!check(cuda::launch_fp8_quantize(q, stream_), "linear (fp8 quantize)")) return;
    }
    if (!fp8_product(codes, scales, nr, w, bias, out_rows, out.dtype)) return;
  }
}

void CudaBackend::linear_fp8_rows(const Fp8Rows& x, const LinearWeight& w, const Tensor& bias,
                                  Tensor& out) {
  const int64_t k = x.codes.ndim == 2 ? x.codes.dim(1) : 0;
  const int64_t rows = k > 0 ? x.codes.dim(0) : 0;
  const int64_t n = w.ndim == 2 ? w.dim(0) : 0;
  const bool out_ok = is_half(out.dtype) || out.dtype == DType::kF32;
  const bool bias_ok =
      bias.empty() || (bias.numel() == n && (is_half(bias.dtype) || bias.dtype == DType::kF32));
  if (x.codes.dtype != DType::kF8E4M3 || x.scales.dtype != DType::kF32 ||
      x.scales.numel() != rows || !w.is_fp8() || w.block != 0 || !w.input_scale.empty() ||
      !out_ok || !bias_ok || k == 0 || w.ndim != 2 || w.dim(1) != k || out.numel() != rows * n) {
    return fail(fmt::format("linear_fp8_rows: codes {} scales {} w {} block {}{} bias {} out {}",
                            describe(x.codes), describe(x.scales), describe(w), w.block,
                            w.input_scale.empty() ? "" : " (static input_scale)",
                            bias.empty() ? std::string("none") : describe(bias), describe(out)));
  }
  if (rows == 0) return;
  if (!fp8_prepared(w, rows, false)) {
    return fail(fmt::format("linear_fp8_rows: FP8 weight {} was not prepared (prepare_fp8_weight)",
                            describe(w)));
  }
  const auto* codes = static_cast<const uint8_t*>(x.codes.data);
  const float* scales = x.scales.ptr<float>();
  const int64_t chunk = fp8_chunk_rows(n);
  const size_t out_es = dtype_size(out.dtype);
  for (int64_t r0 = 0; r0 < rows; r0 += chunk) {
    const int64_t nr = std::min(chunk, rows - r0);
    char* out_rows = static_cast<char*>(out.data) + static_cast<size_t>(r0 * n) * out_es;
    if (!fp8_product(codes + r0 * k, scales + r0, nr, w, bias, out_rows, out.dtype)) return;
  }
}

}  // namespace pagoda
