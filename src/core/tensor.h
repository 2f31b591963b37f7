// Tensor: a non-owning view of memory on some device, row-major and
// contiguous in every dimension. Math lives in backends, not here. A block
// dtype (core/dtype.h) has its logical shape [N, K] in elements; its bytes
// are dtype_nbytes() plus, for a _perm group format, the permutation of K.
#pragma once

#include <array>
#include <cassert>
#include <cstdint>
#include <initializer_list>

#include "core/dtype.h"

namespace pagoda {

constexpr int kMaxTensorDims = 4;

struct Tensor {
  void* data = nullptr;
  DType dtype = DType::kF32;
  int ndim = 0;
  std::array<int64_t, kMaxTensorDims> shape{};

  Tensor() = default;
  Tensor(void* d, DType t, std::initializer_list<int64_t> dims) : data(d), dtype(t) {
    assert(dims.size() <= kMaxTensorDims);
    for (int64_t x : dims) shape[ndim++] = x;
  }

  int64_t dim(int i) const { return shape[i < 0 ? ndim + i : i]; }
  int64_t numel() const {
    int64_t n = 1;
    for (int i = 0; i < ndim; ++i) n *= shape[i];
    return n;
  }
  size_t nbytes() const {
    return dtype_nbytes(dtype, numel()) + (ndim > 0 ? dtype_k_perm_bytes(dtype, dim(-1)) : 0);
  }
  // The K permutation of a _perm group-format weight [N, K] (dtype.h): K
  // int32 after the rows; nullptr for other dtypes.
  const int32_t* k_perm() const {
    if (!has_k_perm(dtype)) return nullptr;
    return reinterpret_cast<const int32_t*>(static_cast<const char*>(data) +
                                            dtype_nbytes(dtype, numel()));
  }
  bool empty() const { return data == nullptr; }

  template <typename T>
  T* ptr() const { return static_cast<T*>(data); }

  // Same memory, another shape with the same number of elements.
  Tensor reshape(std::initializer_list<int64_t> dims) const {
    Tensor t(data, dtype, dims);
    assert(t.numel() == numel());
    return t;
  }
};

}  // namespace pagoda
