// SuffixTree: the depth-limited suffix trie of suffix decoding (SuffixDecoding,
// arXiv 2411.04975; vLLM's "suffix" method). It holds any number of token
// sequences; the node reached from the root by a path of d <= max_depth tokens
// counts how often that path occurs as a substring of the held sequences
// (each suffix, cut to max_depth tokens, passes through or ends at the nodes
// of its prefixes). The root counts all tokens held.
//
// Sequences grow at their end (extend) and leave as a whole (remove), which
// really decrements the counts and frees nodes that reach zero: the node count
// is always the number of distinct held substrings of length <= max_depth.
//
// Cost: extend is O(max_depth) hash operations per token; remove is
// O(length * max_depth); speculate is O(max_depth^2 + max_depth * draft
// length * children). Memory: O(held tokens * max_depth) nodes at worst
// (each node 32 bytes plus a hash entry), usually far fewer as paths share.
#pragma once

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

  // Appends tokens to sequence seq_id (a new id starts a sequence).
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
  struct Node {
    int64_t count = 0;
    int32_t token = 0;
    int32_t parent = kNone;
    int32_t first_child = kNone;
    int32_t next_sibling = kNone;
    int32_t prev_sibling = kNone;
  };
  struct Sequence {
    std::vector<int32_t> tokens;
    // Nodes of the suffixes starting at the last max_depth - 1 positions
    // (shortest last); each grows by one token on the next append.
    std::vector<int32_t> open;
  };

  static uint64_t key(int32_t node, int32_t token) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(node)) << 32) |
           static_cast<uint32_t>(token);
  }
  int32_t child(int32_t node, int32_t token) const;
  // The child of node for token, created with count 0 if absent.
  int32_t child_or_create(int32_t node, int32_t token);
  void free_node(int32_t node);
  // The node at path, or kNone.
  int32_t find(std::span<const int32_t> path) const;
  void walk(int32_t node, int32_t max_tokens, double min_token_prob, SuffixDraft& draft) const;

  int32_t max_depth_;
  std::vector<Node> nodes_;  // nodes_[0] is the root
  std::vector<int32_t> free_;
  std::unordered_map<uint64_t, int32_t> children_;  // (node, token) -> child
  std::unordered_map<int64_t, Sequence> seqs_;
};

}  // namespace pagoda
