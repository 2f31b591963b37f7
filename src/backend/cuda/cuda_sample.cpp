// CudaBackend::sample_async / finish_sample: validates the batch, uploads the
// per-row settings, the bias / penalty lists and the allowed-token masks in
// one copy (an unmasked batch adds no bytes), runs the
// sampling kernel over chunks of rows (bounded scratch for processed rows),
// and copies back only the per-row results and the top-K block, into the
// slot's pinned buffer; finish_sample waits for the slot's fence and unpacks.
// Small batches split each row over several CTAs (sampling_kernels.h), whose
// cross-CTA scratch is allocated and zeroed on the first call.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/sampling_kernels.h"

namespace pagoda {
namespace {

// Processed-row scratch per launch; rows are sampled in chunks that fit.
constexpr size_t kSampleScratchBytes = size_t{64} << 20;

size_t align16(size_t n) { return (n + 15) & ~size_t{15}; }

// Checks that CSR offsets (empty, or R + 1 non-decreasing values) stay within
// a list of `size` entries.
bool valid_offsets(const std::vector<int32_t>& offsets, size_t num_rows, size_t size) {
  if (offsets.empty()) return true;
  if (offsets.size() != num_rows + 1 || offsets[0] < 0) return false;
  for (size_t r = 0; r < num_rows; ++r) {
    if (offsets[r + 1] < offsets[r]) return false;
  }
  return static_cast<size_t>(offsets[num_rows]) <= size;
}

// Mask sizes: W = ceil(V / 32) words per mask, whole masks, indices in
// [-1, num_masks) (each mask's content is step validation's concern).
std::string validate_masks(int64_t vocab, const SamplingBatch& b) {
  if (b.mask_index.empty()) return b.allowed_words.empty() ? "" : "masks: words without mask_index";
  const size_t w = static_cast<size_t>(b.mask_words);
  if (b.mask_index.size() != b.rows.size() || static_cast<int64_t>(w) != (vocab + 31) / 32 ||
      b.allowed_words.size() % w != 0 ||
      b.allowed_words.size() > static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return "masks: mask_index/mask_words/allowed_words sizes disagree";
  }
  const auto num_masks = static_cast<int64_t>(b.allowed_words.size() / w);
  for (int32_t m : b.mask_index) {
    if (m < -1 || m >= num_masks) return fmt::format("masks: index {} not in [-1, {})", m, num_masks);
  }
  return {};
}

std::string validate(const Tensor& logits, const SamplingBatch& b) {
  const size_t num_rows = b.rows.size();
  if (logits.dtype != DType::kF32 || logits.ndim != 2 ||
      logits.dim(0) != static_cast<int64_t>(num_rows) || logits.dim(1) <= 0 ||
      logits.dim(1) > std::numeric_limits<int32_t>::max()) {
    return fmt::format("logits must be f32 [{}, V]", num_rows);
  }
  if (b.max_top_logprobs < 0 || b.max_top_logprobs > cuda::kMaxTopLogprobs) {
    return fmt::format("max_top_logprobs {} outside [0, {}]", b.max_top_logprobs, cuda::kMaxTopLogprobs);
  }
  const size_t num_pen = b.penalty_tokens.size();
  if (b.penalty_output_counts.size() != num_pen || b.penalty_in_prompt.size() != num_pen ||
      !valid_offsets(b.penalty_offsets, num_rows, num_pen)) {
    return "penalty lists: offsets/tokens/counts/in_prompt sizes disagree";
  }
  if (b.bias_values.size() != b.bias_tokens.size() ||
      !valid_offsets(b.bias_offsets, num_rows, b.bias_tokens.size())) {
    return "bias lists: offsets/tokens/values sizes disagree";
  }
  return validate_masks(logits.dim(1), b);
}

cuda::SampleRowParams row_params(const SamplingBatch& b, size_t r) {
  const SamplingRow& row = b.rows[r];
  cuda::SampleRowParams p;
  p.seed = row.seed;
  p.step = row.step;
  p.temperature = row.temperature;
  p.top_p = row.top_p;
  p.min_p = row.min_p;
  p.repetition_penalty = row.repetition_penalty;
  p.presence_penalty = row.presence_penalty;
  p.frequency_penalty = row.frequency_penalty;
  p.top_k = row.top_k;
  p.num_top_logprobs = row.num_top_logprobs;
  p.target_token = row.target_token;
  if (!b.penalty_offsets.empty()) {
    p.penalty_begin = b.penalty_offsets[r];
    p.penalty_end = b.penalty_offsets[r + 1];
  }
  if (!b.bias_offsets.empty()) {
    p.bias_begin = b.bias_offsets[r];
    p.bias_end = b.bias_offsets[r + 1];
  }
  if (!b.mask_index.empty() && b.mask_index[r] >= 0) p.mask_begin = b.mask_index[r] * b.mask_words;
  return p;
}

// Byte offsets of the sections of the upload blob.
struct InputLayout {
  size_t rows = 0, pen_tokens = 0, pen_counts = 0, bias_tokens = 0, bias_values = 0,
         mask_words = 0, pen_prompt = 0, total = 0;
  InputLayout(size_t num_rows, size_t num_pen, size_t num_bias, size_t num_mask_words) {
    pen_tokens = align16(num_rows * sizeof(cuda::SampleRowParams));
    pen_counts = pen_tokens + align16(num_pen * 4);
    bias_tokens = pen_counts + align16(num_pen * 4);
    bias_values = bias_tokens + align16(num_bias * 4);
    mask_words = bias_values + align16(num_bias * 4);
    pen_prompt = mask_words + align16(num_mask_words * 4);
    total = pen_prompt + align16(num_pen);
  }
};

template <typename T>
void put(char* base, size_t offset, const std::vector<T>& v) {
  if (!v.empty()) std::memcpy(base + offset, v.data(), v.size() * sizeof(T));
}

// Byte offsets of the sections of the result blob (copied back in one piece).
struct OutputLayout {
  size_t top_ids = 0, top_logprobs = 0, total = 0;
  OutputLayout(size_t num_rows, size_t width) {
    top_ids = align16(num_rows * sizeof(cuda::SampleRowResult));
    top_logprobs = top_ids + align16(num_rows * width * 4);
    total = top_logprobs + num_rows * width * 4;
  }
};

// The defaults of every output (as the CPU backend): token 0, top-K -1 / NaN,
// target NaN / 0.
void reset_output(size_t num_rows, size_t width, SampleOutput& out) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  out.token_ids.assign(num_rows, 0);
  out.logprobs.assign(num_rows, 0.0f);
  out.ranks.assign(num_rows, 0);
  out.top_ids.assign(num_rows * width, -1);
  out.top_logprobs.assign(num_rows * width, nan);
  out.target_logprobs.assign(num_rows, nan);
  out.target_ranks.assign(num_rows, 0);
}

void fill_inputs(char* host, const InputLayout& in, const SamplingBatch& batch) {
  auto* rows = reinterpret_cast<cuda::SampleRowParams*>(host);
  for (size_t r = 0; r < batch.rows.size(); ++r) rows[r] = row_params(batch, r);
  put(host, in.pen_tokens, batch.penalty_tokens);
  put(host, in.pen_counts, batch.penalty_output_counts);
  put(host, in.bias_tokens, batch.bias_tokens);
  put(host, in.bias_values, batch.bias_values);
  put(host, in.mask_words, batch.allowed_words);
  put(host, in.pen_prompt, batch.penalty_in_prompt);
}

// Kernel parameters for rows [begin, begin + n); host_in: the upload blob
// (fill_inputs'), whose row settings give the split its hint.
cuda::SampleParams chunk_params(const Tensor& logits, size_t begin, size_t n, size_t width,
                                const InputLayout& in, const OutputLayout& res, const char* host_in,
                                const char* dev_in,
                                char* dev_out, float* scratch, void* group_scratch,
                                size_t group_scratch_bytes) {
  const int64_t vocab = logits.dim(1);
  cuda::SampleParams p;
  const auto* rows = reinterpret_cast<const cuda::SampleRowParams*>(host_in) + begin;
  for (size_t i = 0; i < n; ++i) p.narrowing_rows += cuda::sample_row_narrows(rows[i], vocab) ? 1 : 0;
  p.logits = logits.ptr<float>() + static_cast<int64_t>(begin) * vocab;
  p.vocab = vocab;
  p.num_rows = static_cast<int>(n);
  p.rows = reinterpret_cast<const cuda::SampleRowParams*>(dev_in) + begin;
  p.penalty_tokens = reinterpret_cast<const int32_t*>(dev_in + in.pen_tokens);
  p.penalty_counts = reinterpret_cast<const int32_t*>(dev_in + in.pen_counts);
  p.penalty_in_prompt = reinterpret_cast<const uint8_t*>(dev_in + in.pen_prompt);
  p.bias_tokens = reinterpret_cast<const int32_t*>(dev_in + in.bias_tokens);
  p.bias_values = reinterpret_cast<const float*>(dev_in + in.bias_values);
  p.allowed_words = reinterpret_cast<const uint32_t*>(dev_in + in.mask_words);
  p.scratch = scratch;
  p.top_width = static_cast<int>(width);
  p.results = reinterpret_cast<cuda::SampleRowResult*>(dev_out) + begin;
  p.top_ids = reinterpret_cast<int32_t*>(dev_out + res.top_ids) + begin * width;
  p.top_logprobs = reinterpret_cast<float*>(dev_out + res.top_logprobs) + begin * width;
  p.group_scratch = group_scratch;
  p.group_scratch_bytes = group_scratch_bytes;
  return p;
}

void unpack_results(const char* host, const OutputLayout& res, size_t num_rows, size_t width,
                    SampleOutput& out) {
  const auto* results = reinterpret_cast<const cuda::SampleRowResult*>(host);
  for (size_t r = 0; r < num_rows; ++r) {
    out.token_ids[r] = results[r].token;
    out.logprobs[r] = results[r].logprob;
    out.ranks[r] = results[r].rank;
    out.target_logprobs[r] = results[r].target_logprob;
    out.target_ranks[r] = results[r].target_rank;
  }
  if (width > 0) {
    std::memcpy(out.top_ids.data(), host + res.top_ids, num_rows * width * 4);
    std::memcpy(out.top_logprobs.data(), host + res.top_logprobs, num_rows * width * 4);
  }
}

}  // namespace

bool CudaBackend::ensure_device(Buffer& b, size_t bytes) {
  if (b.bytes >= bytes) return true;
  if (b.ptr != nullptr) check(cudaFree(b.ptr), "cudaFree");
  b = Buffer{};
  const size_t want = std::max(bytes, size_t{1} << 16);
  if (!check(cudaMalloc(&b.ptr, want), "sample: cudaMalloc")) {
    b.ptr = nullptr;
    return false;
  }
  b.bytes = want;
  return true;
}

bool CudaBackend::ensure_pinned(Buffer& b, size_t bytes) {
  if (b.bytes >= bytes) return true;
  if (b.ptr != nullptr) check(cudaFreeHost(b.ptr), "cudaFreeHost");
  b = Buffer{};
  const size_t want = std::max(bytes, size_t{1} << 16);
  if (!check(cudaMallocHost(&b.ptr, want), "sample: cudaMallocHost")) {
    b.ptr = nullptr;
    return false;
  }
  b.bytes = want;
  return true;
}

void CudaBackend::free_sample_buffers() {
  for (Buffer* b : {&sample_in_dev_, &sample_out_dev_, &sample_scratch_, &sample_group_}) {
    if (b->ptr != nullptr) cudaFree(b->ptr);
    *b = Buffer{};
  }
  for (SampleSlot& slot : sample_slots_) {
    for (Buffer* b : {&slot.in_host, &slot.out_host}) {
      if (b->ptr != nullptr) cudaFreeHost(b->ptr);
      *b = Buffer{};
    }
  }
}

void CudaBackend::sample_async(const Tensor& logits, const SamplingBatch& batch, int slot_index) {
  if (slot_index < 0 || slot_index >= kNumStepSlots) return fail(fmt::format("sample: slot {}", slot_index));
  SampleSlot& slot = sample_slots_[static_cast<size_t>(slot_index)];
  const size_t num_rows = batch.rows.size();
  const size_t width = static_cast<size_t>(std::max(batch.max_top_logprobs, 0));
  slot.num_rows = num_rows;
  slot.width = width;
  slot.downloaded = false;
  last_sample_rows_ = 0;
  if (capturing_) return fail("sample inside capture_graph");
  const std::string bad = validate(logits, batch);
  if (!bad.empty()) return fail("sample: " + bad);
  if (num_rows == 0) return;
  const int64_t vocab = logits.dim(1);
  cudaStream_t stream = stream_;

  const InputLayout in(num_rows, batch.penalty_tokens.size(), batch.bias_tokens.size(),
                       batch.allowed_words.size());
  const OutputLayout res(num_rows, width);
  // Rows processed into scratch: bias or penalties (a mask alone is read on
  // the fly, except with the old passes).
  const bool mask_on_the_fly = cuda::sample_fewer_passes();
  bool any_processed = false;
  for (size_t r = 0; r < num_rows; ++r) {
    const cuda::SampleRowParams p = row_params(batch, r);
    any_processed |= p.bias_end > p.bias_begin || p.penalty_end > p.penalty_begin ||
                     (p.mask_begin >= 0 && !mask_on_the_fly);
  }
  const size_t row_bytes = static_cast<size_t>(vocab) * sizeof(float);
  // Rows in launches whose scratch fits kSampleScratchBytes; without any
  // processed row no scratch is used and one launch takes every row (110
  // rows of 152k per launch would leave a 132-SM GPU partly idle, 3 times;
  // a batch of masked rows, constrained decoding, is such a batch).
  const size_t chunk = any_processed
                           ? std::clamp<size_t>(kSampleScratchBytes / row_bytes, 1, num_rows)
                           : num_rows;
  if (!ensure_pinned(slot.in_host, in.total) || !ensure_device(sample_in_dev_, in.total) ||
      !ensure_pinned(slot.out_host, res.total) || !ensure_device(sample_out_dev_, res.total) ||
      (any_processed && !ensure_device(sample_scratch_, chunk * row_bytes))) {
    return;
  }
  // Once: sized for the device, zero (launch_sample's contract).
  if (sample_group_.ptr == nullptr) {
    const size_t bytes = cuda::sample_group_scratch_bytes();
    if (!ensure_device(sample_group_, bytes) ||
        !check(cudaMemsetAsync(sample_group_.ptr, 0, sample_group_.bytes, stream),
               "sample: memset")) {
      return;
    }
  }
  fill_inputs(static_cast<char*>(slot.in_host.ptr), in, batch);
  if (!check(cudaMemcpyAsync(sample_in_dev_.ptr, slot.in_host.ptr, in.total,
                             cudaMemcpyHostToDevice, stream),
             "sample: upload")) {
    return;
  }
  for (size_t begin = 0; begin < num_rows; begin += chunk) {
    const cuda::SampleParams p = chunk_params(
        logits, begin, std::min(chunk, num_rows - begin), width, in, res,
        static_cast<const char*>(slot.in_host.ptr), static_cast<const char*>(sample_in_dev_.ptr), static_cast<char*>(sample_out_dev_.ptr),
        static_cast<float*>(sample_scratch_.ptr), sample_group_.ptr, sample_group_.bytes);
    if (!check(cuda::launch_sample(p, stream), "sample: kernel")) return;
  }
  last_sample_rows_ = static_cast<int>(num_rows);
  if (!check(cudaMemcpyAsync(slot.out_host.ptr, sample_out_dev_.ptr, res.total,
                             cudaMemcpyDeviceToHost, stream),
             "sample: download")) {
    return;
  }
  slot.downloaded = true;
  record_fence(slot_index);
}

void CudaBackend::finish_sample(int slot_index, SampleOutput& out) {
  if (slot_index < 0 || slot_index >= kNumStepSlots) {
    out = SampleOutput{};
    return fail(fmt::format("finish_sample: slot {}", slot_index));
  }
  SampleSlot& slot = sample_slots_[static_cast<size_t>(slot_index)];
  reset_output(slot.num_rows, slot.width, out);
  if (!slot.downloaded) return;  // nothing to sample, or sample_async failed (status() says why)
  slot.downloaded = false;
  wait_fence(slot_index);
  if (!status_.ok()) return;
  const OutputLayout res(slot.num_rows, slot.width);
  unpack_results(static_cast<const char*>(slot.out_host.ptr), res, slot.num_rows, slot.width, out);
}

void CudaBackend::copy_sampled_tokens(const Tensor& rows, const Tensor& src_rows, Tensor& ids) {
  if (rows.dtype != DType::kI32 || src_rows.dtype != DType::kI32 || ids.dtype != DType::kI32 ||
      rows.numel() != src_rows.numel() || rows.numel() > std::numeric_limits<int32_t>::max()) {
    return fail(fmt::format("copy_sampled_tokens: rows ({} {}), src_rows ({} {}), ids {} must be i32 and "
                            "rows, src_rows of one length", dtype_name(rows.dtype), rows.numel(),
                            dtype_name(src_rows.dtype), src_rows.numel(), dtype_name(ids.dtype)));
  }
  if (rows.numel() == 0) return;
  if (last_sample_rows_ == 0) return fail("copy_sampled_tokens: no sampling was enqueued");
  check(cuda::launch_copy_sampled_tokens(static_cast<const cuda::SampleRowResult*>(sample_out_dev_.ptr),
                                         last_sample_rows_, rows.ptr<int32_t>(), src_rows.ptr<int32_t>(),
                                         static_cast<int>(rows.numel()), ids.ptr<int32_t>(), ids.numel(),
                                         stream_),
        "copy_sampled_tokens");
}

}  // namespace pagoda
