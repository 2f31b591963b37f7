#include "greedy_driver.h"

#include <algorithm>

namespace pagoda::golden {
namespace {

struct Seq {
  std::vector<int32_t> tokens;  // prompt + generated
  int64_t num_computed = 0;     // tokens whose k/v are in the cache
  std::vector<int32_t> blocks;
  std::vector<StepRecord>* records = nullptr;
};

// Adds `n` tokens of `seq` to the step; returns whether they finish its known
// tokens (then its logits are sampled).
bool add_to_step(const Seq& seq, int64_t n, int bs, int32_t width, StepBatch* in) {
  const int64_t begin = in->token_ids.size();
  for (int64_t j = 0; j < n; ++j) {
    const int64_t pos = seq.num_computed + j;
    in->token_ids.push_back(seq.tokens[pos]);
    in->positions.push_back(static_cast<int32_t>(pos));
    in->slot_mapping.push_back(seq.blocks[pos / bs] * bs + static_cast<int32_t>(pos % bs));
  }
  in->query_start_loc.push_back(static_cast<int32_t>(begin + n));
  in->seq_lens.push_back(static_cast<int32_t>(seq.num_computed + n));
  for (int32_t b = 0; b < width; ++b)
    in->block_tables.push_back(b < static_cast<int32_t>(seq.blocks.size()) ? seq.blocks[b] : 0);
  return seq.num_computed + n == static_cast<int64_t>(seq.tokens.size());
}

}  // namespace

Status run_greedy(ModelRunner& runner, const std::vector<std::vector<int32_t>>& prompts,
                  const DriverOptions& options, std::vector<std::vector<StepRecord>>* out) {
  const int bs = runner.block_size();
  out->assign(prompts.size(), {});
  std::vector<Seq> seqs(prompts.size());
  int64_t per_seq = 0;
  for (const auto& p : prompts)
    per_seq = std::max(per_seq, blocks_for(static_cast<int64_t>(p.size()) + options.num_steps, bs));
  for (size_t i = 0; i < prompts.size(); ++i) {
    seqs[i].tokens = prompts[i];
    seqs[i].records = &(*out)[i];
    for (int64_t b = 0; b < per_seq; ++b)
      seqs[i].blocks.push_back(static_cast<int32_t>(i * per_seq + b));
    if (options.reverse_blocks) std::reverse(seqs[i].blocks.begin(), seqs[i].blocks.end());
  }
  const int64_t budget = std::min<int64_t>(options.token_budget, runner.max_num_batched_tokens());
  for (;;) {
    StepBatch in;
    in.max_blocks_per_seq = static_cast<int32_t>(per_seq);
    in.query_start_loc = {0};
    in.sampling.max_top_logprobs = options.num_top_logprobs;
    std::vector<std::pair<Seq*, int64_t>> scheduled;  // sequence, tokens this step
    std::vector<Seq*> sampled;
    for (Seq& s : seqs) {
      if (static_cast<int>(s.records->size()) >= options.num_steps) continue;
      const int64_t left = budget - static_cast<int64_t>(in.token_ids.size());
      const int64_t pending = static_cast<int64_t>(s.tokens.size()) - s.num_computed;
      const int64_t n = std::min({pending, static_cast<int64_t>(options.prefill_chunk), left});
      if (n <= 0) continue;
      if (add_to_step(s, n, bs, in.max_blocks_per_seq, &in)) {
        in.logits_rows.push_back(in.query_start_loc.back() - 1);
        SamplingRow row;
        row.temperature = 0.0f;
        row.num_top_logprobs = options.num_top_logprobs;
        in.sampling.rows.push_back(row);
        sampled.push_back(&s);
      }
      scheduled.push_back({&s, n});
    }
    if (scheduled.empty()) return {};
    SampleOutput result;
    PAGODA_RETURN_IF_ERROR(runner.execute(in, &result));
    for (auto& [s, n] : scheduled) s->num_computed += n;
    const int k = options.num_top_logprobs;
    for (size_t r = 0; r < sampled.size(); ++r) {
      StepRecord rec;
      rec.token = result.token_ids[r];
      rec.top_ids.assign(result.top_ids.begin() + r * k, result.top_ids.begin() + (r + 1) * k);
      rec.top_logprobs.assign(result.top_logprobs.begin() + r * k,
                              result.top_logprobs.begin() + (r + 1) * k);
      sampled[r]->records->push_back(std::move(rec));
      sampled[r]->tokens.push_back(result.token_ids[r]);
    }
  }
}

}  // namespace pagoda::golden
