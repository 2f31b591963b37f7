// x86-64-v3 kernels (AVX2 + FMA); this file is compiled with -mavx2 -mfma
// and only called after a run-time CPU check.
#define PAGODA_KERNEL_NS avx2
#define PAGODA_KERNEL_ISA "avx2+fma"
#include "cpu_kernels.inc"
