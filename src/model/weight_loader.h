// Reads tensors by Hugging Face name from a WeightSource, checks their
// shapes, converts them on the host to the backend's compute dtype and
// uploads them into buffers owned by a ModelWeights. Under tensor
// parallelism (tensor_parallel.h) the blocks load only the rank's slice of a
// tensor: shapes are still checked against the file's full shapes, and only
// the slice is converted and uploaded (the source still reads, or for GGUF
// dequantizes, the whole tensor).
//
// Linear weights (load_linear*) that the source stores in quantization blocks
// (TensorInfo::blocks: GGUF Q4_0..Q6_K) are uploaded as those blocks, a block
// dtype tensor (core/dtype.h), when the loader keeps blocks: rows (whole
// blocks) are selected, concatenated and un-permuted as bytes. They are
// dequantized to the compute dtype instead when the loader does not keep
// blocks, when fused parts differ in format (Q4_K_M's Q4_K q/k with a Q6_K
// v), or when a row-parallel column slice does not fall on block boundaries
// or would split an act-order (GPTQ desc_act) permutation of K. AWQ / GPTQ
// modules come as blocks the same way (io/int_quant_source.h).
//
// FP8 (weight_loader_fp8.cpp; the arithmetic: backend/linear_weight.h). A
// linear weight stored as F8_E4M3 loads as an FP8 LinearWeight with its
// scales, as the QuantizationConfig describes them: `<module>.weight_scale`
// (per tensor or per channel: every row gets its part's scale, so fused
// q/k/v or gate/up parts keep their own scales, exact; vLLM instead
// requantises the parts to their largest scale), `<module>.weight_scale_inv`
// (blocks; every fused part and column slice must start on a block), and with
// static activations `<module>.input_scale` (fused parts: the largest, as
// vLLM). Missing or mis-shaped scales, or F8 weights without a quantization
// config, are errors naming the tensor. With the online scheme
// (--quantization fp8) the compute-dtype linear weights of the layers
// (load_fused_linear, load_linear_columns; not the lm_head) are quantised
// here, per output row of the rank's slice: scale = fp8_token_scale(row amax),
// codes = e4m3(w / scale) (core/fp8_quant.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "backend/backend.h"
#include "core/progress.h"
#include "core/result.h"
#include "io/weight_source.h"
#include "model/pipeline_parallel.h"
#include "model/tensor_parallel.h"
#include "model/weights.h"

namespace pagoda {

class WeightLoader {
 public:
  // Uploaded tensors are owned by `weights->buffers`. Shows a progress bar
  // over the source's bytes, only on tensor-parallel rank 0 of pipeline
  // stage 0 (a later stage reads other tensors at the same time). `shard` is
  // the tensor-parallel rank and `stage` the pipeline stage the blocks load
  // for (they ask shard() and stage()).
  // `keep_blocks`: upload block-format linear weights as their blocks (see
  // above); false dequantizes every tensor (--gguf-dequantize).
  // `quant`: how the checkpoint's linear weights are quantised (FP8 above).
  WeightLoader(Backend& backend, WeightSource& source, ModelWeights* weights, TpShard shard = {},
               PpStage stage = {}, bool keep_blocks = true, QuantizationConfig quant = {});

  const TpShard& shard() const { return shard_; }
  const PpStage& stage() const { return stage_; }

  bool has(std::string_view name) const { return source_.find(name) != nullptr; }

  // One tensor that must have exactly `shape`. Errors: "tensor X not found
  // in <source>", "tensor X: expected [a, b], found [c, d]".
  Result<Tensor> load(const std::string& name, const std::vector<int64_t>& shape);
  // load() with `offset` added to every element in f32 before the conversion
  // to the compute dtype (Gemma's RMSNorm weights: 1 + w).
  Result<Tensor> load_offset(const std::string& name, const std::vector<int64_t>& shape,
                             float offset);

  // Tensors concatenated along dim 0 into one device tensor (fused QKV,
  // gate_up): part i must have `rows[i]` rows and the trailing dims `cols`
  // (empty for 1-D parts). With `take` (one range per part), only rows
  // take[i] of part i go into the result, [sum of take[i].size(), cols...];
  // the parts' shapes are still checked in full. A name may repeat with its
  // own range: row ranges of one pre-fused tensor (Phi-3's qkv_proj);
  // consecutive parts of one name are read from the source once. Errors name
  // the tensor.
  Result<Tensor> load_fused(const std::vector<std::string>& names, const std::vector<int64_t>& rows,
                            const std::vector<int64_t>& cols,
                            const std::vector<IndexRange>& take = {});

  // Columns `cols` of a 2-D tensor that must have exactly `shape`:
  // [shape[0], cols.size()] (a row-parallel linear's slice).
  Result<Tensor> load_columns(const std::string& name, const std::vector<int64_t>& shape,
                              IndexRange cols);

  // The same for linear weights [N, K] (rows = output features), kept in
  // their blocks where possible (see above): load_linear (lm_head),
  // load_fused_linear (qkv, gate_up: every part's rows, cols = {K}),
  // load_linear_columns (o_proj, down: a slice of K).
  Result<LinearWeight> load_linear(const std::string& name, const std::vector<int64_t>& shape);
  Result<LinearWeight> load_fused_linear(const std::vector<std::string>& names,
                                         const std::vector<int64_t>& rows, int64_t cols,
                                         const std::vector<IndexRange>& take = {});
  Result<LinearWeight> load_linear_columns(const std::string& name,
                                           const std::vector<int64_t>& shape, IndexRange cols);
  // Rows `rows` of a linear weight of exactly `shape` [N, K], followed by
  // zero rows up to `padded_rows` (>= rows.size()): [padded_rows, K], kept
  // in blocks where possible (zero bytes are zero in every block format).
  // The vocab-parallel lm_head's block (tensor_parallel.h).
  Result<Tensor> load_linear_rows(const std::string& name, const std::vector<int64_t>& shape,
                                  IndexRange rows, int64_t padded_rows);
  // The same always in the compute dtype (block formats dequantized): the
  // vocab-parallel embedding's block, whose lookup copies rows.
  Result<Tensor> load_rows(const std::string& name, const std::vector<int64_t>& shape,
                           IndexRange rows, int64_t padded_rows);

  // Columns `cols` of 2-D tensors [rows[i], k] concatenated along dim 0,
  // in the compute dtype (no FP8 or block formats): [sum rows, cols.size()]
  // (an EAGLE-3 head's q/k/v over one half of its 2H-wide input).
  Result<LinearWeight> load_fused_linear_columns(const std::vector<std::string>& names,
                                                 const std::vector<int64_t>& rows, int64_t k,
                                                 IndexRange cols);
  // The file's shape of `name`; empty when it has none.
  std::vector<int64_t> shape_of(std::string_view name) const {
    const TensorInfo* t = source_.find(name);
    return t == nullptr ? std::vector<int64_t>{} : t->shape;
  }

  int64_t num_tensors_read() const { return num_read_; }
  uint64_t num_bytes_read() const { return bytes_read_; }  // file bytes
  void finish() { progress_.finish(); }

  // True when `name` ([N, k]) would be uploaded in its block format by
  // load_linear (a kept GGUF / AWQ / GPTQ block dtype; not with
  // --gguf-dequantize).
  bool keeps_blocks(const std::string& name, int64_t k) const {
    return kept_blocks({name}, {0, k}, k).has_value();
  }

 private:
  // Reads `name`, checks it against `shape`, and copies rows `rows` (of
  // dim 0) and, for a 2-D tensor, columns `cols`, converted and contiguous,
  // into device memory at dst (a 1-D tensor is [n] rows of one column),
  // each element plus `offset` (in f32) when offset is not 0.
  Status read_into(const std::string& name, const std::vector<int64_t>& shape, IndexRange rows,
                   IndexRange cols, void* dst, float offset = 0.0f);
  // Reads `name`'s blocks (source read_blocks), checks it against `shape`
  // [N, K], and copies rows `rows` and columns `cols` (whole blocks) to dst.
  // A _perm group format's permutation of K (cols must be all of K) goes to
  // *perm when empty, else must equal it (every fused part shares one).
  Status read_blocks_into(const std::string& name, const std::vector<int64_t>& shape,
                          IndexRange rows, IndexRange cols, void* dst, std::vector<uint8_t>* perm);
  // load_linear_rows / load_rows: in blocks when `blocks` and kept_blocks allow.
  Result<Tensor> load_row_block(const std::string& name, const std::vector<int64_t>& shape,
                                IndexRange rows, int64_t padded_rows, bool blocks);
  // Copies a _perm weight's permutation (bytes; none when empty) after its rows.
  void upload_k_perm(const Tensor& t, const std::vector<uint8_t>& perm);
  // The block dtype every part of a linear weight keeps when uploaded as
  // blocks with columns `cols` of K; nullopt (logged when blocks are kept
  // but not possible here) to dequantize it.
  std::optional<DType> kept_blocks(const std::vector<std::string>& names, IndexRange cols,
                                   int64_t k) const;
  // load_fused_linear; `online`: quantise compute-dtype weights to FP8 (the
  // online scheme's layer linears; false for the lm_head).
  Result<LinearWeight> load_fused_linear(const std::vector<std::string>& names,
                                         const std::vector<int64_t>& rows, int64_t cols,
                                         const std::vector<IndexRange>& take, bool online);
  // FP8 (weight_loader_fp8.cpp). Whether the linear weight of `names` is
  // stored as F8_E4M3 (every part, else an error naming the odd one).
  Result<bool> stored_fp8(const std::vector<std::string>& names) const;
  // Rows kept[i] of part i ([rows[i], k]) and columns `cols` of every part,
  // stacked: from F8_E4M3 tensors and their scales (load_fp8), or quantised
  // from the compute dtype (quantize_fp8, the online scheme).
  Result<LinearWeight> load_fp8(const std::vector<std::string>& names,
                                const std::vector<int64_t>& rows, int64_t k,
                                const std::vector<IndexRange>& kept, IndexRange cols);
  Result<LinearWeight> quantize_fp8(const std::vector<std::string>& names,
                                    const std::vector<int64_t>& rows, int64_t k,
                                    const std::vector<IndexRange>& kept, IndexRange cols);
  // A scale tensor of `module` read as f32, checked to hold `numel` finite,
  // non-negative values and to have one of `shapes`.
  Result<std::vector<float>> read_scales(const std::string& name,
                                         const std::vector<std::vector<int64_t>>& shapes);
  // Copies `values` into a new device tensor of `shape` (f32 or kF8E4M3).
  Result<Tensor> upload(const std::string& name, const std::vector<int64_t>& shape, DType dtype,
                        const void* values);
  // Counts one uploaded tensor and reports progress.
  void count_read(const TensorInfo& info);
  // Device memory for a tensor of `shape` in `dtype` (the compute dtype
  // unless given).
  Result<Tensor> allocate(const std::string& name, const std::vector<int64_t>& shape,
                          std::optional<DType> dtype = std::nullopt);
  // read_into's halves: `name` read from the source after checking it
  // against `shape` (counted and shown in the progress bar) ...
  Result<HostTensor> fetch(const std::string& name, const std::vector<int64_t>& shape);
  // ... and its rows / columns converted into dst.
  Status copy_rows(const std::string& name, const HostTensor& host, IndexRange rows,
                   IndexRange cols, void* dst, float offset = 0.0f);

  Backend& backend_;
  WeightSource& source_;
  ModelWeights* weights_;
  TpShard shard_;
  PpStage stage_;
  bool keep_blocks_;
  QuantizationConfig quant_;
  uint64_t total_bytes_;  // file bytes of every tensor of the source
  Progress progress_;
  std::vector<uint8_t> staging_;  // host conversion buffer
  int64_t num_read_ = 0;
  uint64_t bytes_read_ = 0;
};

}  // namespace pagoda
