// The tensor table of a PyTorch zip checkpoint's data.pkl, read by a small
// pickle interpreter that executes nothing: it knows the opcodes torch.save
// writes for a state dict (protocols 2..5: PROTO, FRAME, MARK, EMPTY_DICT,
// EMPTY_TUPLE, TUPLE*, BININT*, LONG1, BINUNICODE, SHORT_BINUNICODE, NONE,
// NEWTRUE / NEWFALSE, GLOBAL / STACK_GLOBAL, BINPERSID, REDUCE, SETITEM(S),
// BUILD, the memo opcodes and STOP) and the globals
//   collections.OrderedDict, called with () only;
//   torch._utils._rebuild_tensor_v2, (storage, offset, size, stride,
//     requires_grad, hooks[, metadata]);
//   torch._utils._rebuild_parameter, (tensor, requires_grad, hooks);
//   torch.{Float,Half,BFloat16,Int,Long,Bool,Byte,Char}Storage, as
//     persistent-id storage types.
// Any other opcode or global is refused naming it, and so is a tensor whose
// _rebuild_tensor_v2 metadata (its 7th argument) is not empty. Bounded: one
// pass over the bytes, tuples nested at most 16 deep, at most 2^20 values.
// The pickle must produce a dict of str -> tensor (a state dict). BUILD sets
// attributes Python-side; here it is accepted only with an empty state, or a
// dict state on a dict (state_dict()'s `_metadata` attribute), and ignored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/result.h"

namespace pagoda {

// One tensor of the state dict: a view of a storage (the archive entry
// <prefix>/data/<storage_key>, storage_numel elements of `dtype`).
struct TorchTensorRecord {
  std::string name;            // the state-dict key
  std::string storage_type;    // as pickled, e.g. "FloatStorage"
  DType dtype = DType::kF32;   // the storage's element type (BoolStorage: kU8)
  std::string storage_key;     // the storage's entry under <prefix>/data/
  int64_t storage_numel = 0;   // elements in the storage
  int64_t storage_offset = 0;  // in elements
  std::vector<int64_t> shape;
  std::vector<int64_t> stride;  // in elements
};

// Interprets the pickle in data[0..size); tensors in the dict's order.
// Errors: kUnsupported naming a refused opcode (and its byte offset) or
// global; kCorrupt for a truncated or ill-typed pickle. `name` is used in
// error messages.
Result<std::vector<TorchTensorRecord>> parse_torch_pickle(const uint8_t* data, size_t size,
                                                          const std::string& name);

}  // namespace pagoda
