#include "backend/cuda/cublaslt_linear.h"

#include <fmt/format.h>

#include <bit>

namespace pagoda::cuda {
namespace {

// log2 of the largest power of two (<= 256) dividing the address.
int alignment_log2(const void* p) {
  const uintptr_t v = reinterpret_cast<uintptr_t>(p);
  if (v == 0) return 8;
  const int tz = std::countr_zero(v);
  return tz < 8 ? tz : 8;
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    case DType::kF8E4M3: return CUDA_R_8F_E4M3;
    default: return CUDA_R_32F;
  }
}

Status lt_error(cublasStatus_t s, const char* what, const LinearArgs& a) {
  return make_error(ErrorCode::kInternal,
                    fmt::format("cuBLASLt {} failed (status {}) for linear rows={} n={} k={} {}->{}",
                                what, static_cast<int>(s), a.rows, a.n, a.k,
                                dtype_name(a.in_dtype), dtype_name(a.out_dtype)));
}

}  // namespace

Result<std::unique_ptr<CublasLtLinear>> CublasLtLinear::create(size_t workspace_bytes) {
  std::unique_ptr<CublasLtLinear> lt(new CublasLtLinear());
  const cublasStatus_t s = cublasLtCreate(&lt->handle_);
  if (s != CUBLAS_STATUS_SUCCESS) {
    return make_error(ErrorCode::kInternal, fmt::format("cublasLtCreate failed (status {})",
                                                        static_cast<int>(s)));
  }
  const cudaError_t e = cudaMalloc(&lt->workspace_, workspace_bytes);
  if (e != cudaSuccess) {
    lt->workspace_ = nullptr;
    return make_error(ErrorCode::kResourceExhausted,
                      fmt::format("cuBLASLt workspace of {} bytes: {}", workspace_bytes,
                                  cudaGetErrorString(e)));
  }
  lt->workspace_bytes_ = workspace_bytes;
  return lt;
}

CublasLtLinear::~CublasLtLinear() {
  for (auto& [key, plan] : plans_) destroy(plan);
  if (workspace_ != nullptr) cudaFree(workspace_);
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

void CublasLtLinear::destroy(Plan& plan) {
  if (plan.a != nullptr) cublasLtMatrixLayoutDestroy(plan.a);
  if (plan.b != nullptr) cublasLtMatrixLayoutDestroy(plan.b);
  if (plan.d != nullptr) cublasLtMatrixLayoutDestroy(plan.d);
  if (plan.desc != nullptr) cublasLtMatmulDescDestroy(plan.desc);
  plan = Plan{};
}

int64_t CublasLtLinear::row_bucket(int64_t rows) {
  if (rows <= 8) return rows;
  const int64_t step = int64_t{1} << (std::bit_width(static_cast<uint64_t>(rows - 1)) - 3);
  return (rows + step - 1) / step * step;
}

cublasStatus_t CublasLtLinear::set_scale_pointers(cublasLtMatmulDesc_t desc, const LinearArgs& a) {
  if (a.fp8_scales == Fp8Scales::kNone) return CUBLAS_STATUS_SUCCESS;
  cublasStatus_t s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
                                                    &a.w_scales, sizeof(a.w_scales));
  if (s == CUBLAS_STATUS_SUCCESS) {
    s = cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a.x_scales,
                                       sizeof(a.x_scales));
  }
  return s;
}

// Column-major view of the row-major product: out^T [n, rows] =
// w [n, k] (stored as col-major [k, n], op T) * x^T (col-major [k, rows]).
Status CublasLtLinear::build_layouts(const LinearArgs& a, Plan& plan) {
  const cudaDataType_t in_type = cuda_type(a.in_dtype);
  const cudaDataType_t out_type = cuda_type(a.out_dtype);
  const uint64_t n = static_cast<uint64_t>(a.n), rows = static_cast<uint64_t>(a.rows);
  const uint64_t k = static_cast<uint64_t>(a.k);
  cublasStatus_t s = cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (s != CUBLAS_STATUS_SUCCESS) return lt_error(s, "MatmulDescCreate", a);
  const cublasOperation_t trans_a = CUBLAS_OP_T, trans_b = CUBLAS_OP_N;
  s = cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, &trans_a, sizeof(trans_a));
  if (s == CUBLAS_STATUS_SUCCESS) {
    s = cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, &trans_b, sizeof(trans_b));
  }
  if (s == CUBLAS_STATUS_SUCCESS && a.bias != nullptr) {
    const cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_BIAS;
    s = cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi));
    if (s == CUBLAS_STATUS_SUCCESS) {
      s = cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &a.bias,
                                         sizeof(a.bias));
    }
  }
  if (s == CUBLAS_STATUS_SUCCESS && a.bias != nullptr && a.in_dtype == DType::kF8E4M3) {
    const int32_t bias_type = out_type;
    s = cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type,
                                       sizeof(bias_type));
  }
  if (s == CUBLAS_STATUS_SUCCESS && a.fp8_scales != Fp8Scales::kNone) {
    const bool block = a.fp8_scales == Fp8Scales::kBlock128;
    const int32_t mode_w = block ? CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F
                                 : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    const int32_t mode_x = block ? CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F
                                 : CUBLASLT_MATMUL_MATRIX_SCALE_OUTER_VEC_32F;
    s = cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &mode_w,
                                       sizeof(mode_w));
    if (s == CUBLAS_STATUS_SUCCESS) {
      s = cublasLtMatmulDescSetAttribute(plan.desc, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mode_x,
                                         sizeof(mode_x));
    }
    if (s == CUBLAS_STATUS_SUCCESS) s = set_scale_pointers(plan.desc, a);
  }
  if (s != CUBLAS_STATUS_SUCCESS) return lt_error(s, "MatmulDescSetAttribute", a);
  s = cublasLtMatrixLayoutCreate(&plan.a, in_type, k, n, static_cast<int64_t>(k));
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&plan.b, in_type, k, rows, static_cast<int64_t>(k));
  const int64_t ldo = a.ldo > 0 ? a.ldo : a.n;
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatrixLayoutCreate(&plan.d, out_type, n, rows, ldo);
  if (s != CUBLAS_STATUS_SUCCESS) return lt_error(s, "MatrixLayoutCreate", a);
  return Status::Ok();
}

Status CublasLtLinear::run_heuristic(const LinearArgs& a, const Key& key, const Plan& plan,
                                     cublasLtMatmulAlgo_t* algo) {
  cublasLtMatmulPreference_t pref = nullptr;
  cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
  s = cublasLtMatmulPreferenceCreate(&pref);
  if (s != CUBLAS_STATUS_SUCCESS) return lt_error(s, "MatmulPreferenceCreate", a);
  const uint64_t ws = workspace_bytes_;
  const uint32_t align_x = 1u << std::get<6>(key), align_w = 1u << std::get<7>(key);
  const uint32_t align_out = 1u << std::get<8>(key);
  s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_w, sizeof(align_w));
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_x, sizeof(align_x));
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_out, sizeof(align_out));
  if (s == CUBLAS_STATUS_SUCCESS) s = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_out, sizeof(align_out));
  cublasLtMatmulHeuristicResult_t result{};
  int num_results = 0;
  if (s == CUBLAS_STATUS_SUCCESS) {
    s = cublasLtMatmulAlgoGetHeuristic(handle_, plan.desc, plan.a, plan.b, plan.d, plan.d, pref, 1,
                                       &result, &num_results);
  }
  cublasLtMatmulPreferenceDestroy(pref);
  if (s != CUBLAS_STATUS_SUCCESS) return lt_error(s, "MatmulAlgoGetHeuristic", a);
  if (num_results == 0) return lt_error(CUBLAS_STATUS_NOT_SUPPORTED, "MatmulAlgoGetHeuristic (no algorithm)", a);
  *algo = result.algo;
  return Status::Ok();
}

bool CublasLtLinear::algo_fits(const Plan& plan, const cublasLtMatmulAlgo_t& algo) {
  cublasLtMatmulHeuristicResult_t result{};
  const cublasStatus_t s = cublasLtMatmulAlgoCheck(handle_, plan.desc, plan.a, plan.b, plan.d,
                                                   plan.d, &algo, &result);
  return s == CUBLAS_STATUS_SUCCESS && result.state == CUBLAS_STATUS_SUCCESS &&
         result.workspaceSize <= workspace_bytes_;
}

Result<CublasLtLinear::Plan*> CublasLtLinear::find_plan(const LinearArgs& a) {
  const Key key{a.n,
                a.rows,
                a.k,
                static_cast<int>(a.in_dtype),
                static_cast<int>(a.out_dtype),
                a.bias != nullptr,
                alignment_log2(a.x),
                alignment_log2(a.w),
                alignment_log2(a.out),
                a.bias != nullptr ? alignment_log2(a.bias) : 8,
                a.ldo > 0 ? a.ldo : a.n,
                static_cast<int>(a.fp8_scales)};
  auto it = plans_.find(key);
  if (it != plans_.end()) return &it->second;
  auto no = refused_.find(key);
  if (no != refused_.end()) return make_error(ErrorCode::kUnsupported, no->second);
  Plan plan;
  Status st = build_layouts(a, plan);
  Key bucket_key = key;
  std::get<1>(bucket_key) = row_bucket(a.rows);
  if (st.ok()) {
    auto known = algos_.find(bucket_key);
    if (known != algos_.end() && algo_fits(plan, known->second)) {
      plan.algo = known->second;
    } else if (known != algos_.end()) {
      st = run_heuristic(a, key, plan, &plan.algo);  // the bucket's choice does not fit
    } else {
      // Choose for the bucket's top row count (the largest it will serve).
      LinearArgs top = a;
      top.rows = std::get<1>(bucket_key);
      Plan probe;
      st = build_layouts(top, probe);
      if (st.ok()) st = run_heuristic(top, bucket_key, probe, &plan.algo);
      destroy(probe);
      if (st.ok()) {
        algos_.emplace(bucket_key, plan.algo);
        if (!algo_fits(plan, plan.algo)) st = run_heuristic(a, key, plan, &plan.algo);
      }
    }
  }
  if (!st.ok()) {
    destroy(plan);
    refused_.emplace(key, st.error().message);
    return st.error();
  }
  return &plans_.emplace(key, plan).first->second;
}

Status CublasLtLinear::run(const LinearArgs& a, cudaStream_t stream) {
  if (a.rows == 0 || a.n == 0) return Status::Ok();
  const bool fp8 = a.in_dtype == DType::kF8E4M3;
  if ((a.fp8_scales != Fp8Scales::kNone && (!fp8 || a.w_scales == nullptr || a.x_scales == nullptr)) ||
      (fp8 && a.fp8_scales == Fp8Scales::kNone && (a.bias != nullptr || a.out_dtype != DType::kF32)))
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("cuBLASLt linear rows={} n={} k={}: FP8 scales without e4m3 "
                                  "operands or scale pointers, or an unscaled FP8 product with a "
                                  "bias or a 16-bit out",
                                  a.rows, a.n, a.k));
  PAGODA_ASSIGN_OR_RETURN(Plan * plan, find_plan(a));
  if (a.bias != nullptr) {
    const cublasStatus_t s = cublasLtMatmulDescSetAttribute(
        plan->desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &a.bias, sizeof(a.bias));
    if (s != CUBLAS_STATUS_SUCCESS) return lt_error(s, "MatmulDescSetAttribute(bias)", a);
  }
  const cublasStatus_t ss = set_scale_pointers(plan->desc, a);
  if (ss != CUBLAS_STATUS_SUCCESS) return lt_error(ss, "MatmulDescSetAttribute(scales)", a);
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t s =
      cublasLtMatmul(handle_, plan->desc, &alpha, a.w, plan->a, a.x, plan->b, &beta, a.out,
                     plan->d, a.out, plan->d, &plan->algo, workspace_, workspace_bytes_, stream);
  if (s != CUBLAS_STATUS_SUCCESS) return lt_error(s, "Matmul", a);
  return Status::Ok();
}

}  // namespace pagoda::cuda
