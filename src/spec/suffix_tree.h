// SuffixTree: the depth-limited suffix tree of suffix decoding (SuffixDecoding,
// arXiv 2411.04975; vLLM's "suffix" method). It holds any number of token
// sequences. Every suffix of a held sequence, cut to max_depth tokens, is a
// path from the root; count(path) is how often the path occurs as a substring
// of the held sequences, and the root counts all tokens held.
//
// The tree is path-compressed: a node stands for a run of tokens (its label)
// read from one held occurrence of its whole path, so it holds at most about
// two nodes per held token whatever max_depth is. Sequences grow at their end
// (extend: each of the last max_depth suffixes moves one token down, splitting
// or lengthening nodes) and leave as a whole (remove: counts decremented,
// nodes at zero freed, unary chains merged again; a surviving label read from
// the removed sequence is copied out first), so memory follows what is held.
//
// Cost: extend is O(max_depth) per token; remove O(length * max_depth);
// speculate O(max_depth^2 + max_depth * draft length * children).
#pragma once

#include <climits>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace pagoda {

// A path drafted from a suffix tree.
struct SuffixDraft {
  std::vector<int32_t> tokens;
  // Expected number of accepted tokens: the sum of each drafted token's
  // estimated path probability.
  double score = 0;
  int32_t match_len = 0;  // length of the matched suffix it continues
};

class SuffixTree {
 public:
  explicit SuffixTree(int32_t max_depth);

  // Appends tokens to sequence seq_id (a new id starts a sequence; any id
  // but INT64_MIN).
  void extend(int64_t seq_id, std::span<const int32_t> tokens);
  // Removes sequence seq_id and all its counts; no-op for an unknown id.
  void remove(int64_t seq_id);
  bool contains(int64_t seq_id) const { return seqs_.count(seq_id) != 0; }
  // Tokens held for seq_id (empty for an unknown id).
  size_t sequence_length(int64_t seq_id) const;

  // Occurrences of path among the held sequences (0 when absent or longer
  // than max_depth); the empty path counts all held tokens.
  int64_t count(std::span<const int32_t> path) const;
  // Nodes in use, the root included.
  size_t num_nodes() const { return nodes_.size() - free_.size(); }
  int32_t max_depth() const { return max_depth_; }

  // The best path continuing a suffix of context (vLLM's rule). For each
  // match length m from 1 up to min(|context|, max_depth) - 1 whose last m
  // tokens of context are a path: from that node, repeatedly follow the
  // most frequent child (ties: the smaller token id) while the path
  // probability -- the product of child count / parent count -- stays >=
  // min_token_prob, for at most min(max_tokens, floor(m * max_spec_factor))
  // tokens. Returns the draft with the highest score (ties: the longer
  // match); an empty draft when nothing matches.
  SuffixDraft speculate(std::span<const int32_t> context, int32_t max_tokens,
                        double max_spec_factor, double min_token_prob) const;

 private:
  static constexpr int32_t kNone = -1;
  // ref_seq of a label copied out of a removed sequence (owned_ holds it).
  static constexpr int64_t kOwnedLabel = INT64_MIN;
  struct Node {
    int64_t count = 0;  // suffixes that pass through or end at this node
    // The label: length tokens at ref_idx of sequence ref_seq, where the
    // whole path from the root ends with them (or owned_[node]).
    int64_t ref_seq = 0;
    int32_t ref_idx = 0;
    int32_t length = 0;
    int32_t token = 0;  // the label's first token (the key under the parent)
    int32_t parent = kNone;
    int32_t first_child = kNone;
    int32_t next_sibling = kNone;
    int32_t prev_sibling = kNone;
  };
  struct Sequence {
    std::vector<int32_t> tokens;
    // Nodes where the suffixes starting at the last max_depth - 1 positions
    // end (each ends at its node's last label token), longest first.
    std::vector<int32_t> open;
  };
  // Where a path ends: inside node's label, after `offset` of its tokens.
  struct Position {
    int32_t node = kNone;
    int32_t offset = 0;
  };

  static uint64_t key(int32_t node, int32_t token) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(node)) << 32) |
           static_cast<uint32_t>(token);
  }
  Node& at(int32_t node) { return nodes_[static_cast<size_t>(node)]; }
  const Node& at(int32_t node) const { return nodes_[static_cast<size_t>(node)]; }
  int32_t child(int32_t node, int32_t token) const;
  int32_t label_token(int32_t node, int32_t i) const;
  int32_t new_node();
  // Links node (token set) under parent, first in its child list.
  void attach(int32_t node, int32_t parent);
  // Puts node in old's place under old's parent (same key); old is detached.
  void replace(int32_t old, int32_t node);
  void set_ref(int32_t node, int64_t seq, int32_t idx);
  // Drops the label's first token; drop_first also re-keys the node under
  // its parent.
  void shift_label(int32_t node);
  void drop_first(int32_t node);
  void release(int32_t node);  // frees node and its whole subtree
  // Appends token to seq at position p (already pushed); moves each open
  // suffix one token down.
  void append(int64_t seq_id, Sequence& seq, int32_t p);
  int32_t advance(int64_t seq_id, int32_t node, int32_t token, int32_t p);
  // Removes one occurrence along path; returns the nodes it visited.
  void remove_suffix(std::span<const int32_t> path, std::vector<int32_t>& touched);
  Position find(std::span<const int32_t> path) const;
  void walk(Position at, int32_t max_tokens, double min_token_prob, SuffixDraft& draft) const;

  int32_t max_depth_;
  std::vector<Node> nodes_;  // nodes_[0] is the root (empty label)
  std::vector<int32_t> free_;
  std::unordered_map<int32_t, std::vector<int32_t>> owned_;  // copied-out labels
  std::unordered_map<uint64_t, int32_t> children_;           // (node, token) -> child
  std::unordered_map<int64_t, Sequence> seqs_;
};

}  // namespace pagoda
