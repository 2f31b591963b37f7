#include "sample/reasoning_gate.h"

#include <algorithm>
#include <cassert>
#include <utility>

namespace pagoda {

namespace {

struct GateConfig {
  std::shared_ptr<const CompiledConstraint> inner;
  ReasoningGateOptions options;
};

// Sets the bits of ids [0, vocab_size) in `words`.
void fill_all(std::span<uint32_t> words, int64_t vocab_size) {
  for (size_t i = 0; i < words.size(); ++i) {
    const int64_t first = static_cast<int64_t>(i) * 32;
    if (first + 32 <= vocab_size) {
      words[i] = ~0u;
    } else if (first < vocab_size) {
      words[i] |= (1u << (vocab_size - first)) - 1u;
    }
  }
}

// One sample's state: opening (the first token decides whether the output
// reasons; only with ReasoningGateOptions::open_id), reasoning (every token
// allowed; watching for the end ids), or answering (the inner constraint).
class ReasoningGateState final : public TokenConstraint {
 public:
  enum class Phase { kOpening, kReasoning, kAnswering };

  ReasoningGateState(std::shared_ptr<const GateConfig> config, Phase phase)
      : config_(std::move(config)), phase_(phase) {
    if (phase_ == Phase::kOpening) inner_ = config_->inner->start();
  }

  ReasoningGateState(const ReasoningGateState& other)
      : config_(other.config_),
        phase_(other.phase_),
        recent_(other.recent_),
        inner_(other.inner_ ? other.inner_->clone() : nullptr) {}

  void fill_next_mask(std::span<uint32_t> words) const override {
    switch (phase_) {
      case Phase::kOpening:
        inner_->fill_next_mask(words);
        set_bit(words, *config_->options.open_id);
        return;
      case Phase::kReasoning:
        fill_all(words, config_->options.vocab_size);
        return;
      case Phase::kAnswering:
        inner_->fill_next_mask(words);
        return;
    }
  }

  bool accept(int32_t token) override {
    switch (phase_) {
      case Phase::kOpening:
        if (token == *config_->options.open_id) {
          inner_.reset();
          phase_ = Phase::kReasoning;
          return true;
        }
        if (!inner_->accept(token)) return false;
        phase_ = Phase::kAnswering;
        return true;
      case Phase::kReasoning:
        if (token < 0 || token >= config_->options.vocab_size) return false;
        note_reasoning_token(token);
        return true;
      case Phase::kAnswering:
        return inner_->accept(token);
    }
    return false;
  }

  bool is_finished() const override { return phase_ == Phase::kAnswering && inner_->is_finished(); }

  std::unique_ptr<TokenConstraint> clone() const override {
    return std::make_unique<ReasoningGateState>(*this);
  }

 private:
  static void set_bit(std::span<uint32_t> words, int32_t id) {
    assert(static_cast<size_t>(id >> 5) < words.size());
    words[static_cast<size_t>(id) >> 5] |= 1u << (id & 31);
  }

  // Keeps the last end_ids.size() tokens; once they are the end ids, the
  // answer starts under the inner constraint.
  void note_reasoning_token(int32_t token) {
    const auto& end = config_->options.end_ids;
    recent_.push_back(token);
    if (recent_.size() > end.size()) recent_.erase(recent_.begin());
    if (recent_ != end) return;
    recent_.clear();
    inner_ = config_->inner->start();
    phase_ = Phase::kAnswering;
  }

  std::shared_ptr<const GateConfig> config_;
  Phase phase_;
  std::vector<int32_t> recent_;             // kReasoning: the last tokens, at most end_ids.size()
  std::unique_ptr<TokenConstraint> inner_;  // kOpening, kAnswering: the inner constraint's state
};

class ReasoningGate final : public CompiledConstraint {
 public:
  explicit ReasoningGate(std::shared_ptr<const GateConfig> config) : config_(std::move(config)) {}

  std::unique_ptr<TokenConstraint> start() const override {
    const auto phase = config_->options.open_id ? ReasoningGateState::Phase::kOpening
                                                : ReasoningGateState::Phase::kReasoning;
    return std::make_unique<ReasoningGateState>(config_, phase);
  }

 private:
  std::shared_ptr<const GateConfig> config_;
};

}  // namespace

std::shared_ptr<const CompiledConstraint> make_reasoning_gate(
    std::shared_ptr<const CompiledConstraint> inner, ReasoningGateOptions options) {
  assert(inner != nullptr && !options.end_ids.empty() && options.vocab_size > 0);
  auto config = std::make_shared<GateConfig>(GateConfig{std::move(inner), std::move(options)});
  return std::make_shared<ReasoningGate>(std::move(config));
}

}  // namespace pagoda
