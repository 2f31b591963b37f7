// PyTorch zip checkpoints (torch.save since 1.6, e.g. pytorch_model.bin): a
// zip archive of stored entries
//   <prefix>/data.pkl        the pickled state dict (io/torch_pickle.h)
//   <prefix>/data/<key>      each storage's raw bytes, little-endian
//   <prefix>/byteorder       optional: "little" (a "big" one is refused)
//   <prefix>/version, ...    ignored
// read without Python and without executing the pickle; and a WeightSource
// over one such file or the shards of pytorch_model.bin.index.json,
// returning views into the memory maps as the safetensors source does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"
#include "io/weight_source.h"

namespace pagoda {

struct TorchCheckpointTensor {
  std::string name;
  DType dtype = DType::kF32;  // f32, f16, bf16, i32, i64, u8 (bool), i8
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // absolute byte offsets of the (contiguous) data in the file: [begin, end)
  uint64_t end = 0;
};

// Validates and lists the tensors of the checkpoint in data[0..size), in the
// state dict's order: the zip (io/zip_archive.h), exactly one
// <prefix>/data.pkl, every entry read stored (a compressed one is refused
// naming it), each tensor contiguous (row-major strides; any stride on a
// dimension of size 1), its elements inside its storage and its storage
// entry numel × element size bytes. Errors name `name` and the offending
// entry, tensor, opcode or global.
Result<std::vector<TorchCheckpointTensor>> parse_torch_checkpoint(const uint8_t* data, size_t size,
                                                                  const std::string& name);

// WeightSource over the files (tensor names unique across them).
Result<std::unique_ptr<WeightSource>> open_torch_checkpoint_files(
    const std::vector<std::string>& paths);

// WeightSource over `folder`/pytorch_model.bin, or the shards listed in
// `folder`/pytorch_model.bin.index.json (the index wins when both exist).
Result<std::unique_ptr<WeightSource>> open_torch_checkpoint_folder(const std::string& folder);

}  // namespace pagoda
