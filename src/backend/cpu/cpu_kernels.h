// Vectorised f32 inner loops of the CPU backend, compiled once per
// instruction-set level (generic x86-64 / other; x86-64-v3 with AVX2+FMA) and
// chosen at run time for the executing CPU, so one binary runs everywhere.
//
// Summation order contract (batch invariance): every dot product, whether
// computed by gemm() for any tile shape or by dot(), accumulates k in 8 lanes
// (lane = k % 8 over the first K - K % 8 elements), reduces the lanes with one
// fixed tree, then adds the K % 8 tail elements in order. A row's result
// therefore never depends on how many other rows share the batch.
#pragma once

#include <cstdint>

namespace pagoda::cpu {

struct CpuKernels {
  const char* isa = "";  // "avx2+fma" or "generic"
  // out[t * ldo + n] = dot(x[t, :], w[n, :]) (+ bias[n] when bias != nullptr)
  // for t < num_rows, n < num_cols. x [num_rows, k], w [num_cols, k], rows
  // contiguous. Single-threaded; callers split the work.
  void (*gemm)(const float* x, int64_t num_rows, const float* w, int64_t num_cols, int64_t k,
               const float* bias, float* out, int64_t ldo) = nullptr;
  // sum_i a[i] * b[i], same order as gemm.
  float (*dot)(const float* a, const float* b, int64_t n) = nullptr;
  // y[i] += alpha * x[i].
  void (*axpy)(float alpha, const float* x, float* y, int64_t n) = nullptr;
  // sum_i x[i] * x[i].
  float (*sum_squares)(const float* x, int64_t n) = nullptr;
};

// The kernels for this CPU (chosen once). PAGODA_CPU_ISA=generic forces the
// portable ones.
const CpuKernels& kernels();

// Per-level tables; avx2_kernels() is null where it was not compiled.
const CpuKernels* generic_kernels();
const CpuKernels* avx2_kernels();

}  // namespace pagoda::cpu
