// One step's decisions while the scheduler makes them (budget left, planned
// sequences, copy-on-write pairs, preemptions), flattened at the end into a
// ScheduleOutput.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kv/kv_manager.h"
#include "sched/request.h"
#include "sched/schedule_output.h"

namespace pagoda {

class StepPlan {
 public:
  struct Entry {
    const Sequence* seq = nullptr;  // owned by the scheduler, stable for the step
    int32_t start = 0;              // seq->num_computed_tokens when planned
    int32_t num_new_tokens = 0;
    bool samples = false;
  };

  explicit StepPlan(int32_t token_budget) : budget_(token_budget) {}

  int32_t budget() const { return budget_; }
  const std::vector<Entry>& entries() const { return entries_; }
  bool preempted_any() const { return !preempted_requests_.empty(); }
  std::vector<BlockCopy>& copies() { return copies_; }

  // Plans num_new_tokens (> 0, <= budget()) for seq from its computed count.
  void add(const Sequence& seq, int32_t num_new_tokens, bool samples);
  void add_preempted(RequestId request, std::span<const SeqId> seqs);

  // Writes the step's model input into `out` (cleared first; its vectors'
  // capacity is reused); block tables are read from kv as they are now.
  void build(const KvManager& kv, ScheduleOutput& out) const;

 private:
  int32_t budget_;
  std::vector<Entry> entries_;
  std::vector<BlockCopy> copies_;
  std::vector<RequestId> preempted_requests_;
  std::vector<SeqId> preempted_seqs_;
};

}  // namespace pagoda
