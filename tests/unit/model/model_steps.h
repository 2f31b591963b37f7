// StepBatch builders for the model unit tests: one step over sequences with
// their block tables, as the scheduler would send it.
#pragma once

#include <cstdint>
#include <vector>

#include "batch/step_batch.h"

namespace pagoda::test {

struct SeqStep {
  std::vector<int32_t> tokens;  // the new tokens
  int32_t num_cached = 0;
  std::vector<int32_t> table;
};

// One step over `seqs` (block size `bs`, table width `width`), sampling the
// last row of each sequence with default (random) sampling.
inline StepBatch make_step(const std::vector<SeqStep>& seqs, int bs, int32_t width) {
  StepBatch in;
  in.query_start_loc = {0};
  in.max_blocks_per_seq = width;
  for (const SeqStep& s : seqs) {
    for (size_t j = 0; j < s.tokens.size(); ++j) {
      const int32_t pos = s.num_cached + static_cast<int32_t>(j);
      in.token_ids.push_back(s.tokens[j]);
      in.positions.push_back(pos);
      in.slot_mapping.push_back(s.table[pos / bs] * bs + pos % bs);
    }
    in.query_start_loc.push_back(static_cast<int32_t>(in.token_ids.size()));
    in.seq_lens.push_back(s.num_cached + static_cast<int32_t>(s.tokens.size()));
    for (int32_t b = 0; b < width; ++b)
      in.block_tables.push_back(b < (int32_t)s.table.size() ? s.table[b] : 0);
    in.logits_rows.push_back(in.query_start_loc.back() - 1);
    in.sampling.rows.push_back(SamplingRow{});
  }
  return in;
}

}  // namespace pagoda::test
