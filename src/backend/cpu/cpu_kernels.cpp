#include "backend/cpu/cpu_kernels.h"

#include <cstdlib>
#include <cstring>

namespace pagoda::cpu {

namespace generic {
const CpuKernels* table();
}
#if defined(PAGODA_CPU_AVX2)
namespace avx2 {
const CpuKernels* table();
}
#endif

const CpuKernels* generic_kernels() {
  return generic::table();
}

const CpuKernels* avx2_kernels() {
#if defined(PAGODA_CPU_AVX2)
  return avx2::table();
#else
  return nullptr;
#endif
}

const CpuKernels& kernels() {
  static const CpuKernels* chosen = [] {
    const char* force = std::getenv("PAGODA_CPU_ISA");
    bool want_generic = force != nullptr && std::strcmp(force, "generic") == 0;
#if defined(PAGODA_CPU_AVX2)
    if (!want_generic && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
      return avx2_kernels();
#endif
    (void)want_generic;
    return generic_kernels();
  }();
  return *chosen;
}

}  // namespace pagoda::cpu
