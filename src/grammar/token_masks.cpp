#include "grammar/token_masks.h"

#include <vector>

namespace pagoda::grammar {

void fill_grammar_mask(const Grammar& g, const GrammarVocabulary& vocab, const StackSet& state,
                       std::span<uint32_t> words) {
  const std::vector<TrieNode>& nodes = vocab.trie();
  const std::vector<int32_t>& tokens = vocab.trie_tokens();
  thread_local std::vector<StackSet> levels;  // levels[d]: the state after d bytes
  std::vector<uint32_t> path_ends;             // subtree ends of the nodes on the path
  path_ends.reserve(64);
  uint32_t i = 1;
  while (i < nodes.size()) {
    while (!path_ends.empty() && i >= path_ends.back()) path_ends.pop_back();
    const size_t depth = path_ends.size();
    if (levels.size() < depth + 2) levels.resize(depth + 2);
    const StackSet& parent = depth == 0 ? state : levels[depth];
    const TrieNode& node = nodes[i];
    StackSet& next = levels[depth + 1];
    if (!parent.advance(g, node.byte, next)) {
      i = node.end;  // no token below this prefix is accepted
      continue;
    }
    for (uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) {
      const auto id = static_cast<uint32_t>(tokens[t]);
      words[id >> 5] |= uint32_t{1} << (id & 31);
    }
    if (node.end > i + 1 && !(next.num_stacks() == 1 && next.can_end())) {
      path_ends.push_back(node.end);
      ++i;
    } else {
      i = node.end;
    }
  }
}

bool state_accepts(const Grammar& g, const StackSet& state, std::string_view bytes) {
  StackSet cur = state, next;
  for (char c : bytes) {
    if (!cur.advance(g, static_cast<uint8_t>(c), next)) return false;
    std::swap(cur, next);
  }
  return true;
}

}  // namespace pagoda::grammar
