// constraint_mask_bench: the engine's host cost per step of structured-output
// masks at a 128,256-token vocabulary (Llama 3) for batches of 1 to 256
// constrained rows: ConstraintMasks::compute (zeroed words, the constraint's
// fill, the allowed_token_ids intersection) plus appending the rows to a
// SamplingBatch (hash, dedupe, copy), as RowPlanner::plan does.
//
// The constraint is a stand-in whose fill copies a precomputed mask and then
// spins for `fill_us` (0: the engine's own cost; 20: a grammar's mask that is
// not cached). "distinct": every row in its own state (no two masks equal);
// "shared": all rows in one state (one mask stored). Run with
// PAGODA_NUM_THREADS=1 to see the serial cost; the default uses every core.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "engine/constraint_masks.h"
#include "sample/sampling_rows.h"
#include "sample/token_mask.h"

namespace pagoda {
namespace {

constexpr int64_t kVocab = 128256;
constexpr int kSteps = 50;

class CopyConstraint final : public TokenConstraint {
 public:
  CopyConstraint(std::vector<uint32_t> mask, double fill_us)
      : mask_(std::move(mask)), fill_us_(fill_us) {}
  void fill_next_mask(std::span<uint32_t> words) const override {
    const auto start = std::chrono::steady_clock::now();
    std::copy(mask_.begin(), mask_.end(), words.begin());
    while (std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
               .count() < fill_us_) {
    }
  }
  bool accept(int32_t) override { return true; }
  bool is_finished() const override { return false; }
  std::unique_ptr<TokenConstraint> clone() const override {
    return std::make_unique<CopyConstraint>(*this);
  }

 private:
  std::vector<uint32_t> mask_;
  double fill_us_;
};

// A mask allowing about one token in `stride`, shifted by `salt` so that
// masks of different salts differ.
std::vector<uint32_t> pattern(int64_t stride, int64_t salt) {
  std::vector<int32_t> ids;
  for (int64_t t = salt % stride; t < kVocab; t += stride) ids.push_back(static_cast<int32_t>(t));
  return pack_token_mask(ids, kVocab);
}

// Median microseconds per step (the median resists other load on the host).
double us_per_step(int rows, bool distinct, double fill_us) {
  std::vector<std::unique_ptr<TokenConstraint>> states;
  for (int r = 0; r < rows; ++r)
    states.push_back(std::make_unique<CopyConstraint>(pattern(7, distinct ? r : 0), fill_us));
  ConstraintMasks masks(kVocab);
  SamplingBatch batch;
  SamplingParams params;
  const std::vector<int32_t> eos = {0}, none;
  std::vector<double> us;
  for (int s = 0; s < kSteps; ++s) {
    const auto start = std::chrono::steady_clock::now();
    masks.clear();
    batch.clear();
    for (const auto& c : states) masks.add(*c, {});
    masks.compute();
    for (int r = 0; r < rows; ++r)
      append_sampling_row(batch, params, eos,
                          {none, none, 7, nullptr, masks.mask(static_cast<size_t>(r))});
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::nth_element(us.begin(), us.begin() + kSteps / 2, us.end());
  return us[kSteps / 2];
}

}  // namespace
}  // namespace pagoda

int main() {
  std::printf("structured-output masks per step, vocab %lld, %d threads, median of %d steps (us)\n",
              static_cast<long long>(pagoda::kVocab), pagoda::num_cpu_threads(), pagoda::kSteps);
  std::printf("%6s %10s %14s %14s\n", "rows", "fill us", "distinct", "shared");
  for (double fill_us : {0.0, 20.0}) {
    for (int rows : {1, 8, 32, 256}) {
      std::printf("%6d %10.0f %14.1f %14.1f\n", rows, fill_us,
                  pagoda::us_per_step(rows, true, fill_us),
                  pagoda::us_per_step(rows, false, fill_us));
    }
  }
  return 0;
}
