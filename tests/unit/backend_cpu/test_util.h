// Helpers for the CPU backend tests: seeded random data and tensor views of
// host vectors (CPU backend memory is host memory).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <random>
#include <vector>

#include "core/tensor.h"

namespace pagoda::test {

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  float uniform(float lo = -1.0f, float hi = 1.0f) {
    return std::uniform_real_distribution<float>(lo, hi)(gen_);
  }
  int randint(int lo, int hi) {
    return std::uniform_int_distribution<int>(lo, hi)(gen_);
  }  // [lo, hi]
  template <typename T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(randint(0, static_cast<int>(v.size()) - 1))];
  }
  std::vector<float> floats(size_t n, float lo = -1.0f, float hi = 1.0f) {
    std::vector<float> v(n);
    for (float& x : v) x = uniform(lo, hi);
    return v;
  }
  std::mt19937_64& engine() { return gen_; }

 private:
  std::mt19937_64 gen_;
};

inline Tensor f32(std::vector<float>& v, std::initializer_list<int64_t> dims) {
  return Tensor(v.data(), DType::kF32, dims);
}
inline Tensor i32(std::vector<int32_t>& v, std::initializer_list<int64_t> dims) {
  return Tensor(v.data(), DType::kI32, dims);
}

inline std::vector<float> nan_filled(size_t n) {
  return std::vector<float>(n, std::numeric_limits<float>::quiet_NaN());
}

}  // namespace pagoda::test
