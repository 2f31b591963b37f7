#include "model/weight_loader.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "core/float_elements.h"
#include "core/log.h"
#include "core/units.h"

namespace pagoda {
namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

uint64_t total_file_bytes(const WeightSource& source) {
  uint64_t n = 0;
  for (const TensorInfo& t : source.tensors()) n += t.file_bytes;
  return n;
}

// n elements of `from` at src to `to` at dst; both float types.
void convert(DType from, const void* src, int64_t n, DType to, void* dst) {
  for (int64_t i = 0; i < n; ++i) store_float_element(to, dst, i, load_float_element(from, src, i));
}

// convert() with `offset` added to each element in f32.
void convert_offset(DType from, const void* src, int64_t n, DType to, void* dst, float offset) {
  for (int64_t i = 0; i < n; ++i)
    store_float_element(to, dst, i, load_float_element(from, src, i) + offset);
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Rows (dim 0) of `shape`, and the elements of one row.
int64_t num_rows(const std::vector<int64_t>& shape) {
  return shape.empty() ? 1 : shape[0];
}
int64_t row_elems(const std::vector<int64_t>& shape) {
  return shape.empty() ? 1 : numel(shape) / std::max<int64_t>(shape[0], 1);
}

// A weight without scales as a LinearWeight.
Result<LinearWeight> as_linear(Result<Tensor> t) {
  if (!t.ok()) return t.error();
  return LinearWeight(t.value());
}

bool within(IndexRange r, int64_t n) {
  return 0 <= r.begin && r.begin <= r.end && r.end <= n;
}

}  // namespace

WeightLoader::WeightLoader(Backend& backend, WeightSource& source, ModelWeights* weights,
                           TpShard shard, PpStage stage, bool keep_blocks, QuantizationConfig quant)
    : backend_(backend),
      source_(source),
      weights_(weights),
      shard_(shard),
      stage_(stage),
      keep_blocks_(keep_blocks),
      quant_(std::move(quant)),
      total_bytes_(total_file_bytes(source)),
      progress_("loading weights", total_bytes_, shard.rank == 0 && stage.first()) {}

Result<Tensor> WeightLoader::allocate(const std::string& name, const std::vector<int64_t>& shape,
                                      std::optional<DType> dtype) {
  const DType cd = dtype.value_or(backend_.compute_dtype());
  const size_t bytes =
      dtype_nbytes(cd, numel(shape)) + (shape.empty() ? 0 : dtype_k_perm_bytes(cd, shape.back()));
  try {
    weights_->buffers.emplace_back(&backend_, bytes);
  } catch (const std::bad_alloc&) {
    return make_error(
        ErrorCode::kResourceExhausted,
        "out of device memory allocating " + std::to_string(bytes) + " bytes for " + name);
  }
  weights_->num_bytes += bytes;
  ModelWeights::FormatBytes& f = weights_->bytes_by_dtype[cd];
  ++f.num_tensors;
  f.num_bytes += bytes;
  Tensor t;
  t.data = weights_->buffers.back().data();
  t.dtype = cd;
  t.ndim = static_cast<int>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) t.shape[i] = shape[i];
  return t;
}

Result<HostTensor> WeightLoader::fetch(const std::string& name, const std::vector<int64_t>& shape) {
  const TensorInfo* info = source_.find(name);
  if (info == nullptr)
    return make_error(ErrorCode::kNotFound,
                      "tensor " + name + " not found in " + source_.describe());
  if (info->shape != shape)
    return make_error(ErrorCode::kInvalidArgument, "tensor " + name + ": expected " +
                                                       shape_string(shape) + ", found " +
                                                       shape_string(info->shape));
  if (info->dtype == DType::kF8E4M3)
    return make_error(ErrorCode::kInvalidArgument,
                      "tensor " + name +
                          " is stored as F8_E4M3; pagoda loads FP8 only for the linear weights of "
                          "attention (q/k/v, o) and dense MLPs (gate/up, down) and the lm_head");
  PAGODA_ASSIGN_OR_RETURN(HostTensor host, source_.read(name));
  if (host.shape != shape || !is_float_dtype(host.dtype))
    return make_error(ErrorCode::kInvalidArgument, "tensor " + name + ": read " +
                                                       shape_string(host.shape) + " " +
                                                       std::string(dtype_name(host.dtype)) +
                                                       ", expected " + shape_string(shape));
  count_read(*info);
  return host;
}

Status WeightLoader::copy_rows(const std::string& name, const HostTensor& host, IndexRange rows,
                               IndexRange cols, void* dst, float offset) {
  const std::vector<int64_t>& shape = host.shape;
  const int64_t width = row_elems(shape);
  if (!within(rows, num_rows(shape)) || !within(cols, width) ||
      (cols.size() != width && shape.size() != 2))
    return make_error(ErrorCode::kInternal,
                      fmt::format("tensor {} {}: no slice rows [{}, {}) columns [{}, {})", name,
                                  shape_string(shape), rows.begin, rows.end, cols.begin, cols.end));
  const DType cd = backend_.compute_dtype();
  const size_t es = dtype_size(cd), hs = dtype_size(host.dtype);
  const size_t bytes = static_cast<size_t>(rows.size() * cols.size()) * es;
  const auto* src = static_cast<const uint8_t*>(host.data);
  if (offset != 0.0f) {
    if (cols.size() != width)
      return make_error(ErrorCode::kInternal, "tensor " + name + ": offset on a column slice");
    staging_.resize(bytes);
    convert_offset(host.dtype, src + static_cast<size_t>(rows.begin * width) * hs,
                   rows.size() * width, cd, staging_.data(), offset);
    backend_.copy_to_device(dst, staging_.data(), bytes);
  } else if (cols.size() == width) {  // whole rows: one contiguous run
    src += static_cast<size_t>(rows.begin * width) * hs;
    if (host.dtype == cd) {
      backend_.copy_to_device(dst, src, bytes);
    } else {
      staging_.resize(bytes);
      convert(host.dtype, src, rows.size() * width, cd, staging_.data());
      backend_.copy_to_device(dst, staging_.data(), bytes);
    }
  } else {  // a column slice: each row's run, gathered
    staging_.resize(bytes);
    for (int64_t r = rows.begin; r < rows.end; ++r)
      convert(host.dtype, src + static_cast<size_t>(r * width + cols.begin) * hs, cols.size(), cd,
              staging_.data() + static_cast<size_t>((r - rows.begin) * cols.size()) * es);
    backend_.copy_to_device(dst, staging_.data(), bytes);
  }
  backend_.synchronize();  // the source (host or staging_) must outlive the copy
  return {};
}

void WeightLoader::count_read(const TensorInfo& info) {
  ++num_read_;
  bytes_read_ += info.file_bytes;
  progress_.update(bytes_read_, fmt::format("{:.2f}/{:.2f} GiB, {}/{} tensors", bytes_read_ / kGiB,
                                            total_bytes_ / kGiB, num_read_,
                                            source_.tensors().size()));
}

Status WeightLoader::read_blocks_into(const std::string& name, const std::vector<int64_t>& shape,
                                      IndexRange rows, IndexRange cols, void* dst,
                                      std::vector<uint8_t>* perm) {
  const TensorInfo* info = source_.find(name);
  if (info == nullptr)
    return make_error(ErrorCode::kNotFound,
                      "tensor " + name + " not found in " + source_.describe());
  if (info->shape != shape)
    return make_error(ErrorCode::kInvalidArgument, "tensor " + name + ": expected " +
                                                       shape_string(shape) + ", found " +
                                                       shape_string(info->shape));
  PAGODA_ASSIGN_OR_RETURN(HostTensor host, source_.read_blocks(name));
  const DType dt = host.dtype;
  const int64_t block = dtype_block_elems(dt);
  if (host.shape != shape || shape.size() != 2 || !is_block_dtype(dt) || shape[1] % block != 0 ||
      !within(rows, shape[0]) || !within(cols, shape[1]) || cols.begin % block != 0 ||
      cols.end % block != 0)
    return make_error(ErrorCode::kInternal,
                      fmt::format("tensor {} {} {}: no block slice rows [{}, {}) columns [{}, {})",
                                  name, shape_string(host.shape), dtype_name(dt), rows.begin,
                                  rows.end, cols.begin, cols.end));
  const size_t row_bytes = dtype_nbytes(dt, shape[1]);
  const auto* src = static_cast<const uint8_t*>(host.data) +
                    static_cast<size_t>(rows.begin) * row_bytes + dtype_nbytes(dt, cols.begin);
  const size_t slice_bytes = dtype_nbytes(dt, cols.size());
  if (has_k_perm(dt)) {
    if (cols.size() != shape[1])
      return make_error(ErrorCode::kInternal,
                        "tensor " + name + ": column slice of a K permutation");
    const auto* tail = static_cast<const uint8_t*>(host.data) + dtype_nbytes(dt, numel(shape));
    const std::vector<uint8_t> part(tail, tail + dtype_k_perm_bytes(dt, shape[1]));
    if (perm->empty()) {
      *perm = part;
    } else if (*perm != part) {
      return make_error(ErrorCode::kUnsupported,
                        "tensor " + name +
                            ": its act-order permutation of K (g_idx) differs from the other "
                            "parts fused with it; pagoda fuses only parts that share one");
    }
  }
  backend_.copy_to_device_2d(dst, slice_bytes, src, row_bytes, slice_bytes,
                             static_cast<size_t>(rows.size()));
  backend_.synchronize();  // `host` must outlive the copy
  count_read(*info);
  return {};
}

std::optional<DType> WeightLoader::kept_blocks(const std::vector<std::string>& names,
                                               IndexRange cols, int64_t k) const {
  if (!keep_blocks_) return std::nullopt;
  std::optional<DType> dt;
  for (const std::string& name : names) {
    const TensorInfo* info = source_.find(name);
    if (info == nullptr || !info->blocks) return std::nullopt;
    if (dt && *dt != *info->blocks) {
      if (shard_.rank == 0)
        log_info("{} fused with {}: {} and {} blocks differ; dequantized to {}", names[0], name,
                 dtype_name(*dt), dtype_name(*info->blocks), dtype_name(backend_.compute_dtype()));
      return std::nullopt;
    }
    dt = info->blocks;
  }
  if (has_k_perm(*dt) && (cols.begin != 0 || cols.end != k)) {
    if (shard_.rank == 0)
      log_warn("{}: columns [{}, {}) of {} split its act-order permutation of K; dequantized to {}",
               names[0], cols.begin, cols.end, k, dtype_name(backend_.compute_dtype()));
    return std::nullopt;
  }
  const int64_t block = dtype_block_elems(*dt);
  if (k % block != 0 || cols.begin % block != 0 || cols.end % block != 0) {
    if (shard_.rank == 0)
      log_warn("{}: columns [{}, {}) of {} are not whole {} blocks of {}; dequantized to {}",
               names[0], cols.begin, cols.end, k, dtype_name(*dt), block,
               dtype_name(backend_.compute_dtype()));
    return std::nullopt;
  }
  return dt;
}

void WeightLoader::upload_k_perm(const Tensor& t, const std::vector<uint8_t>& perm) {
  if (perm.empty()) return;
  backend_.copy_to_device(static_cast<char*>(t.data) + dtype_nbytes(t.dtype, t.numel()),
                          perm.data(), perm.size());
  backend_.synchronize();  // `perm` must outlive the copy
}

Result<LinearWeight> WeightLoader::load_linear(const std::string& name,
                                               const std::vector<int64_t>& shape) {
  if (shape.size() != 2) return as_linear(load(name, shape));
  PAGODA_ASSIGN_OR_RETURN(const bool fp8, stored_fp8({name}));
  if (fp8) return load_fp8({name}, {shape[0]}, shape[1], {{0, shape[0]}}, {0, shape[1]});
  // The lm_head is never quantised online (vLLM neither).
  return load_fused_linear({name}, {shape[0]}, shape[1], {}, /*online=*/false);
}

Result<LinearWeight> WeightLoader::load_linear_columns(const std::string& name,
                                                       const std::vector<int64_t>& shape,
                                                       IndexRange cols) {
  if (shape.size() == 2) {
    PAGODA_ASSIGN_OR_RETURN(const bool fp8, stored_fp8({name}));
    if (fp8 || quant_.method == QuantMethod::kOnline) {
      if (!within(cols, shape[1]))
        return make_error(ErrorCode::kInternal,
                          fmt::format("tensor {}: no column slice [{}, {}) of {}", name, cols.begin,
                                      cols.end, shape_string(shape)));
      const std::vector<IndexRange> all = {{0, shape[0]}};
      return fp8 ? load_fp8({name}, {shape[0]}, shape[1], all, cols)
                 : quantize_fp8({name}, {shape[0]}, shape[1], all, cols);
    }
  }
  const std::optional<DType> dt =
      shape.size() == 2 ? kept_blocks({name}, cols, shape[1]) : std::nullopt;
  if (!dt) return as_linear(load_columns(name, shape, cols));
  if (!within(cols, shape[1]))
    return make_error(ErrorCode::kInternal,
                      fmt::format("tensor {}: no column slice [{}, {}) of {}", name, cols.begin,
                                  cols.end, shape_string(shape)));
  PAGODA_ASSIGN_OR_RETURN(Tensor t, allocate(name, {shape[0], cols.size()}, *dt));
  std::vector<uint8_t> perm;
  PAGODA_RETURN_IF_ERROR(read_blocks_into(name, shape, {0, shape[0]}, cols, t.data, &perm));
  upload_k_perm(t, perm);
  PAGODA_RETURN_IF_ERROR(backend_.prepare_block_weight(t));
  return LinearWeight(t);
}

Result<LinearWeight> WeightLoader::load_fused_linear(const std::vector<std::string>& names,
                                                     const std::vector<int64_t>& rows, int64_t cols,
                                                     const std::vector<IndexRange>& take) {
  return load_fused_linear(names, rows, cols, take, quant_.method == QuantMethod::kOnline);
}

Result<LinearWeight> WeightLoader::load_fused_linear(const std::vector<std::string>& names,
                                                     const std::vector<int64_t>& rows, int64_t cols,
                                                     const std::vector<IndexRange>& take,
                                                     bool online) {
  PAGODA_ASSIGN_OR_RETURN(const bool fp8, stored_fp8(names));
  if (fp8 || online) {
    if (!take.empty() && take.size() != names.size())
      return make_error(ErrorCode::kInternal,
                        "load_fused " + names[0] + ": one row range per part");
    std::vector<IndexRange> kept(names.size());
    for (size_t i = 0; i < names.size(); ++i) {
      kept[i] = take.empty() ? IndexRange{0, rows[i]} : take[i];
      if (!within(kept[i], rows[i]))
        return make_error(ErrorCode::kInternal,
                          fmt::format("tensor {}: no row slice [{}, {}) of {}", names[i],
                                      kept[i].begin, kept[i].end, rows[i]));
    }
    return fp8 ? load_fp8(names, rows, cols, kept, {0, cols})
               : quantize_fp8(names, rows, cols, kept, {0, cols});
  }
  const std::optional<DType> dt = kept_blocks(names, {0, cols}, cols);
  if (!dt) return as_linear(load_fused(names, rows, {cols}, take));
  if (!take.empty() && take.size() != names.size())
    return make_error(ErrorCode::kInternal, "load_fused " + names[0] + ": one row range per part");
  std::vector<IndexRange> kept(names.size());
  int64_t total_rows = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    kept[i] = take.empty() ? IndexRange{0, rows[i]} : take[i];
    total_rows += kept[i].size();
  }
  PAGODA_ASSIGN_OR_RETURN(Tensor t, allocate(names[0], {total_rows, cols}, *dt));
  char* dst = static_cast<char*>(t.data);
  std::vector<uint8_t> perm;
  for (size_t i = 0; i < names.size(); ++i) {
    PAGODA_RETURN_IF_ERROR(
        read_blocks_into(names[i], {rows[i], cols}, kept[i], {0, cols}, dst, &perm));
    dst += static_cast<size_t>(kept[i].size()) * dtype_nbytes(*dt, cols);
  }
  upload_k_perm(t, perm);
  PAGODA_RETURN_IF_ERROR(backend_.prepare_block_weight(t));
  return LinearWeight(t);
}

Result<Tensor> WeightLoader::load_linear_rows(const std::string& name,
                                              const std::vector<int64_t>& shape, IndexRange rows,
                                              int64_t padded_rows) {
  return load_row_block(name, shape, rows, padded_rows, true);
}

Result<Tensor> WeightLoader::load_rows(const std::string& name, const std::vector<int64_t>& shape,
                                       IndexRange rows, int64_t padded_rows) {
  return load_row_block(name, shape, rows, padded_rows, false);
}

Result<Tensor> WeightLoader::load_row_block(const std::string& name,
                                            const std::vector<int64_t>& shape, IndexRange rows,
                                            int64_t padded_rows, bool blocks) {
  if (shape.size() != 2 || !within(rows, shape[0]) || padded_rows < rows.size())
    return make_error(ErrorCode::kInternal,
                      fmt::format("tensor {}: no row block [{}, {}) padded to {} of {}", name,
                                  rows.begin, rows.end, padded_rows, shape_string(shape)));
  const std::optional<DType> dt =
      blocks ? kept_blocks({name}, {0, shape[1]}, shape[1]) : std::nullopt;
  PAGODA_ASSIGN_OR_RETURN(Tensor t, allocate(name, {padded_rows, shape[1]}, dt));
  std::vector<uint8_t> perm;
  if (dt) {
    PAGODA_RETURN_IF_ERROR(read_blocks_into(name, shape, rows, {0, shape[1]}, t.data, &perm));
  } else {
    PAGODA_RETURN_IF_ERROR(read_into(name, shape, rows, {0, shape[1]}, t.data));
  }
  const size_t row_bytes = dtype_nbytes(t.dtype, shape[1]);
  const size_t pad = static_cast<size_t>(padded_rows - rows.size()) * row_bytes;
  if (pad > 0) {
    const std::vector<uint8_t> zeros(pad, 0);
    backend_.copy_to_device(
        static_cast<char*>(t.data) + static_cast<size_t>(rows.size()) * row_bytes, zeros.data(),
        pad);
    backend_.synchronize();  // zeros must outlive the copy
  }
  upload_k_perm(t, perm);  // after the padded rows, where a _perm format keeps it
  if (dt) PAGODA_RETURN_IF_ERROR(backend_.prepare_block_weight(t));
  return t;
}

Status WeightLoader::read_into(const std::string& name, const std::vector<int64_t>& shape,
                               IndexRange rows, IndexRange cols, void* dst, float offset) {
  PAGODA_ASSIGN_OR_RETURN(HostTensor host, fetch(name, shape));
  return copy_rows(name, host, rows, cols, dst, offset);
}

Result<Tensor> WeightLoader::load_offset(const std::string& name, const std::vector<int64_t>& shape,
                                         float offset) {
  if (!has(name))
    return make_error(ErrorCode::kNotFound,
                      "tensor " + name + " not found in " + source_.describe());
  PAGODA_ASSIGN_OR_RETURN(Tensor t, allocate(name, shape));
  PAGODA_RETURN_IF_ERROR(
      read_into(name, shape, {0, num_rows(shape)}, {0, row_elems(shape)}, t.data, offset));
  return t;
}

Result<Tensor> WeightLoader::load(const std::string& name, const std::vector<int64_t>& shape) {
  return load_offset(name, shape, 0.0f);
}

Result<Tensor> WeightLoader::load_columns(const std::string& name,
                                          const std::vector<int64_t>& shape, IndexRange cols) {
  if (!has(name))
    return make_error(ErrorCode::kNotFound,
                      "tensor " + name + " not found in " + source_.describe());
  if (shape.size() != 2 || !within(cols, shape[1]))
    return make_error(ErrorCode::kInternal,
                      fmt::format("tensor {}: no column slice [{}, {}) of {}", name, cols.begin,
                                  cols.end, shape_string(shape)));
  PAGODA_ASSIGN_OR_RETURN(Tensor t, allocate(name, {shape[0], cols.size()}));
  PAGODA_RETURN_IF_ERROR(read_into(name, shape, {0, shape[0]}, cols, t.data));
  return t;
}

Result<LinearWeight> WeightLoader::load_fused_linear_columns(
    const std::vector<std::string>& names, const std::vector<int64_t>& rows, int64_t k,
    IndexRange cols) {
  int64_t total_rows = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!has(names[i]))
      return make_error(ErrorCode::kNotFound,
                        "tensor " + names[i] + " not found in " + source_.describe());
    total_rows += rows[i];
  }
  if (!within(cols, k))
    return make_error(ErrorCode::kInternal, fmt::format("tensor {}: no column slice [{}, {}) of {}",
                                                        names[0], cols.begin, cols.end, k));
  PAGODA_ASSIGN_OR_RETURN(Tensor t, allocate(names[0], {total_rows, cols.size()}));
  char* dst = static_cast<char*>(t.data);
  for (size_t i = 0; i < names.size(); ++i) {
    PAGODA_RETURN_IF_ERROR(read_into(names[i], {rows[i], k}, {0, rows[i]}, cols, dst));
    dst += static_cast<size_t>(rows[i] * cols.size()) * dtype_size(t.dtype);
  }
  return LinearWeight(t);
}

Result<Tensor> WeightLoader::load_fused(const std::vector<std::string>& names,
                                        const std::vector<int64_t>& rows,
                                        const std::vector<int64_t>& cols,
                                        const std::vector<IndexRange>& take) {
  if (!take.empty() && take.size() != names.size())
    return make_error(ErrorCode::kInternal, "load_fused " + names[0] + ": one row range per part");
  std::vector<IndexRange> kept(names.size());
  int64_t total_rows = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    if (!has(names[i]))
      return make_error(ErrorCode::kNotFound,
                        "tensor " + names[i] + " not found in " + source_.describe());
    kept[i] = take.empty() ? IndexRange{0, rows[i]} : take[i];
    total_rows += kept[i].size();
  }
  std::vector<int64_t> fused_shape = {total_rows};
  fused_shape.insert(fused_shape.end(), cols.begin(), cols.end());
  PAGODA_ASSIGN_OR_RETURN(Tensor t, allocate(names[0], fused_shape));
  const int64_t width = numel(cols);
  const size_t row_bytes = static_cast<size_t>(width) * dtype_size(t.dtype);
  char* dst = static_cast<char*>(t.data);
  HostTensor host;  // the part's tensor, read once for consecutive parts of one name
  for (size_t i = 0; i < names.size(); ++i) {
    std::vector<int64_t> shape = {rows[i]};
    shape.insert(shape.end(), cols.begin(), cols.end());
    if (i == 0 || names[i] != names[i - 1] || shape != host.shape) {
      host = HostTensor();  // release the previous part first
      PAGODA_ASSIGN_OR_RETURN(host, fetch(names[i], shape));
    }
    PAGODA_RETURN_IF_ERROR(copy_rows(names[i], host, kept[i], {0, width}, dst));
    dst += static_cast<size_t>(kept[i].size()) * row_bytes;
  }
  return t;
}

}  // namespace pagoda
