// A fixed script of steps (chunked prefill, a mixed step, decodes) run on a
// ModelRunner, recording its logits and greedy tokens, so the parallel
// tests (tensor_parallel_test, pipeline_parallel_test) can compare N ranks
// or stages against one runner.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "model/model_runner.h"
#include "model_steps.h"

namespace pagoda::test {

// What one runner produced over the script.
struct Trace {
  std::string error;
  std::vector<std::vector<float>> logits;    // execute_logits, per step
  std::vector<std::vector<int32_t>> tokens;  // execute (greedy), per step
  int64_t num_kv_blocks = 0, kv_block_bytes = 0, max_model_len = 0;
};

constexpr int kScriptBlockSize = 4;

inline RunnerOptions script_options() {
  RunnerOptions o;
  o.block_size = kScriptBlockSize;
  o.num_kv_blocks = 16;
  o.max_model_len = 16;
  o.max_num_batched_tokens = 32;
  o.max_num_seqs = 4;
  return o;
}

// Two sequences over paged KV (block size 4): A's 7-token prompt in two
// chunks and B's 5-token prompt; step 1 prefills A's first chunk and all of
// B, step 2 mixes B's first decode with A's last chunk, then six decode
// steps of both. Each step runs execute_logits then execute (greedy). The
// decode inputs are the runner's own samples, or with `feed` the tokens
// feed->tokens[step] (a pipeline stage that samples nothing runs the steps
// the last stage would; every stage gets the same steps).
inline Trace run_script(ModelRunner& r, int64_t vocab, const Trace* feed = nullptr) {
  constexpr int bs = kScriptBlockSize;
  Trace t;
  t.num_kv_blocks = r.num_kv_blocks();
  t.kv_block_bytes = r.kv_block_bytes();
  t.max_model_len = r.max_model_len();
  auto tok = [&](int32_t x) { return static_cast<int32_t>(x % vocab); };
  const std::vector<int32_t> a = {tok(3), tok(17), tok(42), tok(5), tok(88), tok(61), tok(9)};
  const std::vector<int32_t> b = {tok(1), tok(70), tok(33), tok(21), tok(96)};
  const std::vector<int32_t> ta = {0, 1, 2, 3}, tb = {8, 9, 10, 11};
  auto run = [&](StepBatch step) -> std::vector<int32_t> {
    for (SamplingRow& row : step.sampling.rows) row.temperature = 0.0f;
    std::vector<float> logits;
    SampleOutput out;
    Status st = r.execute_logits(step, &logits);
    if (st.ok()) st = r.execute(step, &out);
    if (!st.ok()) {
      t.error = st.error().message;
      return {};
    }
    t.logits.push_back(std::move(logits));
    t.tokens.push_back(out.token_ids);
    if (feed == nullptr) return out.token_ids;
    const size_t i = t.tokens.size() - 1;
    return i < feed->tokens.size() ? feed->tokens[i] : std::vector<int32_t>{};
  };
  std::vector<int32_t> s = run(make_step({{{a.begin(), a.begin() + 4}, 0, ta}, {b, 0, tb}}, bs, 4));
  if (s.size() != 2) return t;
  int32_t next_b = s[1];
  s = run(make_step({{{next_b}, 5, tb}, {{a.begin() + 4, a.end()}, 4, ta}}, bs, 4));
  if (s.size() != 2) return t;
  int32_t len_a = 7, len_b = 6;
  int32_t next_a = s[1];
  next_b = s[0];
  for (int i = 0; i < 6; ++i) {
    s = run(make_step({{{next_a}, len_a, ta}, {{next_b}, len_b, tb}}, bs, 4));
    if (s.size() != 2) return t;
    next_a = s[0];
    next_b = s[1];
    ++len_a;
    ++len_b;
  }
  return t;
}

}  // namespace pagoda::test
