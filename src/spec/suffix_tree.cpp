#include "spec/suffix_tree.h"

#include <algorithm>
#include <cmath>

namespace pagoda {

SuffixTree::SuffixTree(int32_t max_depth) : max_depth_(max_depth) {
  nodes_.emplace_back();
}

size_t SuffixTree::sequence_length(int64_t seq_id) const {
  auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? 0 : it->second.tokens.size();
}

int32_t SuffixTree::child(int32_t node, int32_t token) const {
  auto it = children_.find(key(node, token));
  return it == children_.end() ? kNone : it->second;
}

int32_t SuffixTree::child_or_create(int32_t node, int32_t token) {
  int32_t next;
  if (!free_.empty()) {
    next = free_.back();
  } else {
    next = static_cast<int32_t>(nodes_.size());
  }
  auto [it, inserted] = children_.try_emplace(key(node, token), next);
  if (!inserted) return it->second;
  if (!free_.empty()) {
    free_.pop_back();
  } else {
    nodes_.emplace_back();
  }
  Node& n = nodes_[static_cast<size_t>(next)];
  n = Node{};
  n.token = token;
  n.parent = node;
  Node& p = nodes_[static_cast<size_t>(node)];
  n.next_sibling = p.first_child;
  if (p.first_child != kNone) nodes_[static_cast<size_t>(p.first_child)].prev_sibling = next;
  p.first_child = next;
  return next;
}

void SuffixTree::free_node(int32_t node) {
  Node& n = nodes_[static_cast<size_t>(node)];
  Node& p = nodes_[static_cast<size_t>(n.parent)];
  if (n.prev_sibling != kNone) {
    nodes_[static_cast<size_t>(n.prev_sibling)].next_sibling = n.next_sibling;
  } else {
    p.first_child = n.next_sibling;
  }
  if (n.next_sibling != kNone)
    nodes_[static_cast<size_t>(n.next_sibling)].prev_sibling = n.prev_sibling;
  children_.erase(key(n.parent, n.token));
  n = Node{};
  free_.push_back(node);
}

void SuffixTree::extend(int64_t seq_id, std::span<const int32_t> tokens) {
  Sequence& seq = seqs_[seq_id];
  std::vector<int32_t> grown;
  for (int32_t token : tokens) {
    seq.tokens.push_back(token);
    // The suffix starting at the new token begins at the root; each open
    // suffix grows by this token; the one reaching max_depth closes.
    seq.open.push_back(0);
    grown.clear();
    nodes_[0].count += 1;
    for (int32_t node : seq.open) {
      const int32_t next = child_or_create(node, token);
      nodes_[static_cast<size_t>(next)].count += 1;
      grown.push_back(next);
    }
    if (static_cast<int32_t>(grown.size()) >= max_depth_) grown.erase(grown.begin());
    seq.open.swap(grown);
  }
}

void SuffixTree::remove(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  const std::vector<int32_t>& t = it->second.tokens;
  std::vector<int32_t> path;
  for (size_t start = 0; start < t.size(); ++start) {
    nodes_[0].count -= 1;
    path.clear();
    int32_t node = 0;
    const size_t end = std::min(t.size(), start + static_cast<size_t>(max_depth_));
    for (size_t i = start; i < end; ++i) {
      node = child(node, t[i]);
      nodes_[static_cast<size_t>(node)].count -= 1;
      path.push_back(node);
    }
    // A child never counts more than its parent: free the zeros deepest first.
    for (auto p = path.rbegin(); p != path.rend() && nodes_[static_cast<size_t>(*p)].count == 0;
         ++p) {
      free_node(*p);
    }
  }
  seqs_.erase(it);
}

int32_t SuffixTree::find(std::span<const int32_t> path) const {
  int32_t node = 0;
  for (int32_t token : path) {
    node = child(node, token);
    if (node == kNone) return kNone;
  }
  return node;
}

int64_t SuffixTree::count(std::span<const int32_t> path) const {
  if (static_cast<int64_t>(path.size()) > max_depth_) return 0;
  const int32_t node = find(path);
  return node == kNone ? 0 : nodes_[static_cast<size_t>(node)].count;
}

void SuffixTree::walk(int32_t node, int32_t max_tokens, double min_token_prob,
                      SuffixDraft& draft) const {
  double prob = 1.0;
  while (static_cast<int32_t>(draft.tokens.size()) < max_tokens) {
    const Node& n = nodes_[static_cast<size_t>(node)];
    int32_t best = kNone;
    for (int32_t c = n.first_child; c != kNone; c = nodes_[static_cast<size_t>(c)].next_sibling) {
      const Node& cn = nodes_[static_cast<size_t>(c)];
      if (best == kNone || cn.count > nodes_[static_cast<size_t>(best)].count ||
          (cn.count == nodes_[static_cast<size_t>(best)].count &&
           cn.token < nodes_[static_cast<size_t>(best)].token)) {
        best = c;
      }
    }
    if (best == kNone) return;
    prob *=
        static_cast<double>(nodes_[static_cast<size_t>(best)].count) / static_cast<double>(n.count);
    if (prob < min_token_prob) return;
    draft.tokens.push_back(nodes_[static_cast<size_t>(best)].token);
    draft.score += prob;
    node = best;
  }
}

SuffixDraft SuffixTree::speculate(std::span<const int32_t> context, int32_t max_tokens,
                                  double max_spec_factor, double min_token_prob) const {
  SuffixDraft best;
  const int64_t longest = std::min<int64_t>(static_cast<int64_t>(context.size()), max_depth_) - 1;
  for (int64_t m = 1; m <= longest; ++m) {
    const int32_t node = find(context.subspan(context.size() - static_cast<size_t>(m)));
    // A longer suffix cannot be a path when this one is not.
    if (node == kNone) break;
    const auto cap =
        static_cast<int64_t>(std::floor(static_cast<double>(m) * max_spec_factor + 1e-6));
    SuffixDraft draft;
    draft.match_len = static_cast<int32_t>(m);
    walk(node, static_cast<int32_t>(std::clamp<int64_t>(cap, 0, max_tokens)), min_token_prob,
         draft);
    if (draft.score >= best.score) best = std::move(draft);
  }
  return best;
}

}  // namespace pagoda
