#include "constraint_doubles.h"

#include <algorithm>
#include <atomic>

namespace pagoda::test {

TokenAutomaton TokenAutomaton::sequences(const std::vector<std::vector<int32_t>>& sequences,
                                         std::vector<int32_t> eos, int64_t vocab_size) {
  TokenAutomaton a;
  a.eos = std::move(eos);
  a.vocab_size = vocab_size;
  a.next.emplace_back();
  a.accepting.push_back(false);
  for (const auto& seq : sequences) {
    int32_t s = 0;
    for (int32_t t : seq) {
      auto it = a.next[static_cast<size_t>(s)].find(t);
      if (it == a.next[static_cast<size_t>(s)].end()) {
        const auto fresh = static_cast<int32_t>(a.next.size());
        a.next[static_cast<size_t>(s)].emplace(t, fresh);
        a.next.emplace_back();
        a.accepting.push_back(false);
        s = fresh;
      } else {
        s = it->second;
      }
    }
    a.accepting[static_cast<size_t>(s)] = true;
  }
  return a;
}

TokenAutomaton TokenAutomaton::alternating(std::vector<int32_t> even, std::vector<int32_t> odd,
                                           int32_t max_len, std::vector<int32_t> eos,
                                           int64_t vocab_size) {
  TokenAutomaton a;
  a.eos = std::move(eos);
  a.vocab_size = vocab_size;
  for (int32_t i = 0; i <= max_len; ++i) {
    std::map<int32_t, int32_t> out;
    if (i < max_len) {
      for (int32_t t : i % 2 == 0 ? even : odd) out.emplace(t, i + 1);
    }
    a.next.push_back(std::move(out));
    a.accepting.push_back(i >= 2 && i % 2 == 0);
  }
  return a;
}

bool TokenAutomaton::is_eos(int32_t t) const {
  return std::find(eos.begin(), eos.end(), t) != eos.end();
}

std::string TokenAutomaton::check(std::span<const int32_t> tokens, FinishReason finish,
                                  int32_t max_tokens) const {
  size_t s = 0;
  bool ended = false;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const int32_t t = tokens[i];
    if (ended) return "token " + std::to_string(t) + " after EOS";
    if (is_eos(t)) {
      if (!accepting[s]) return "EOS at " + std::to_string(i) + " before the output is complete";
      ended = true;
      continue;
    }
    auto it = next[s].find(t);
    if (it == next[s].end())
      return "token " + std::to_string(t) + " at " + std::to_string(i) + " not allowed";
    s = static_cast<size_t>(it->second);
  }
  if (finish == FinishReason::kLength) {
    return static_cast<int32_t>(tokens.size()) == max_tokens ? ""
                                                             : "length finish before max_tokens";
  }
  if (finish != FinishReason::kStop) return "finish is not stop or length";
  if (ended || (accepting[s] && next[s].empty())) return "";
  return "stopped in state " + std::to_string(s) + ", which is not final";
}

namespace {

class AutomatonState final : public TokenConstraint {
 public:
  AutomatonState(std::shared_ptr<const TokenAutomaton> a, std::optional<int32_t> refuse_at,
                 std::shared_ptr<ConstraintCounters> counters, std::shared_ptr<const TokenBytesFn> bytes)
      : a_(std::move(a)), refuse_at_(refuse_at), counters_(std::move(counters)), bytes_(std::move(bytes)) {}

  void fill_next_mask(std::span<uint32_t> words) const override {
    std::atomic_ref<int64_t>(counters_->fills).fetch_add(1);
    if (ended_) return;
    for (const auto& [t, to] : a_->next[state_])
      words[static_cast<size_t>(t) >> 5] |= 1u << (t & 31);
    if (a_->accepting[state_]) {
      for (int32_t t : a_->eos) words[static_cast<size_t>(t) >> 5] |= 1u << (t & 31);
    }
  }
  bool accept(int32_t token) override {
    std::atomic_ref<int64_t>(counters_->accepts).fetch_add(1);
    if (ended_ || (refuse_at_ && num_accepted_ == *refuse_at_)) return false;
    if (a_->is_eos(token)) {
      if (!a_->accepting[state_]) return false;
      ended_ = true;
    } else {
      auto it = a_->next[state_].find(token);
      if (it == a_->next[state_].end()) return false;
      state_ = static_cast<size_t>(it->second);
    }
    ++num_accepted_;
    return true;
  }
  bool is_finished() const override {
    return ended_ || (a_->accepting[state_] && a_->next[state_].empty());
  }
  std::unique_ptr<TokenConstraint> clone() const override {
    return std::make_unique<AutomatonState>(*this);
  }
  std::string forced_bytes(size_t max_bytes) const override {
    std::string out;
    if (!*bytes_ || ended_) return out;
    size_t s = state_;
    while (out.size() < max_bytes && !a_->accepting[s] && a_->next[s].size() == 1) {
      const auto& [t, to] = *a_->next[s].begin();
      out += (*bytes_)(t);
      s = static_cast<size_t>(to);
    }
    if (out.size() > max_bytes) out.resize(max_bytes);
    return out;
  }

 private:
  std::shared_ptr<const TokenAutomaton> a_;
  std::optional<int32_t> refuse_at_;
  std::shared_ptr<ConstraintCounters> counters_;
  std::shared_ptr<const TokenBytesFn> bytes_;
  size_t state_ = 0;
  bool ended_ = false;
  int32_t num_accepted_ = 0;
};

}  // namespace

AutomatonConstraint::AutomatonConstraint(TokenAutomaton automaton, std::optional<int32_t> refuse_at,
                                         TokenBytesFn token_bytes)
    : automaton_(std::make_shared<const TokenAutomaton>(std::move(automaton))),
      refuse_at_(refuse_at),
      counters_(std::make_shared<ConstraintCounters>()),
      token_bytes_(std::make_shared<const TokenBytesFn>(std::move(token_bytes))) {}

std::unique_ptr<TokenConstraint> AutomatonConstraint::start() const {
  return std::make_unique<AutomatonState>(automaton_, refuse_at_, counters_, token_bytes_);
}

}  // namespace pagoda::test
