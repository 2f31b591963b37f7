// A Runner that forwards every call to another one (the runner the engine
// loaded), for tests that wrap it to change one thing: derive and override
// the calls you change (launch, collect, ...); call ForwardingRunner's to
// forward. Owns the inner runner.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/runner.h"

namespace pagoda::test {

class ForwardingRunner : public Runner {
 public:
  explicit ForwardingRunner(std::unique_ptr<Runner> inner) : inner_(std::move(inner)) {}

  int64_t num_kv_blocks() const override { return inner_->num_kv_blocks(); }
  int64_t num_sliding_kv_blocks() const override { return inner_->num_sliding_kv_blocks(); }
  const std::string& kv_sizing() const override { return inner_->kv_sizing(); }
  int64_t kv_block_bytes() const override { return inner_->kv_block_bytes(); }
  int64_t sliding_kv_block_bytes() const override { return inner_->sliding_kv_block_bytes(); }
  DType kv_cache_dtype() const override { return inner_->kv_cache_dtype(); }
  const std::string& kv_scales_source() const override { return inner_->kv_scales_source(); }
  int block_size() const override { return inner_->block_size(); }
  int64_t max_model_len() const override { return inner_->max_model_len(); }
  int64_t max_num_batched_tokens() const override { return inner_->max_num_batched_tokens(); }
  int64_t max_num_seqs() const override { return inner_->max_num_seqs(); }
  const std::vector<int64_t>& decode_graph_sizes() const override {
    return inner_->decode_graph_sizes();
  }
  int64_t last_graph_batch_size() const override { return inner_->last_graph_batch_size(); }
  double last_step_wait_seconds() const override { return inner_->last_step_wait_seconds(); }
  // Through launch() and collect(), so a subclass that overrides those two
  // sees synchronous steps too.
  Status execute(const StepBatch& step, SampleOutput* out) override {
    PAGODA_RETURN_IF_ERROR(launch(step, 0));
    return collect(0, out);
  }
  Status launch(const StepBatch& step, int slot) override { return inner_->launch(step, slot); }
  Status collect(int slot, SampleOutput* out) override { return inner_->collect(slot, out); }
  Status launch_sampling(int slot, const SamplingBatch& batch) override {
    return inner_->launch_sampling(slot, batch);
  }
  Status execute_logits(const StepBatch& step, std::vector<float>* logits) override {
    return inner_->execute_logits(step, logits);
  }

 private:
  std::unique_ptr<Runner> inner_;
};

}  // namespace pagoda::test
