// Loads of bytes a kernel reads once (weights streamed by decode products):
// through the non-coherent path and not allocated in L1, so they do not
// evict what is reused (x rows, shared tables).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace pagoda::cuda {

// 16 bytes at p (16-byte aligned).
__device__ __forceinline__ uint4 load_stream(const void* p) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p));
  return v;
}

// 4 bytes at p (4-byte aligned).
__device__ __forceinline__ uint32_t load_stream_u32(const uint32_t* p) {
  uint32_t v;
  asm("ld.global.nc.L1::no_allocate.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

}  // namespace pagoda::cuda
