// Test doubles of the structured-output interface (sample/token_constraint.h)
// for the engine tests: a constraint over a token-level automaton (the
// grammar module's byte-level one is not needed to test the engine's part).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/engine_api.h"
#include "sample/token_constraint.h"

namespace pagoda::test {

// A deterministic automaton over token ids: next[s] maps each token allowed
// in state s to the following state; in an accepting state the output may
// end (the EOS ids are allowed there). State 0 is the start.
struct TokenAutomaton {
  std::vector<std::map<int32_t, int32_t>> next;
  std::vector<bool> accepting;
  std::vector<int32_t> eos;
  int64_t vocab_size = 0;

  // Exactly the token sequences `sequences` (a trie; none may be empty).
  static TokenAutomaton sequences(const std::vector<std::vector<int32_t>>& sequences,
                                  std::vector<int32_t> eos, int64_t vocab_size);
  // Up to `max_len` tokens alternating between `even` (at positions 0, 2,
  // ...) and `odd`, ending only after an even number >= 2 of them: a
  // language random weights wander through but always finish.
  static TokenAutomaton alternating(std::vector<int32_t> even, std::vector<int32_t> odd,
                                    int32_t max_len, std::vector<int32_t> eos, int64_t vocab_size);

  bool is_eos(int32_t t) const;
  // Why `tokens` (an output, EOS included when sampled) break the automaton
  // or a finish of `finish` after them: "" when they follow it. kStop means
  // an EOS after an accepting state, or an accepting state with no way on
  // (the constraint finished); kLength: `max_tokens` tokens, any state.
  std::string check(std::span<const int32_t> tokens, FinishReason finish, int32_t max_tokens) const;
};

struct ConstraintCounters {
  int64_t fills = 0;    // fill_next_mask calls
  int64_t accepts = 0;  // accept calls
};

// A token's bytes (Tokenizer::token_bytes), for forced_bytes().
using TokenBytesFn = std::function<std::string(int32_t)>;

// The CompiledConstraint of an automaton. `refuse_at`: accept() refuses its
// (refuse_at + 1)-th token of a sample (a masking bug); `counters`: calls
// counted over every state (engine-thread only, unless many rows compute
// masks in parallel: then only read the totals after the run).
// `token_bytes`: when set, forced_bytes() is the bytes of the tokens along
// the automaton's only path from a state that cannot end (else "").
class AutomatonConstraint final : public CompiledConstraint {
 public:
  explicit AutomatonConstraint(TokenAutomaton automaton,
                               std::optional<int32_t> refuse_at = std::nullopt,
                               TokenBytesFn token_bytes = {});
  std::unique_ptr<TokenConstraint> start() const override;
  const TokenAutomaton& automaton() const { return *automaton_; }
  std::shared_ptr<ConstraintCounters> counters() const { return counters_; }

 private:
  std::shared_ptr<const TokenAutomaton> automaton_;
  std::optional<int32_t> refuse_at_;
  std::shared_ptr<ConstraintCounters> counters_;
  std::shared_ptr<const TokenBytesFn> token_bytes_;
};

}  // namespace pagoda::test
