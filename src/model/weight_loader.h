// Reads tensors by Hugging Face name from a WeightSource, checks their
// shapes, converts them on the host to the backend's compute dtype and
// uploads them into buffers owned by a ModelWeights.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "core/progress.h"
#include "core/result.h"
#include "io/weight_source.h"
#include "model/weights.h"

namespace pagoda {

class WeightLoader {
 public:
  // Uploaded tensors are owned by `weights->buffers`. Shows a progress bar
  // over the source's bytes.
  WeightLoader(Backend& backend, WeightSource& source, ModelWeights* weights);

  bool has(std::string_view name) const { return source_.find(name) != nullptr; }

  // One tensor that must have exactly `shape`. Errors: "tensor X not found
  // in <source>", "tensor X: expected [a, b], found [c, d]".
  Result<Tensor> load(const std::string& name, const std::vector<int64_t>& shape);

  // Tensors concatenated along dim 0 into one device tensor (fused QKV,
  // gate_up): part i must have `rows[i]` rows and the trailing dims `cols`
  // (empty for 1-D parts).
  Result<Tensor> load_fused(const std::vector<std::string>& names, const std::vector<int64_t>& rows,
                            const std::vector<int64_t>& cols);

  int64_t num_tensors_read() const { return num_read_; }
  uint64_t num_bytes_read() const { return bytes_read_; }  // file bytes
  void finish() { progress_.finish(); }

 private:
  // Reads `name`, checks it against `shape`, and copies it converted into
  // device memory at dst.
  Status read_into(const std::string& name, const std::vector<int64_t>& shape, void* dst);
  // Device memory for a tensor of `shape` in the compute dtype.
  Result<Tensor> allocate(const std::string& name, const std::vector<int64_t>& shape);

  Backend& backend_;
  WeightSource& source_;
  ModelWeights* weights_;
  uint64_t total_bytes_;  // file bytes of every tensor of the source
  Progress progress_;
  std::vector<uint8_t> staging_;  // host conversion buffer
  int64_t num_read_ = 0;
  uint64_t bytes_read_ = 0;
};

}  // namespace pagoda
