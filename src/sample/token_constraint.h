// A rule over which tokens a sequence may sample next (structured output).
// The engine keeps one TokenConstraint per sample, asks it for the allowed
// tokens of every step (the sampler's mask, batch/sampling_batch.h) and
// advances it by each sampled token. The grammar module implements it; the
// engine knows only this interface.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace pagoda {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // Sets in `words` (the packed mask of sample/token_mask.h over the logits'
  // vocabulary: ceil(V / 32) words, zeroed by the caller) every token that
  // may come next. The end-of-sequence tokens the constraint was compiled
  // with are set exactly when the output so far is complete. Never leaves
  // the mask empty for a constraint that is not finished (is_finished()).
  // The engine may call it on distinct states of one CompiledConstraint
  // from several threads at once (engine/constraint_masks.h).
  virtual void fill_next_mask(std::span<uint32_t> words) const = 0;
  // Advances over a sampled token. false when the token is not allowed (the
  // state is then unchanged). An end-of-sequence token is accepted when the
  // output is complete.
  virtual bool accept(int32_t token) = 0;
  // Whether nothing but the end of the sequence may follow: the output is
  // complete and cannot be extended (the engine finishes the sample).
  virtual bool is_finished() const = 0;
  // An independent copy of the state (n > 1 samples fork from one prompt).
  virtual std::unique_ptr<TokenConstraint> clone() const = 0;
  // fill_next_mask's words as an immutable mask shared by every state that
  // has it (a grammar's mask cached per state), so that the engine builds
  // each distinct mask of a step once: the words are exactly `base`'s (at
  // most ceil(V / 32) words; words past its end are 0) with the ids of
  // `extra` (if set) added. States with equal (base pointer, extra pointer)
  // have equal masks. A null base (this default): not shared, the engine
  // calls fill_next_mask.
  struct SharedMask {
    std::shared_ptr<const std::vector<uint32_t>> base;
    const std::vector<int32_t>* extra = nullptr;
  };
  virtual SharedMask shared_next_mask() const { return {}; }
  // The bytes every continuation of the output so far must start with, at
  // most max_bytes of them: "" when the next byte is not forced, when the
  // output may end here, or when the constraint cannot tell (this default).
  // The engine's jump-forward appends them without sampling
  // (docs/structured-output.md).
  virtual std::string forced_bytes(size_t max_bytes) const {
    (void)max_bytes;
    return {};
  }
};

// A compiled constraint, shared by the requests that use it (cached by the
// compiler); start() gives the state of an empty output. Thread-safe.
class CompiledConstraint {
 public:
  virtual ~CompiledConstraint() = default;
  virtual std::unique_ptr<TokenConstraint> start() const = 0;
};

}  // namespace pagoda
