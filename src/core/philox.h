// Counter-based random numbers (Philox-4x32-10), usable on host and device.
// Sampling draws noise as a pure function of (seed, step, token index), so a
// seeded request samples the same tokens whatever else is in the batch, and
// the CPU and CUDA backends draw identical numbers.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define PAGODA_HD __host__ __device__ __forceinline__
#else
#define PAGODA_HD inline
#endif

namespace pagoda {

struct Philox4 {
  uint32_t v[4];
};

PAGODA_HD void philox_mulhilo(uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
  uint64_t p = static_cast<uint64_t>(a) * b;
  hi = static_cast<uint32_t>(p >> 32);
  lo = static_cast<uint32_t>(p);
}

// Philox-4x32 with 10 rounds on counter c and 64-bit key k.
PAGODA_HD Philox4 philox4x32(Philox4 c, uint64_t key) {
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(0xD2511F53u, c.v[0], hi0, lo0);
    philox_mulhilo(0xCD9E8D57u, c.v[2], hi1, lo1);
    Philox4 n{{hi1 ^ c.v[1] ^ k0, lo1, hi0 ^ c.v[3] ^ k1, lo0}};
    c = n;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return c;
}

// A uniform float strictly inside (0, 1) from (seed, step, index): 23
// random bits, (x + 0.5) / 2^23, exact in f32, so -log(u) is never 0 or inf.
PAGODA_HD float philox_uniform(uint64_t seed, uint64_t step, uint64_t index) {
  Philox4 c{{static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
             static_cast<uint32_t>(step), static_cast<uint32_t>(step >> 32)}};
  Philox4 r = philox4x32(c, seed);
  return (static_cast<float>(r.v[0] >> 9) + 0.5f) * (1.0f / 8388608.0f);
}

}  // namespace pagoda
