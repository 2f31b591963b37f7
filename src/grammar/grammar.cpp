#include "grammar/grammar.h"

#include <bit>
#include <cstdio>
#include <set>

namespace pagoda::grammar {

void ByteSet::add_range(uint8_t lo, uint8_t hi) {
  for (int b = lo; b <= hi; ++b) add(static_cast<uint8_t>(b));
}

void ByteSet::add_all(const ByteSet& other) {
  for (int i = 0; i < 4; ++i) words[i] |= other.words[i];
}

int ByteSet::count() const {
  int n = 0;
  for (uint64_t w : words) n += std::popcount(w);
  return n;
}

namespace {

using Kind = Element::Kind;

Error grammar_error(std::string what) {
  return make_error(ErrorCode::kInvalidArgument, "grammar: " + std::move(what));
}

}  // namespace

// A worklist over the alternatives, each waiting for its references to
// become nullable (linear in the grammar).
std::vector<uint8_t> compute_nullable(const Grammar& g) {
  const size_t num_rules = g.rules.size();
  std::vector<uint8_t> nullable(num_rules, 0);
  std::vector<uint32_t> alt_owner, alt_waiting;           // by alternative
  std::vector<std::vector<uint32_t>> waiters(num_rules);  // rule -> alternatives (per occurrence)
  std::vector<uint32_t> queue;
  for (uint32_t r = 0; r < num_rules; ++r) {
    for (uint32_t start : g.rules[r].alternatives) {
      const uint32_t alt = static_cast<uint32_t>(alt_owner.size());
      alt_owner.push_back(r);
      uint32_t waiting = 0;
      bool blocked = false;
      for (uint32_t p = start; g.elements[p].kind != Kind::kEnd; ++p) {
        if (g.elements[p].kind == Kind::kBytes) {
          blocked = true;
          break;
        }
        ++waiting;
      }
      alt_waiting.push_back(blocked ? UINT32_MAX : waiting);
      if (blocked) continue;
      for (uint32_t p = start; g.elements[p].kind != Kind::kEnd; ++p) {
        waiters[g.elements[p].value].push_back(alt);
      }
      if (waiting == 0 && !nullable[r]) {
        nullable[r] = 1;
        queue.push_back(r);
      }
    }
  }
  while (!queue.empty()) {
    const uint32_t s = queue.back();
    queue.pop_back();
    for (uint32_t alt : waiters[s]) {
      if (--alt_waiting[alt] != 0) continue;
      const uint32_t owner = alt_owner[alt];
      if (!nullable[owner]) {
        nullable[owner] = 1;
        queue.push_back(owner);
      }
    }
  }
  return nullable;
}

namespace {

// The rules each rule can reach before matching a byte.
std::vector<std::vector<uint32_t>> leftmost_edges(const Grammar& g) {
  std::vector<std::vector<uint32_t>> edges(g.rules.size());
  for (uint32_t r = 0; r < g.rules.size(); ++r) {
    for (uint32_t start : g.rules[r].alternatives) {
      for (uint32_t p = start; g.elements[p].kind == Kind::kRef; ++p) {
        edges[r].push_back(g.elements[p].value);
        if (!g.nullable[g.elements[p].value]) break;
      }
    }
  }
  return edges;
}

// Post-order of the leftmost-reference graph (a rule after every rule it
// reaches first), or the left-recursion error. Iterative: no recursion depth.
Result<std::vector<uint32_t>> leftmost_order(const Grammar& g) {
  const auto edges = leftmost_edges(g);
  enum : uint8_t { kWhite, kGray, kBlack };
  std::vector<uint8_t> color(g.rules.size(), kWhite);
  std::vector<uint32_t> order;
  order.reserve(g.rules.size());
  std::vector<std::pair<uint32_t, size_t>> path;  // (rule, next edge)
  for (uint32_t root = 0; root < g.rules.size(); ++root) {
    if (color[root] != kWhite) continue;
    path.push_back({root, 0});
    color[root] = kGray;
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == edges[r].size()) {
        color[r] = kBlack;
        order.push_back(r);
        path.pop_back();
        continue;
      }
      const uint32_t s = edges[r][next++];
      if (color[s] == kWhite) {
        color[s] = kGray;
        path.push_back({s, 0});
      } else if (color[s] == kGray) {
        std::string cycle;
        bool on = false;
        for (const auto& [q, unused] : path) {
          on = on || q == s;
          if (on) cycle += g.rules[q].name + " -> ";
        }
        return grammar_error("rule '" + g.rules[s].name + "' is left-recursive (" + cycle +
                             g.rules[s].name + ")");
      }
    }
  }
  return order;
}

Status compute_first_stacks(Grammar& g, const std::vector<uint32_t>& order) {
  g.first_begin.assign(g.rules.size() + 1, 0);
  std::vector<std::pair<uint32_t, uint32_t>> range(g.rules.size());
  std::vector<uint32_t> out;
  for (uint32_t r : order) {
    std::set<std::vector<uint32_t>> stacks;
    for (uint32_t start : g.rules[r].alternatives) {
      for (uint32_t p = start;; ++p) {
        const Element& e = g.elements[p];
        if (e.kind == Kind::kEnd) break;
        if (e.kind == Kind::kBytes) {
          stacks.insert({p});
          break;
        }
        const bool tail = g.elements[p + 1].kind == Kind::kEnd;
        const auto [begin, end] = range[e.value];
        for (uint32_t i = begin; i < end; i += 1 + out[i]) {
          std::vector<uint32_t> s;
          if (!tail) s.push_back(p + 1);
          s.insert(s.end(), out.begin() + i + 1, out.begin() + i + 1 + out[i]);
          stacks.insert(std::move(s));
        }
        if (!g.nullable[e.value]) break;
      }
    }
    const uint32_t begin = static_cast<uint32_t>(out.size());
    for (const auto& s : stacks) {
      out.push_back(static_cast<uint32_t>(s.size()));
      out.insert(out.end(), s.begin(), s.end());
      if (out.size() > kMaxFirstStackWords) {
        return grammar_error("rule '" + g.rules[r].name + "' is too ambiguous");
      }
    }
    range[r] = {begin, static_cast<uint32_t>(out.size())};
  }
  // Lay the tables out by rule id.
  g.first_stacks.clear();
  for (uint32_t r = 0; r < g.rules.size(); ++r) {
    g.first_begin[r] = static_cast<uint32_t>(g.first_stacks.size());
    g.first_stacks.insert(g.first_stacks.end(), out.begin() + range[r].first,
                          out.begin() + range[r].second);
  }
  g.first_begin[g.rules.size()] = static_cast<uint32_t>(g.first_stacks.size());
  return Status::Ok();
}

}  // namespace

Status finalize_grammar(Grammar& g) {
  if (g.elements.size() > kMaxGrammarElements) {
    return grammar_error("too large (" + std::to_string(g.elements.size()) + " elements, at most " +
                         std::to_string(kMaxGrammarElements) + ")");
  }
  g.element_rule.assign(g.elements.size(), 0);
  for (uint32_t r = 0; r < g.rules.size(); ++r) {
    for (uint32_t start : g.rules[r].alternatives) {
      for (uint32_t p = start;; ++p) {
        g.element_rule[p] = r;
        if (g.elements[p].kind == Kind::kEnd) break;
      }
    }
  }
  g.nullable = compute_nullable(g);
  auto order = leftmost_order(g);
  if (!order.ok()) return order.error();
  return compute_first_stacks(g, *order);
}

std::string describe_rule(const Grammar& g, uint32_t rule) {
  std::string out = g.rules[rule].name + " ::=";
  bool first = true;
  for (uint32_t start : g.rules[rule].alternatives) {
    if (!first) out += " |";
    first = false;
    for (uint32_t p = start; g.elements[p].kind != Kind::kEnd; ++p) {
      const Element& e = g.elements[p];
      if (e.kind == Kind::kRef) {
        out += " " + g.rules[e.value].name;
        continue;
      }
      const ByteSet& set = g.byte_sets[e.value];
      out += " [";
      for (int b = 0; b < 256; ++b) {
        if (!set.contains(static_cast<uint8_t>(b))) continue;
        int hi = b;
        while (hi < 255 && set.contains(static_cast<uint8_t>(hi + 1))) ++hi;
        char buf[16];
        if (hi == b) {
          std::snprintf(buf, sizeof buf, "%02X", b);
        } else {
          std::snprintf(buf, sizeof buf, "%02X-%02X", b, hi);
        }
        out += buf;
        b = hi;
      }
      out += "]";
    }
  }
  return out;
}

}  // namespace pagoda::grammar
