// Logits processing and sampling on the GPU, exactly per
// batch/sampling_batch.h: each logits row is handled by a group of G CTAs
// (G = 1 at large batches; up to kMaxSampleGroups when rows are few and the
// vocabulary large, each CTA owning a contiguous chunk of the vocabulary).
// The group computes the raw log-softmax statistics, applies the
// allowed-token mask, bias and penalties (into a scratch copy of the row
// when the row has bias or penalties; a mask alone is applied on every read
// of the row, except with PAGODA_SAMPLE_KERNEL=old), then greedy argmax or temperature / min_p /
// top_k / top_p and the philox exponential race, and the sampled token's
// logprob and rank, the target token's, and the top-K. top_k, top_p and
// top-K use a 4-pass 8-bit radix select over the row (counts or probability
// mass per bin) and a scan for ties, which go to the lower id.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace pagoda::cuda {

// Rows with a temperature below this are greedy.
constexpr float kGreedyTemperature = 1e-5f;

// Largest SamplingBatch::max_top_logprobs the kernel supports.
constexpr int kMaxTopLogprobs = 1024;
// Most CTAs per row.
constexpr int kMaxSampleGroups = 64;

// One row's settings; list ranges index the flat arrays of SampleParams.
struct SampleRowParams {
  uint64_t seed = 0;
  uint64_t step = 0;
  float temperature = 1.0f;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  int32_t top_k = 0;
  int32_t num_top_logprobs = 0;
  int32_t target_token = -1;
  int32_t penalty_begin = 0;  // [penalty_begin, penalty_end) of the penalty arrays
  int32_t penalty_end = 0;
  int32_t bias_begin = 0;     // [bias_begin, bias_end) of the bias arrays
  int32_t bias_end = 0;
  int32_t mask_begin = -1;    // first word of the row's mask in allowed_words; -1: none
};

// Whether a sampled row narrows its draw to a few tokens (top_k or top_p at
// a temperature that is not greedy): the rows of the candidate path.
__host__ __device__ inline bool sample_row_narrows(const SampleRowParams& rp, int64_t vocab) {
  return !(rp.temperature < kGreedyTemperature) &&
         ((rp.top_k > 0 && rp.top_k < vocab) || rp.top_p < 1.0f);
}

struct SampleRowResult {
  int32_t token = -1;
  int32_t rank = 0;
  int32_t target_rank = 0;       // 0 when the row has no target
  float logprob = 0.0f;
  float target_logprob = 0.0f;   // NaN when the row has no target
};

struct SampleParams {
  const float* logits = nullptr;  // [num_rows, vocab] f32 (rows of this launch)
  int64_t vocab = 0;
  int num_rows = 0;
  const SampleRowParams* rows = nullptr;  // [num_rows]
  const int32_t* penalty_tokens = nullptr;
  const int32_t* penalty_counts = nullptr;
  const uint8_t* penalty_in_prompt = nullptr;
  const int32_t* bias_tokens = nullptr;
  const float* bias_values = nullptr;
  const uint32_t* allowed_words = nullptr;  // masks of ceil(vocab / 32) words (SamplingBatch)
  // [num_rows, vocab]: processed rows (rows with bias or penalties; with
  // !sample_fewer_passes() also mask-only rows); unused by other rows.
  float* scratch = nullptr;
  int top_width = 0;              // K: row stride of top_ids / top_logprobs
  SampleRowResult* results = nullptr;  // [num_rows]
  int32_t* top_ids = nullptr;     // [num_rows, K]; past a row's num_top_logprobs: -1
  float* top_logprobs = nullptr;  // [num_rows, K]; past a row's num_top_logprobs: NaN
  // Cross-CTA scratch for G > 1: sample_group_scratch_bytes() bytes, zeroed
  // once by the owner (every launch leaves it as it found it). Null: G = 1.
  void* group_scratch = nullptr;
  size_t group_scratch_bytes = 0;
  // Rows of this launch for which sample_row_narrows(): a hint for the
  // split (sample_groups()); the results do not depend on it.
  int narrowing_rows = 0;
};

// Bytes of SampleParams::group_scratch for any launch on the current device.
size_t sample_group_scratch_bytes();

// G, the CTAs per row that launch_sample uses for num_rows rows of `vocab`
// on the current device: 1 when rows * 2 exceed the CTAs the device holds at
// once, else as many chunks of at least 4096 tokens as fit (at most
// kMaxSampleGroups), except 1 when some row narrows (`narrowing`:
// SampleParams::narrowing_rows > 0, with the fewer passes) and that G would
// be at most 4 (the candidate path at one CTA per row beats the split's
// radix passes there: the cost model in sampling_kernels.cu).
// PAGODA_SAMPLE_GROUPS=N in the environment asks for N instead (1: one CTA
// per row; larger N still capped by what fits at once and by chunks of at
// least 32 tokens) - for A/B timing and tests.
int sample_groups(int num_rows, int64_t vocab, bool narrowing = false);

// Whether launch_sample takes the fewer-pass path: a greedy row's argmax
// and log-sum-exp in one pass of 16-byte loads, no rank pass for a token
// whose logit is the row's max, no min_p probability in the top_k select
// when min_p is off, and top_k / top_p rows with one CTA drawn from the
// row's candidates in 3 passes (docs/cuda-backend.md "Candidates"; the
// radix passes when the candidates do not provably hold the selection) -
// and a mask-only row read through its mask instead of copied into
// scratch (launch_sample's caller need not chunk such rows) -
// the same results up to f64 rounding of the sums. True
// unless PAGODA_SAMPLE_KERNEL=old is in the environment (the previous
// passes, for A/B timing and tests).
bool sample_fewer_passes();

// Rows of sample_kernel by the path that served them, counted on the device
// (one atomic per row and counter) since the last take: lets tests check
// that data meant for a path reached it rather than a silent fallback.
struct SamplePathCounts {
  unsigned long long mask_on_the_fly = 0;   // mask-only rows read through their mask
  unsigned long long scratch = 0;           // rows processed into scratch (bias / penalties;
                                            // masks too with PAGODA_SAMPLE_KERNEL=old)
  unsigned long long candidates = 0;        // rows drawn from their candidates
  unsigned long long candidate_misses = 0;  // candidate-path rows left to the radix passes
  unsigned long long fused_races = 0;       // plain sampled rows decided in the sums' pass
  unsigned long long race_passes = 0;       // plain rows whose fused race left it to a pass
};

// The current device's counts (a synchronous copy; call with no sampling
// launch in flight), which it then zeroes.
cudaError_t take_sample_path_counts(SamplePathCounts& out);

// Samples every row: sample_groups() CTAs per row when p.group_scratch is
// set (cudaErrorInvalidValue if it is smaller than
// sample_group_scratch_bytes() and G > 1), else one.
cudaError_t launch_sample(const SampleParams& p, cudaStream_t stream);

// ids[rows[i]] = results[src_rows[i]].token for i < n, skipping entries with
// rows[i] outside [0, num_ids) or src_rows[i] outside [0, num_results): a
// pipelined step's input tokens taken from the previous step's samples.
cudaError_t launch_copy_sampled_tokens(const SampleRowResult* results, int num_results,
                                       const int32_t* rows, const int32_t* src_rows, int n,
                                       int32_t* ids, int64_t num_ids, cudaStream_t stream);

}  // namespace pagoda::cuda
