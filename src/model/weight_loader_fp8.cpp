// WeightLoader's FP8 linear weights (weight_loader.h, "FP8"): checkpoint
// tensors stored as F8_E4M3 with their scales, and the online scheme.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/float_elements.h"
#include "core/fp8_quant.h"
#include "core/thread_pool.h"
#include "model/weight_loader.h"

namespace pagoda {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

Error invalid(std::string message) {
  return make_error(ErrorCode::kInvalidArgument, std::move(message));
}

// "model.layers.0.self_attn.q_proj" of "model.layers.0.self_attn.q_proj.weight".
Result<std::string> module_of(const std::string& weight) {
  constexpr std::string_view kSuffix = ".weight";
  if (weight.size() <= kSuffix.size() ||
      weight.compare(weight.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0)
    return invalid("tensor " + weight + ": an FP8 linear weight's name must end in .weight");
  return weight.substr(0, weight.size() - kSuffix.size());
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

Result<bool> WeightLoader::stored_fp8(const std::vector<std::string>& names) const {
  int num_fp8 = 0;
  for (const std::string& name : names) {
    const TensorInfo* info = source_.find(name);
    if (info != nullptr && info->dtype == DType::kF8E4M3) ++num_fp8;
  }
  if (num_fp8 == 0) return false;
  if (num_fp8 != static_cast<int>(names.size()))
    return invalid(
        fmt::format("tensors {}...: the parts of one fused linear weight mix F8_E4M3 "
                    "and other dtypes",
                    names[0]));
  if (!quant_.fp8() || quant_.method == QuantMethod::kOnline)
    return invalid(
        fmt::format("tensor {} is stored as F8_E4M3 but {} has no quantization_config "
                    "describing its scales",
                    names[0], "config.json"));
  return true;
}

Result<std::vector<float>> WeightLoader::read_scales(
    const std::string& name, const std::vector<std::vector<int64_t>>& shapes) {
  const TensorInfo* info = source_.find(name);
  if (info == nullptr)
    return make_error(ErrorCode::kNotFound, "tensor " + name + " not found in " +
                                                source_.describe() + " (an FP8 weight's scale)");
  if (std::find(shapes.begin(), shapes.end(), info->shape) == shapes.end())
    return invalid(fmt::format("tensor {}: expected {}, found {}", name, shape_text(shapes[0]),
                               shape_text(info->shape)));
  PAGODA_ASSIGN_OR_RETURN(HostTensor host, source_.read(name));
  if (!is_float_dtype(host.dtype))
    return invalid(fmt::format("tensor {}: a scale must be F32, F16 or BF16, found {}", name,
                               dtype_name(host.dtype)));
  std::vector<float> v(static_cast<size_t>(host.numel()));
  for (size_t i = 0; i < v.size(); ++i) {
    v[i] = load_float_element(host.dtype, host.data, static_cast<int64_t>(i));
    if (!std::isfinite(v[i]) || v[i] < 0.0f)
      return invalid(fmt::format("tensor {}: scale {} at {} is not a finite non-negative number",
                                 name, v[i], i));
  }
  count_read(*info);
  return v;
}

Result<Tensor> WeightLoader::upload(const std::string& name, const std::vector<int64_t>& shape,
                                    DType dtype, const void* values) {
  PAGODA_ASSIGN_OR_RETURN(Tensor t, allocate(name, shape, dtype));
  backend_.copy_to_device(t.data, values, t.nbytes());
  backend_.synchronize();  // `values` must outlive the copy
  return t;
}

Result<LinearWeight> WeightLoader::load_fp8(const std::vector<std::string>& names,
                                            const std::vector<int64_t>& rows, int64_t k,
                                            const std::vector<IndexRange>& kept, IndexRange cols) {
  const bool block = quant_.weight_scales == Fp8WeightScales::kBlock;
  const int64_t b = quant_.block;
  if (block && (cols.begin % b != 0 || (cols.end % b != 0 && cols.end != k)))
    return invalid(
        fmt::format("tensor {}: columns [{}, {}) of {} do not start and end on its "
                    "{}-column FP8 blocks (tensor parallelism splits a block)",
                    names[0], cols.begin, cols.end, k, b));
  int64_t total_rows = 0;
  for (const IndexRange& r : kept) total_rows += r.size();
  std::vector<uint8_t> codes(static_cast<size_t>(total_rows * cols.size()));
  std::vector<float> scales;  // [total_rows], or the block grid
  float input_scale = 0.0f;
  int64_t row = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    const std::string& name = names[i];
    PAGODA_ASSIGN_OR_RETURN(const std::string module, module_of(name));
    const TensorInfo* info = source_.find(name);
    if (info->shape != std::vector<int64_t>{rows[i], k})
      return invalid(fmt::format("tensor {}: expected {}, found {}", name, shape_text({rows[i], k}),
                                 shape_text(info->shape)));
    if (block && (kept[i].begin % b != 0 ||
                  (kept[i].end % b != 0 && (kept[i].end != rows[i] || i + 1 != names.size()))))
      return invalid(
          fmt::format("tensor {}: rows [{}, {}) of {} do not start and end on its "
                      "{}-row FP8 blocks (a fused part or a tensor-parallel slice "
                      "splits a block)",
                      name, kept[i].begin, kept[i].end, rows[i], b));
    PAGODA_ASSIGN_OR_RETURN(HostTensor host, source_.read(name));
    const auto* src = static_cast<const uint8_t*>(host.data);
    for (int64_t r = kept[i].begin; r < kept[i].end; ++r, ++row)
      std::memcpy(codes.data() + row * cols.size(), src + r * k + cols.begin,
                  static_cast<size_t>(cols.size()));
    count_read(*info);
    if (block) {
      const std::string sname = module + "." + quant_.block_scale_name;
      const int64_t nb = ceil_div(rows[i], b), kb = ceil_div(k, b);
      PAGODA_ASSIGN_OR_RETURN(std::vector<float> s, read_scales(sname, {{nb, kb}}));
      for (int64_t r = kept[i].begin / b; r < ceil_div(kept[i].end, b); ++r)
        for (int64_t c = cols.begin / b; c < ceil_div(cols.end, b); ++c)
          scales.push_back(s[static_cast<size_t>(r * kb + c)]);
    } else {
      const std::string sname = module + ".weight_scale";
      const bool channel = quant_.weight_scales == Fp8WeightScales::kChannel;
      PAGODA_ASSIGN_OR_RETURN(
          std::vector<float> s,
          read_scales(sname, channel ? std::vector<std::vector<int64_t>>{{rows[i], 1}, {rows[i]}}
                                     : std::vector<std::vector<int64_t>>{{}, {1}}));
      for (int64_t r = kept[i].begin; r < kept[i].end; ++r)
        scales.push_back(s[channel ? static_cast<size_t>(r) : 0]);
    }
    if (quant_.static_activations) {
      PAGODA_ASSIGN_OR_RETURN(std::vector<float> s,
                              read_scales(module + ".input_scale", {{}, {1}}));
      if (!(s[0] > 0.0f))
        return invalid(
            fmt::format("tensor {}.input_scale: must be positive, found {}", module, s[0]));
      input_scale = std::max(input_scale, s[0]);  // fused parts: the largest (vLLM)
    }
  }
  LinearWeight w;
  PAGODA_ASSIGN_OR_RETURN(
      Tensor codes_t, upload(names[0], {total_rows, cols.size()}, DType::kF8E4M3, codes.data()));
  static_cast<Tensor&>(w) = codes_t;
  const std::vector<int64_t> scale_shape =
      block ? std::vector<int64_t>{ceil_div(total_rows, b), ceil_div(cols.size(), b)}
            : std::vector<int64_t>{total_rows};
  if (static_cast<int64_t>(scales.size()) != scale_shape[0] * (block ? scale_shape[1] : 1))
    return make_error(ErrorCode::kInternal,
                      fmt::format("tensor {}: {} FP8 scales gathered for {}", names[0],
                                  scales.size(), shape_text(scale_shape)));
  PAGODA_ASSIGN_OR_RETURN(w.weight_scale,
                          upload(names[0] + " scales", scale_shape, DType::kF32, scales.data()));
  if (quant_.static_activations) {
    PAGODA_ASSIGN_OR_RETURN(w.input_scale,
                            upload(names[0] + " input_scale", {1}, DType::kF32, &input_scale));
  }
  w.block = block ? static_cast<int32_t>(b) : 0;
  PAGODA_RETURN_IF_ERROR(backend_.prepare_fp8_weight(w));
  return w;
}

Result<LinearWeight> WeightLoader::quantize_fp8(const std::vector<std::string>& names,
                                                const std::vector<int64_t>& rows, int64_t k,
                                                const std::vector<IndexRange>& kept,
                                                IndexRange cols) {
  int64_t total_rows = 0;
  for (const IndexRange& r : kept) total_rows += r.size();
  const int64_t width = cols.size();
  std::vector<uint8_t> codes(static_cast<size_t>(total_rows * width));
  std::vector<float> scales(static_cast<size_t>(total_rows));
  HostTensor host;  // read once for consecutive parts of one name (pre-fused qkv)
  int64_t out_row = 0;  // the first output row of part i
  for (size_t i = 0; i < names.size(); ++i) {
    const TensorInfo* info = source_.find(names[i]);
    if (info != nullptr && info->blocks)
      return invalid(
          fmt::format("tensor {} is stored in {} blocks; --quantization fp8 quantises "
                      "f32, f16 and bf16 weights only",
                      names[i], dtype_name(*info->blocks)));
    if (i == 0 || names[i] != names[i - 1]) {
      host = HostTensor();
      PAGODA_ASSIGN_OR_RETURN(host, fetch(names[i], {rows[i], k}));
    }
    // Rows are independent (one scale each): quantised on the thread pool,
    // each into its own place, so the result does not depend on the split.
    const int64_t first = kept[i].begin, base = out_row;
    parallel_for(kept[i].size(), 16, [&](int64_t lo, int64_t hi) {
      std::vector<float> line(static_cast<size_t>(width));
      for (int64_t r = lo; r < hi; ++r) {
        const int64_t src = (first + r) * k + cols.begin;
        for (int64_t c = 0; c < width; ++c)
          line[static_cast<size_t>(c)] = load_float_element(host.dtype, host.data, src + c);
        const float s = fp8_token_scale(fp8_amax(line.data(), width));
        fp8_quantize(line.data(), width, s, codes.data() + static_cast<size_t>((base + r) * width));
        scales[static_cast<size_t>(base + r)] = s;
      }
    });
    out_row += kept[i].size();
  }
  LinearWeight w;
  PAGODA_ASSIGN_OR_RETURN(
      Tensor codes_t, upload(names[0], {total_rows, cols.size()}, DType::kF8E4M3, codes.data()));
  static_cast<Tensor&>(w) = codes_t;
  PAGODA_ASSIGN_OR_RETURN(w.weight_scale,
                          upload(names[0] + " scales", {total_rows}, DType::kF32, scales.data()));
  PAGODA_RETURN_IF_ERROR(backend_.prepare_fp8_weight(w));
  return w;
}

}  // namespace pagoda
