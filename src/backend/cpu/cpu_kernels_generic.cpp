// Portable kernels: the baseline instruction set of the target (SSE2 on
// x86-64), no fused multiply-add.
#define PAGODA_KERNEL_NS generic
#define PAGODA_KERNEL_ISA "generic"
#include "cpu_kernels.inc"
