#include "sched/step_plan.h"

#include <algorithm>
#include <cassert>

namespace pagoda {

void StepPlan::add(const Sequence& seq, int32_t num_new_tokens, bool samples) {
  assert(num_new_tokens > 0 && num_new_tokens <= budget_);
  entries_.push_back({&seq, seq.num_computed_tokens, num_new_tokens, samples});
  budget_ -= num_new_tokens;
}

void StepPlan::add_preempted(RequestId request, std::span<const SeqId> seqs) {
  preempted_requests_.push_back(request);
  preempted_seqs_.insert(preempted_seqs_.end(), seqs.begin(), seqs.end());
}

void StepPlan::build(const KvManager& kv, ScheduleOutput& out) const {
  out.clear();
  const int32_t bs = kv.block_size();
  std::vector<Entry> order = entries_;
  std::stable_partition(order.begin(), order.end(),
                        [](const Entry& e) { return e.num_new_tokens == 1; });
  for (const Entry& e : order) {
    out.max_blocks_per_seq =
        std::max(out.max_blocks_per_seq, static_cast<int32_t>(kv.block_table(e.seq->id).size()));
    out.num_decode_seqs += e.num_new_tokens == 1;
  }
  out.query_start_loc.push_back(0);
  out.block_tables.assign(order.size() * out.max_blocks_per_seq, 0);
  const bool sliding = kv.has_sliding_group();
  if (sliding) out.sliding_block_tables.assign(order.size() * out.max_blocks_per_seq, kNullBlock);
  for (size_t i = 0; i < order.size(); ++i) {
    const Entry& e = order[i];
    std::span<const int32_t> table = kv.block_table(e.seq->id);
    std::copy(table.begin(), table.end(), out.block_tables.begin() + i * out.max_blocks_per_seq);
    std::span<const int32_t> sliding_table =
        sliding ? kv.sliding_block_table(e.seq->id) : std::span<const int32_t>{};
    std::copy(sliding_table.begin(), sliding_table.end(),
              out.sliding_block_tables.begin() + i * out.max_blocks_per_seq);
    ScheduledSeq s{e.seq->request_id,        e.seq->id, e.start, e.num_new_tokens,
                   e.seq->num_prompt_tokens, -1};
    // Drafts are scheduled whole and only with the sample after them
    // (Scheduler::fit_drafts): one logits row after the last real token and
    // after each draft.
    assert(e.seq->num_draft_tokens == 0 ||
           (e.samples && e.num_new_tokens > e.seq->num_draft_tokens));
    s.num_draft_tokens = e.samples ? e.seq->num_draft_tokens : 0;
    for (int32_t p = e.start; p < e.start + e.num_new_tokens; ++p) {
      out.token_ids.push_back(e.seq->tokens[p]);
      out.positions.push_back(p);
      out.slot_mapping.push_back(table[p / bs] * bs + p % bs);
      if (sliding) out.sliding_slot_mapping.push_back(sliding_table[p / bs] * bs + p % bs);
    }
    out.query_start_loc.push_back(out.num_tokens());
    out.seq_lens.push_back(e.start + e.num_new_tokens);
    if (e.samples) {
      s.logits_index = static_cast<int32_t>(out.logits_rows.size());
      for (int32_t j = s.num_draft_tokens; j >= 0; --j)
        out.logits_rows.push_back(out.num_tokens() - 1 - j);
    }
    out.seqs.push_back(s);
  }
  for (const BlockCopy& c : copies_) {
    const bool full = c.group == KvGroup::kFull;
    (full ? out.copy_src : out.sliding_copy_src).push_back(c.src);
    (full ? out.copy_dst : out.sliding_copy_dst).push_back(c.dst);
  }
  out.preempted_request_ids = preempted_requests_;
  out.preempted_seq_ids = preempted_seqs_;
}

}  // namespace pagoda
