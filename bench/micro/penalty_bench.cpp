// penalty_bench: the host cost of building one penalised sampling row per
// decode step, at output lengths 16, 256, 4096 and 16384.
//
// "incremental" is what the engine does: the sequence's PenaltyCounts get
// the new token (PenaltyCounts::add) and the row copies its D distinct ids
// out; "recount" is the from-scratch count of prompt + output every step
// (SeqSamplingState without penalty_counts). The prompt covers every id the
// output draws from, so D is the same at every length and the incremental
// column should stay flat while the recount grows with the output.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "sample/penalty_counts.h"
#include "sample/sampling_rows.h"

namespace pagoda {
namespace {

constexpr int32_t kDistinct = 2000;  // ids the prompt and the output use
constexpr int kSteps = 200;          // decode steps timed per length

// Mean nanoseconds per step of kSteps decode steps that start at output
// length `length`.
double ns_per_step(int64_t length, bool incremental) {
  SamplingParams params;
  params.repetition_penalty = 1.1f;
  params.presence_penalty = 0.5f;
  params.frequency_penalty = 0.5f;
  const std::vector<int32_t> eos = {0};
  std::vector<int32_t> prompt(2 * kDistinct);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int32_t>(i % kDistinct);
  std::mt19937 rng(42);
  std::uniform_int_distribution<int32_t> token(0, kDistinct - 1);
  std::vector<int32_t> outputs(static_cast<size_t>(length));
  for (int32_t& t : outputs) t = token(rng);
  outputs.reserve(outputs.size() + kSteps);
  PenaltyCounts counts;
  counts.rebuild(prompt, outputs, penalises_prompt(params));
  SamplingBatch batch;
  const auto start = std::chrono::steady_clock::now();
  for (int s = 0; s < kSteps; ++s) {
    const int32_t t = token(rng);
    outputs.push_back(t);
    batch.clear();
    if (incremental) {
      counts.add(t);
      append_sampling_row(batch, params, eos, {prompt, outputs, 7, &counts});
    } else {
      append_sampling_row(batch, params, eos, {prompt, outputs, 7});
    }
  }
  const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  return ns / kSteps;
}

}  // namespace
}  // namespace pagoda

int main() {
  std::printf("penalised sampling row, %d distinct ids (prompt %d tokens), mean of %d steps\n",
              pagoda::kDistinct, 2 * pagoda::kDistinct, pagoda::kSteps);
  std::printf("%14s %18s %18s\n", "output length", "incremental us", "recount us");
  for (int64_t length : {16, 256, 4096, 16384}) {
    const double inc = pagoda::ns_per_step(length, true);
    const double full = pagoda::ns_per_step(length, false);
    std::printf("%14lld %18.2f %18.2f\n", static_cast<long long>(length), inc / 1e3, full / 1e3);
  }
  return 0;
}
