// A model's tensors by Hugging Face name, whatever the file format.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"

namespace pagoda {

struct TensorInfo {
  std::string name;             // Hugging Face name, e.g. "model.layers.0.self_attn.q_proj.weight"
  DType dtype = DType::kF32;    // dtype that read() returns (f32, f16, bf16 or i32)
  std::vector<int64_t> shape;   // PyTorch order: [out_features, in_features] for linear weights
  uint64_t file_bytes = 0;      // bytes in the file (quantized size for GGUF), for progress
  // A block dtype (core/dtype.h) when read_blocks() returns this tensor as
  // the file's quantization blocks (GGUF Q4_0..Q6_K, 2-D, rows of whole
  // blocks); nullopt when only read() does.
  std::optional<DType> blocks;
};

// Host data of one tensor: `data` points into a memory map or into `owned`.
struct HostTensor {
  DType dtype = DType::kF32;  // a float dtype, or a block dtype from read_blocks()
  std::vector<int64_t> shape;
  const void* data = nullptr;
  std::vector<uint8_t> owned;
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

class WeightSource {
 public:
  virtual ~WeightSource() = default;
  virtual const std::vector<TensorInfo>& tensors() const = 0;
  // nullptr when absent.
  virtual const TensorInfo* find(std::string_view name) const = 0;
  // The tensor's data in TensorInfo::dtype (GGUF: dequantized, q/k rows
  // un-permuted to the HF layout). Errors name the tensor and the file.
  // Safe to call from several threads at once (tensor-parallel ranks load
  // concurrently from one source): the sources only read their memory maps
  // and return views or fresh copies.
  virtual Result<HostTensor> read(std::string_view name) = 0;
  // The tensor's blocks, byte for byte as in the file, for a tensor whose
  // TensorInfo::blocks is set: dtype = *blocks, shape = TensorInfo::shape
  // (logical elements), rows transformed as read() does (GGUF q/k rows
  // un-permuted; rows are whole blocks, so that moves bytes). Same thread
  // safety as read(). Default: Error kUnsupported naming the tensor.
  virtual Result<HostTensor> read_blocks(std::string_view name);
  // Human-readable description for logs, e.g. "3 safetensors shards, 16.06 GB".
  virtual std::string describe() const = 0;
};

inline Result<HostTensor> WeightSource::read_blocks(std::string_view name) {
  return make_error(ErrorCode::kUnsupported, "tensor " + std::string(name) + " in " + describe() +
                                                 " is not stored in quantization blocks");
}

// What both formats share: the tensors in file order and a name index.
// Sources add each tensor once, then answer tensors() and find() from here.
class IndexedWeightSource : public WeightSource {
 public:
  const std::vector<TensorInfo>& tensors() const override { return infos_; }
  const TensorInfo* find(std::string_view name) const override {
    const std::optional<size_t> at = position(name);
    return at ? &infos_[*at] : nullptr;
  }

 protected:
  // Appends `info`; false (nothing added) when its name is taken.
  bool add_tensor(TensorInfo info) {
    if (!index_.emplace(info.name, infos_.size()).second) return false;
    infos_.push_back(std::move(info));
    return true;
  }
  // Index of `name` in tensors(), or nullopt.
  std::optional<size_t> position(std::string_view name) const {
    auto it = index_.find(name);
    return it == index_.end() ? std::nullopt : std::optional<size_t>(it->second);
  }

 private:
  std::vector<TensorInfo> infos_;
  std::map<std::string, size_t, std::less<>> index_;
};

}  // namespace pagoda
