// Masked rows (issue 17, constrained decoding) on the fewer-pass path: a
// row with a mask alone is read through its mask (no scratch copy, every
// row in one launch), a masked row with bias or penalties still goes through
// the processed-row scratch. Rows {1, 3, 64, 256} x vocabularies {1000,
// 151936}: masks allowing a random half, a random 1%, or one token, mixed
// with unmasked rows in one batch, over greedy (the masked argmax),
// temperature, min_p, top_k, top_p and their mix, targets and top-K, with
// and without bias / penalties; against the CPU reference and against
// PAGODA_SAMPLE_KERNEL=old (which masks into scratch), and the kernel's
// path counts must show every mask-only row read on the fly and the
// candidate path (one CTA per row) taking the masked narrowing rows it is
// meant for.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "backend/cuda/sampling_kernels.h"
#include "sampling_test_util.h"
#include "test_util.h"

namespace pagoda::gpu_test {
namespace {

enum class MaskKind { kHalf, kOnePercent, kOne, kNone };

// The settings cycled over the rows.
SamplingRow mask_setting(int i, int64_t vocab) {
  SamplingRow r;
  r.seed = static_cast<uint64_t>(rng()());
  r.step = static_cast<uint64_t>(uniform_ints(1, 0, 1000)[0]);
  switch (i % 6) {
    case 0:  // the masked argmax
      r.temperature = 0.0f;
      r.num_top_logprobs = 3;
      r.target_token = uniform_ints(1, 0, static_cast<int32_t>(vocab - 1))[0];
      break;
    case 1:
      r.temperature = 0.8f;
      break;
    case 2:
      r.temperature = 0.8f;
      r.top_k = 50;
      break;
    case 3:
      r.temperature = 0.8f;
      r.top_p = 0.9f;
      r.num_top_logprobs = 2;
      break;
    case 4:
      r.temperature = 1.0f;
      r.min_p = 0.1f;
      break;
    default:
      r.temperature = 0.7f;
      r.top_k = 40;
      r.top_p = 0.8f;
      break;
  }
  return r;
}

std::vector<int32_t> allowed_tokens(MaskKind kind, int64_t vocab) {
  std::vector<int32_t> ids;
  if (kind == MaskKind::kOne) return {uniform_ints(1, 0, static_cast<int32_t>(vocab - 1))[0]};
  const int per_hundred = kind == MaskKind::kHalf ? 50 : 1;
  for (int32_t t : uniform_ints(static_cast<size_t>(vocab), 0, 99)) ids.push_back(t);
  std::vector<int32_t> out;
  for (int64_t t = 0; t < vocab; ++t)
    if (ids[static_cast<size_t>(t)] < per_hundred) out.push_back(static_cast<int32_t>(t));
  if (out.empty()) out.push_back(0);
  return out;
}

void run_masked(int64_t vocab, int64_t num_rows) {
  const std::string what = "V=" + std::to_string(vocab) + " rows=" + std::to_string(num_rows);
  SCOPED_TRACE(what);
  const std::vector<float> logits = normal(static_cast<size_t>(num_rows * vocab), 0.0f, 3.0f);
  SamplingBatch batch;
  batch.max_top_logprobs = 3;
  batch.mask_words = static_cast<int32_t>((vocab + 31) / 32);
  uint64_t mask_only = 0, with_lists = 0, narrowing_mask_only = 0;
  for (int64_t r = 0; r < num_rows; ++r) {
    const auto kind = static_cast<MaskKind>(r % 4);
    const SamplingRow row = mask_setting(static_cast<int>(r + r / 4), vocab);
    RowLists lists;
    const bool lists_row = r % 5 == 3;
    if (lists_row) {  // bias and penalties: the scratch path (masked or not)
      lists = penalties(20, vocab);
      for (int32_t t : distinct_tokens(3, vocab)) {
        if (std::find(lists.pen_tokens.begin(), lists.pen_tokens.end(), t) !=
            lists.pen_tokens.end())
          continue;
        lists.bias_tokens.push_back(t);
        lists.bias_values.push_back(3.0f);
      }
    }
    SamplingRow settings = row;
    if (lists_row) {
      settings.repetition_penalty = 1.2f;
      settings.presence_penalty = 0.4f;
      settings.frequency_penalty = 0.2f;
    }
    add_row(batch, settings, lists);
    if (kind == MaskKind::kNone) {
      batch.mask_index.push_back(-1);
    } else {
      const std::vector<uint32_t> words = pack_mask(allowed_tokens(kind, vocab), vocab);
      batch.mask_index.push_back(
          static_cast<int32_t>(batch.allowed_words.size() / static_cast<size_t>(batch.mask_words)));
      batch.allowed_words.insert(batch.allowed_words.end(), words.begin(), words.end());
    }
    if (lists_row) {
      ++with_lists;
    } else if (kind != MaskKind::kNone) {
      ++mask_only;
      // Narrowing rows the candidate path must decide (masked tokens are
      // never candidates, so even top_k 50 of one allowed token is).
      const bool narrows = row.temperature > 0.0f && (row.top_k > 0 || row.top_p < 1.0f);
      if (narrows) ++narrowing_mask_only;
    }
  }
  const cuda::SamplePathCounts counts =
      expect_both_paths_match_cpu(logits, num_rows, vocab, batch, what);
  CudaBackend& gpu = *cuda_backend(DType::kBF16);
  SampleOutput out = run_sample(gpu, logits, num_rows, vocab, batch);
  expect_allowed(out, batch);
  EXPECT_EQ(counts.mask_on_the_fly, mask_only) << what;
  EXPECT_EQ(counts.scratch, with_lists) << what;
  if (cuda::sample_groups(static_cast<int>(num_rows), vocab, /*narrowing=*/true) == 1) {
    EXPECT_GE(counts.candidates, narrowing_mask_only) << what;
  }
}

TEST(CudaSamplingTest, MasksOnTheFlyMatchCpu) {
  PAGODA_REQUIRE_GPU();
  for (int64_t vocab : {1000, 151936}) {
    for (int64_t rows : {1, 3, 64, 256}) run_masked(vocab, rows);
  }
  {  // one CTA per row at every batch: the candidate path over masked rows
    ScopedGroups env("1");
    run_masked(151936, 64);
    run_masked(1000, 3);
  }
}

}  // namespace
}  // namespace pagoda::gpu_test
