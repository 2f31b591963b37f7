#include "grammar/token_masks.h"

#include <vector>

#include "sample/token_mask.h"

namespace pagoda::grammar {

namespace {

void set_tokens(const GrammarVocabulary& vocab, const TrieNode& node, std::span<uint32_t> words) {
  const std::vector<int32_t>& tokens = vocab.trie_tokens();
  for (uint32_t t = node.tokens_begin; t < node.tokens_end; ++t) {
    const auto id = static_cast<uint32_t>(tokens[t]);
    words[id >> 5] |= uint32_t{1} << (id & 31);
  }
}

bool has_open_stack(const StackSet& s) {
  return s.num_stacks() > (s.can_end() ? 1u : 0u);
}

// Depth-first over the nodes below `root`. visit(node, state after it) says
// whether to go below the node; the walk skips a subtree whose prefix the
// state refuses.
template <typename Visit>
void walk(const Grammar& g, const GrammarVocabulary& vocab, const StackSet& state, uint32_t root,
          std::vector<StackSet>& levels, Visit&& visit) {
  const std::vector<TrieNode>& nodes = vocab.trie();
  std::vector<uint32_t> path_ends;  // subtree ends of the nodes on the path below root
  const uint32_t end = nodes[root].end;
  uint32_t i = root + 1;
  while (i < end) {
    while (!path_ends.empty() && i >= path_ends.back()) path_ends.pop_back();
    const size_t depth = path_ends.size();
    if (levels.size() < depth + 2) levels.resize(depth + 2);
    const StackSet& parent = depth == 0 ? state : levels[depth];
    const TrieNode& node = nodes[i];
    StackSet& next = levels[depth + 1];
    if (!parent.advance(g, node.byte, next)) {
      i = node.end;
      continue;
    }
    if (visit(node, next) && node.end > i + 1) {
      path_ends.push_back(node.end);
      ++i;
    } else {
      i = node.end;
    }
  }
}

}  // namespace

void walk_subtree(const Grammar& g, const GrammarVocabulary& vocab, const StackSet& state,
                  uint32_t node, std::span<uint32_t> words) {
  thread_local std::vector<StackSet> levels;  // levels[d]: the state after d bytes
  walk(g, vocab, state, node, levels, [&](const TrieNode& n, const StackSet& next) {
    set_tokens(vocab, n, words);
    return has_open_stack(next);
  });
}

void fill_grammar_mask(const Grammar& g, const GrammarVocabulary& vocab, const StackSet& state,
                       std::span<uint32_t> words) {
  walk_subtree(g, vocab, state, 0, words);
}

size_t local_start(const Grammar& g, std::span<const uint32_t> stack) {
  for (size_t i = stack.size(); i-- > 0;) {
    if (!g.rules[g.element_rule[stack[i]]].helper) return i;
  }
  return 0;
}

LocalMask compute_local_mask(const Grammar& g, const GrammarVocabulary& vocab,
                             std::span<const uint32_t> local) {
  LocalMask out;
  out.accepted.assign(static_cast<size_t>(mask_num_words(vocab.logits_vocab_size())), 0u);
  thread_local std::vector<StackSet> levels;
  const std::vector<TrieNode>& nodes = vocab.trie();
  walk(g, vocab, StackSet::of_stack(local), 0, levels,
       [&](const TrieNode& n, const StackSet& next) {
         const bool open = has_open_stack(next);
         if (open) set_tokens(vocab, n, out.accepted);
         if (next.can_end()) out.exits.push_back(static_cast<uint32_t>(&n - nodes.data()));
         return open;
       });
  return out;
}

void apply_local_mask(const Grammar& g, const GrammarVocabulary& vocab, const LocalMask& local,
                      std::span<const uint32_t> below, std::span<uint32_t> words) {
  for (size_t w = 0; w < words.size() && w < local.accepted.size(); ++w)
    words[w] |= local.accepted[w];
  if (local.exits.empty()) return;
  const StackSet resumed = StackSet::resume(g, below);
  if (resumed.empty()) return;
  const std::vector<TrieNode>& nodes = vocab.trie();
  for (uint32_t exit : local.exits) {
    set_tokens(vocab, nodes[exit], words);  // the local part ends with the token
    if (has_open_stack(resumed)) walk_subtree(g, vocab, resumed, exit, words);
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
