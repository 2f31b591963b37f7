#include "spec/suffix_tree.h"

#include <algorithm>
#include <cassert>
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

int32_t SuffixTree::label_token(int32_t node, int32_t i) const {
  const Node& n = at(node);
  if (n.ref_seq == kOwnedLabel) return owned_.at(node)[static_cast<size_t>(i)];
  return seqs_.at(n.ref_seq).tokens[static_cast<size_t>(n.ref_idx + i)];
}

int32_t SuffixTree::new_node() {
  if (!free_.empty()) {
    const int32_t node = free_.back();
    free_.pop_back();
    return node;
  }
  nodes_.emplace_back();
  return static_cast<int32_t>(nodes_.size() - 1);
}

void SuffixTree::attach(int32_t node, int32_t parent) {
  Node& n = at(node);
  n.parent = parent;
  n.prev_sibling = kNone;
  n.next_sibling = at(parent).first_child;
  if (n.next_sibling != kNone) at(n.next_sibling).prev_sibling = node;
  at(parent).first_child = node;
  children_[key(parent, n.token)] = node;
}

void SuffixTree::replace(int32_t old, int32_t node) {
  Node& o = at(old);
  Node& n = at(node);
  n.parent = o.parent;
  n.prev_sibling = o.prev_sibling;
  n.next_sibling = o.next_sibling;
  if (n.prev_sibling != kNone) {
    at(n.prev_sibling).next_sibling = node;
  } else {
    at(n.parent).first_child = node;
  }
  if (n.next_sibling != kNone) at(n.next_sibling).prev_sibling = node;
  children_[key(o.parent, o.token)] = node;
  o.parent = o.prev_sibling = o.next_sibling = kNone;
}

void SuffixTree::set_ref(int32_t node, int64_t seq, int32_t idx) {
  Node& n = at(node);
  if (n.ref_seq == kOwnedLabel) owned_.erase(node);
  n.ref_seq = seq;
  n.ref_idx = idx;
}

void SuffixTree::shift_label(int32_t node) {
  Node& n = at(node);
  if (n.ref_seq == kOwnedLabel) {
    std::vector<int32_t>& label = owned_.at(node);
    label.erase(label.begin());
  } else {
    n.ref_idx += 1;
  }
  n.length -= 1;
  n.token = label_token(node, 0);
}

void SuffixTree::drop_first(int32_t node) {
  children_.erase(key(at(node).parent, at(node).token));
  shift_label(node);
  children_[key(at(node).parent, at(node).token)] = node;
}

void SuffixTree::release(int32_t node) {
  for (int32_t c = at(node).first_child; c != kNone;) {
    const int32_t next = at(c).next_sibling;
    release(c);
    c = next;
  }
  Node& n = at(node);
  if (n.parent != kNone) {
    if (n.prev_sibling != kNone) {
      at(n.prev_sibling).next_sibling = n.next_sibling;
    } else {
      at(n.parent).first_child = n.next_sibling;
    }
    if (n.next_sibling != kNone) at(n.next_sibling).prev_sibling = n.prev_sibling;
    children_.erase(key(n.parent, n.token));
  }
  if (n.ref_seq == kOwnedLabel) owned_.erase(node);
  n = Node{};
  free_.push_back(node);
}

// The suffix that ended at `node` (at its label's end) grows by `token`,
// the sequence's token at p. Returns the node where it now ends. Three cases,
// by what else passes through node:
//  - nothing goes on with token: a private leaf just lengthens, otherwise a
//    new leaf starts;
//  - every other suffix at node continues into the token's child c: node's
//    label takes c's first token (or node and a one-token c fuse);
//  - otherwise the suffix enters c, splitting off c's first token if c's
//    label is longer.
int32_t SuffixTree::advance(int64_t seq_id, int32_t node, int32_t token, int32_t p) {
  const int32_t c = child(node, token);
  if (c == kNone) {
    if (node != 0 && at(node).count == 1) {
      set_ref(node, seq_id, p - at(node).length);
      at(node).length += 1;
      return node;
    }
    const int32_t leaf = new_node();
    Node& l = at(leaf);
    l.count = 1;
    l.length = 1;
    l.token = token;
    set_ref(leaf, seq_id, p);
    attach(leaf, node);
    return leaf;
  }
  if (node != 0 && at(node).count == at(c).count + 1) {
    if (at(c).length == 1) {
      // c takes node's place with node's label plus its own token.
      const int32_t length = at(node).length + 1;
      children_.erase(key(node, token));
      at(c).token = at(node).token;
      replace(node, c);
      at(c).count += 1;
      at(c).length = length;
      set_ref(c, seq_id, p - length + 1);
      at(node).first_child = kNone;
      release(node);
      return c;
    }
    set_ref(node, seq_id, p - at(node).length);
    at(node).length += 1;
    drop_first(c);
    return node;
  }
  if (at(c).length == 1) {
    at(c).count += 1;
    return c;
  }
  const int32_t mid = new_node();
  Node& m = at(mid);
  m.count = at(c).count + 1;
  m.length = 1;
  m.token = token;
  set_ref(mid, seq_id, p);
  replace(c, mid);
  shift_label(c);
  attach(c, mid);
  return mid;
}

void SuffixTree::append(int64_t seq_id, Sequence& seq, int32_t p) {
  const int32_t token = seq.tokens[static_cast<size_t>(p)];
  at(0).count += 1;
  seq.open.push_back(0);
  for (int32_t& node : seq.open) node = advance(seq_id, node, token, p);
  // The longest suffix reached max_depth: it stays where it is.
  if (static_cast<int32_t>(seq.open.size()) >= max_depth_) seq.open.erase(seq.open.begin());
}

void SuffixTree::extend(int64_t seq_id, std::span<const int32_t> tokens) {
  Sequence& seq = seqs_[seq_id];
  for (int32_t token : tokens) {
    seq.tokens.push_back(token);
    append(seq_id, seq, static_cast<int32_t>(seq.tokens.size() - 1));
  }
}

void SuffixTree::remove_suffix(std::span<const int32_t> path, std::vector<int32_t>& touched) {
  at(0).count -= 1;
  int32_t node = 0;
  for (size_t i = 0; i < path.size();) {
    const int32_t c = child(node, path[i]);
    assert(c != kNone);
    if (--at(c).count == 0) {
      release(c);
      break;
    }
    touched.push_back(c);
    i += static_cast<size_t>(at(c).length);
    node = c;
  }
  // Where the suffix ended or lost its child, node may now have a single
  // child with all of its count: merge node into that child.
  const int32_t only = node == 0 ? kNone : at(node).first_child;
  if (only == kNone || at(only).next_sibling != kNone || at(only).count != at(node).count) return;
  Node& o = at(only);
  const Node& n = at(node);
  if (o.ref_seq == kOwnedLabel) {
    std::vector<int32_t>& label = owned_.at(only);
    std::vector<int32_t> prefix;
    for (int32_t i = 0; i < n.length; ++i) prefix.push_back(label_token(node, i));
    label.insert(label.begin(), prefix.begin(), prefix.end());
  } else {
    o.ref_idx -= n.length;  // its occurrence holds the whole path
  }
  children_.erase(key(node, o.token));
  o.length += n.length;
  o.token = n.token;
  replace(node, only);
  at(node).first_child = kNone;
  release(node);
  touched.push_back(only);
}

void SuffixTree::remove(int64_t seq_id) {
  auto it = seqs_.find(seq_id);
  if (it == seqs_.end()) return;
  const std::vector<int32_t>& t = it->second.tokens;
  std::vector<int32_t> touched;
  for (size_t start = 0; start < t.size(); ++start) {
    const size_t end = std::min(t.size(), start + static_cast<size_t>(max_depth_));
    remove_suffix(std::span<const int32_t>(t).subspan(start, end - start), touched);
  }
  // Every node reading its label from this sequence lies on one of its
  // suffixes: copy the surviving ones' labels out.
  for (int32_t node : touched) {
    Node& n = at(node);
    if (n.count == 0 || n.ref_seq != seq_id) continue;
    std::vector<int32_t> label(t.begin() + n.ref_idx, t.begin() + n.ref_idx + n.length);
    owned_[node] = std::move(label);
    n.ref_seq = kOwnedLabel;
  }
  seqs_.erase(it);
}

SuffixTree::Position SuffixTree::find(std::span<const int32_t> path) const {
  Position pos{0, 0};
  for (int32_t token : path) {
    if (pos.offset == at(pos.node).length) {
      pos.node = child(pos.node, token);
      if (pos.node == kNone) return pos;
      pos.offset = 1;  // the key is the label's first token
    } else if (label_token(pos.node, pos.offset) == token) {
      pos.offset += 1;
    } else {
      return Position{};
    }
  }
  return pos;
}

int64_t SuffixTree::count(std::span<const int32_t> path) const {
  if (static_cast<int64_t>(path.size()) > max_depth_) return 0;
  const Position pos = find(path);
  return pos.node == kNone ? 0 : at(pos.node).count;
}

void SuffixTree::walk(Position pos, int32_t max_tokens, double min_token_prob,
                      SuffixDraft& draft) const {
  double prob = 1.0;
  while (static_cast<int32_t>(draft.tokens.size()) < max_tokens) {
    const Node& n = at(pos.node);
    if (pos.offset < n.length) {
      // Inside a label every suffix goes on with the same token.
      draft.tokens.push_back(label_token(pos.node, pos.offset++));
      draft.score += prob;
      continue;
    }
    int32_t best = kNone;
    for (int32_t c = n.first_child; c != kNone; c = at(c).next_sibling) {
      if (best == kNone || at(c).count > at(best).count ||
          (at(c).count == at(best).count && at(c).token < at(best).token)) {
        best = c;
      }
    }
    if (best == kNone) return;
    prob *= static_cast<double>(at(best).count) / static_cast<double>(n.count);
    if (prob < min_token_prob) return;
    pos = Position{best, 0};
  }
}

SuffixDraft SuffixTree::speculate(std::span<const int32_t> context, int32_t max_tokens,
                                  double max_spec_factor, double min_token_prob) const {
  SuffixDraft best;
  const int64_t longest = std::min<int64_t>(static_cast<int64_t>(context.size()), max_depth_) - 1;
  for (int64_t m = 1; m <= longest; ++m) {
    const Position pos = find(context.subspan(context.size() - static_cast<size_t>(m)));
    // A longer suffix cannot be a path when this one is not.
    if (pos.node == kNone) break;
    const auto cap =
        static_cast<int64_t>(std::floor(static_cast<double>(m) * max_spec_factor + 1e-6));
    SuffixDraft draft;
    draft.match_len = static_cast<int32_t>(m);
    walk(pos, static_cast<int32_t>(std::clamp<int64_t>(cap, 0, max_tokens)), min_token_prob, draft);
    if (draft.score >= best.score) best = std::move(draft);
  }
  return best;
}

}  // namespace pagoda
