#include "grammar/regex_dfa.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace pagoda::grammar {

namespace {

using Kind = RegexNode::Kind;

struct NfaState {
  std::vector<uint32_t> epsilon;
  std::vector<std::pair<const RegexCharSet*, uint32_t>> edges;  // sets live in the tree
};

Error too_many_states(size_t limit) {
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("the regex needs more than {} automaton states", limit));
}

// Thompson's construction. add(node, from) adds edges out of `from` (never
// into it) and returns the state after the node.
class NfaBuilder {
 public:
  Result<uint32_t> add(const RegexNode& node, uint32_t from) {
    switch (node.kind) {
      case Kind::kChars: {
        PAGODA_ASSIGN_OR_RETURN(uint32_t to, new_state());
        states_[from].edges.emplace_back(&node.chars, to);
        return to;
      }
      case Kind::kSeq: {
        for (const RegexNodePtr& child : node.children) {
          PAGODA_ASSIGN_OR_RETURN(from, add(*child, from));
        }
        return from;
      }
      case Kind::kAlt: {
        PAGODA_ASSIGN_OR_RETURN(uint32_t end, new_state());
        for (const RegexNodePtr& child : node.children) {
          PAGODA_ASSIGN_OR_RETURN(uint32_t start, new_state());
          states_[from].epsilon.push_back(start);
          PAGODA_ASSIGN_OR_RETURN(uint32_t child_end, add(*child, start));
          states_[child_end].epsilon.push_back(end);
        }
        return end;
      }
      case Kind::kRepeat:
        return add_repeat(node, from);
      default:  // the empty string (anchors are gone after parse_regex)
        return from;
    }
  }

  Result<uint32_t> new_state() {
    if (states_.size() >= kMaxNfaStates) return too_many_states(kMaxNfaStates);
    states_.emplace_back();
    return static_cast<uint32_t>(states_.size() - 1);
  }

  std::vector<NfaState>& states() { return states_; }

 private:
  // body{min,max}: min copies in a row, then max - min optional ones (or a
  // loop when unbounded), each starting in a fresh state.
  Result<uint32_t> add_repeat(const RegexNode& node, uint32_t from) {
    const RegexNode& body = *node.children[0];
    for (uint32_t i = 0; i < node.min; ++i) {
      PAGODA_ASSIGN_OR_RETURN(from, add_copy(body, from));
    }
    PAGODA_ASSIGN_OR_RETURN(uint32_t exit, new_state());
    if (node.max == kUnbounded) {
      PAGODA_ASSIGN_OR_RETURN(uint32_t loop, new_state());
      states_[from].epsilon.push_back(loop);
      PAGODA_ASSIGN_OR_RETURN(uint32_t body_end, add(body, loop));
      states_[body_end].epsilon.push_back(loop);
      states_[loop].epsilon.push_back(exit);
      return exit;
    }
    for (uint32_t i = node.min; i < node.max; ++i) {
      states_[from].epsilon.push_back(exit);
      PAGODA_ASSIGN_OR_RETURN(from, add_copy(body, from));
    }
    states_[from].epsilon.push_back(exit);
    return exit;
  }

  Result<uint32_t> add_copy(const RegexNode& body, uint32_t from) {
    PAGODA_ASSIGN_OR_RETURN(uint32_t start, new_state());
    states_[from].epsilon.push_back(start);
    return add(body, start);
  }

  std::vector<NfaState> states_;
};

// Epsilon closures of NFA state sets, sorted (a visit stamp per state, so a
// closure costs what it visits).
class Closures {
 public:
  explicit Closures(const std::vector<NfaState>& nfa) : nfa_(nfa), stamp_(nfa.size(), 0) {}

  std::vector<uint32_t> of(std::vector<uint32_t> set) {
    ++visit_;
    std::vector<uint32_t> stack = std::move(set);
    set.clear();
    while (!stack.empty()) {
      const uint32_t s = stack.back();
      stack.pop_back();
      if (stamp_[s] == visit_) continue;
      stamp_[s] = visit_;
      set.push_back(s);
      for (uint32_t t : nfa_[s].epsilon) stack.push_back(t);
    }
    std::sort(set.begin(), set.end());
    return set;
  }

 private:
  const std::vector<NfaState>& nfa_;
  std::vector<uint64_t> stamp_;
  uint64_t visit_ = 0;
};

// Subset construction: per DFA state, the code points of its NFA states'
// edges are swept in order, and each run of code points with the same targets
// goes to the DFA state of those targets' closure.
Result<RegexDfa> determinize(const std::vector<NfaState>& nfa, uint32_t start, uint32_t accept) {
  RegexDfa dfa;
  Closures closure(nfa);
  std::map<std::vector<uint32_t>, uint32_t> ids;
  std::vector<std::vector<uint32_t>> sets;
  auto id_of = [&](std::vector<uint32_t> set) -> Result<uint32_t> {
    const auto it = ids.find(set);
    if (it != ids.end()) return it->second;
    if (sets.size() >= kMaxDfaStates) return too_many_states(kMaxDfaStates);
    const auto id = static_cast<uint32_t>(sets.size());
    ids.emplace(set, id);
    sets.push_back(std::move(set));
    dfa.states.emplace_back();
    return id;
  };
  PAGODA_RETURN_IF_ERROR(id_of(closure.of({start})));
  for (size_t d = 0; d < sets.size(); ++d) {
    dfa.states[d].accepting = std::binary_search(sets[d].begin(), sets[d].end(), accept);
    struct Event {
      uint64_t point;  // a range's first code point, or one past its last
      bool opens;
      uint32_t target;
    };
    std::vector<Event> events;
    for (uint32_t s : sets[d])
      for (const auto& [chars, target] : nfa[s].edges)
        for (const CodePointRange& r : chars->ranges()) {
          events.push_back({r.lo, true, target});
          events.push_back({uint64_t{r.hi} + 1, false, target});
        }
    std::sort(events.begin(), events.end(),
              [](const Event& a, const Event& b) { return a.point < b.point; });
    std::map<uint32_t, RegexCharSet> by_target;  // DFA target -> its code points
    std::multiset<uint32_t> active;              // NFA targets of the edges open here
    for (size_t i = 0; i < events.size();) {
      const uint64_t point = events[i].point;
      for (; i < events.size() && events[i].point == point; ++i) {
        if (events[i].opens)
          active.insert(events[i].target);
        else
          active.erase(active.find(events[i].target));
      }
      if (active.empty() || i == events.size()) continue;
      std::vector<uint32_t> targets(active.begin(), active.end());
      targets.erase(std::unique(targets.begin(), targets.end()), targets.end());
      PAGODA_ASSIGN_OR_RETURN(uint32_t to, id_of(closure.of(std::move(targets))));
      by_target[to].add(static_cast<uint32_t>(point), static_cast<uint32_t>(events[i].point - 1));
    }
    for (auto& [to, chars] : by_target) dfa.states[d].transitions.push_back({std::move(chars), to});
  }
  return dfa;
}

// The states from which an accepting one can be reached.
std::vector<uint8_t> live_states(const RegexDfa& dfa) {
  std::vector<std::vector<uint32_t>> sources(dfa.states.size());
  std::vector<uint32_t> stack;
  std::vector<uint8_t> live(dfa.states.size(), 0);
  for (uint32_t s = 0; s < dfa.states.size(); ++s) {
    for (const auto& t : dfa.states[s].transitions) sources[t.target].push_back(s);
    if (dfa.states[s].accepting) {
      live[s] = 1;
      stack.push_back(s);
    }
  }
  while (!stack.empty()) {
    const uint32_t s = stack.back();
    stack.pop_back();
    for (uint32_t from : sources[s])
      if (!live[from]) {
        live[from] = 1;
        stack.push_back(from);
      }
  }
  return live;
}

// Moore's refinement over the live states: states are split by acceptance,
// then by the blocks their code points lead to, until no block splits; the
// result has one state per block, the start's block first.
RegexDfa minimize(const RegexDfa& dfa) {
  const std::vector<uint8_t> live = live_states(dfa);
  if (!live[0]) return {};
  const size_t n = dfa.states.size();
  constexpr uint32_t kDead = UINT32_MAX;
  std::vector<uint32_t> block(n, kDead);
  for (size_t s = 0; s < n; ++s)
    if (live[s]) block[s] = dfa.states[s].accepting ? 1 : 0;
  using Signature = std::pair<uint32_t, std::vector<std::pair<uint32_t, std::vector<uint32_t>>>>;
  for (size_t num_blocks = 0;;) {
    std::map<Signature, uint32_t> ids;
    std::vector<uint32_t> next(n, kDead);
    for (size_t s = 0; s < n; ++s) {
      if (block[s] == kDead) continue;
      std::map<uint32_t, RegexCharSet> by_block;  // target block -> code points
      for (const auto& t : dfa.states[s].transitions)
        if (block[t.target] != kDead) by_block[block[t.target]].add(t.chars);
      Signature sig{block[s], {}};
      for (const auto& [b, chars] : by_block) {
        std::vector<uint32_t> bounds;
        for (const CodePointRange& r : chars.ranges()) bounds.insert(bounds.end(), {r.lo, r.hi});
        sig.second.emplace_back(b, std::move(bounds));
      }
      next[s] = ids.emplace(std::move(sig), static_cast<uint32_t>(ids.size())).first->second;
    }
    block = std::move(next);
    if (ids.size() == num_blocks) break;
    num_blocks = ids.size();
  }
  // Renumber so that the start's block is 0, in order of first appearance.
  std::vector<uint32_t> order(n, kDead);
  RegexDfa out;
  std::vector<uint32_t> queue = {0};
  order[block[0]] = 0;
  out.states.emplace_back();
  for (size_t q = 0; q < queue.size(); ++q) {
    const uint32_t s = queue[q];
    std::map<uint32_t, RegexCharSet> by_block;
    for (const auto& t : dfa.states[s].transitions) {
      const uint32_t b = block[t.target];
      if (b == kDead) continue;
      if (order[b] == kDead) {
        order[b] = static_cast<uint32_t>(out.states.size());
        out.states.emplace_back();
        queue.push_back(t.target);
      }
      by_block[order[b]].add(t.chars);
    }
    RegexDfa::State& state = out.states[order[block[s]]];  // out.states grew above
    state.accepting = dfa.states[s].accepting;
    for (auto& [to, chars] : by_block) state.transitions.push_back({std::move(chars), to});
  }
  return out;
}

}  // namespace

Result<RegexDfa> build_regex_dfa(const RegexNodePtr& tree) {
  NfaBuilder builder;
  PAGODA_ASSIGN_OR_RETURN(uint32_t start, builder.new_state());
  PAGODA_ASSIGN_OR_RETURN(uint32_t accept, builder.add(*tree, start));
  PAGODA_ASSIGN_OR_RETURN(RegexDfa dfa, determinize(builder.states(), start, accept));
  return minimize(dfa);
}

}  // namespace pagoda::grammar
