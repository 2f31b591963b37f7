// What a grammar constrains over: per token id the exact bytes it adds to the
// output (Tokenizer::token_bytes), which tokens are special (never allowed by
// a grammar), the end-of-sequence ids (allowed exactly when the output is
// complete), the logits' vocabulary size V (>= the tokenizer's; ids past the
// tokenizer's are never allowed), and a byte trie of the allowed-candidate
// tokens for the mask walk (token_masks.h). Immutable; thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "core/result.h"

namespace pagoda {
class Tokenizer;
}

namespace pagoda::grammar {

// A node of the byte trie. Nodes are stored in preorder: node i's subtree is
// [i, end); its children are i + 1, then each next child starts at the
// previous one's end. Node 0 is the root (the empty prefix).
struct TrieNode {
  uint8_t byte = 0;           // the edge from the parent
  uint32_t end = 0;           // one past the last node of the subtree
  uint32_t tokens_begin = 0;  // tokens whose bytes end here:
  uint32_t tokens_end = 0;    //   GrammarVocabulary::trie_tokens()[begin, end)
};

class GrammarVocabulary {
 public:
  // token_bytes[id] and special[id] for id < token_bytes.size();
  // logits_vocab_size >= token_bytes.size(). Empty-byte and special tokens
  // stay out of the trie (never allowed), as do eos ids.
  static Result<std::shared_ptr<const GrammarVocabulary>> create(
      std::vector<std::string> token_bytes, std::vector<uint8_t> special,
      std::vector<int32_t> eos_ids, int32_t logits_vocab_size);
  // The tokenizer's tokens below logits_vocab_size.
  static Result<std::shared_ptr<const GrammarVocabulary>> from_tokenizer(
      const Tokenizer& tokenizer, std::span<const int32_t> eos_ids, int32_t logits_vocab_size);

  int32_t num_tokens() const { return static_cast<int32_t>(bytes_.size()); }
  int32_t logits_vocab_size() const { return logits_vocab_size_; }
  // "" for ids outside [0, num_tokens()).
  const std::string& token_bytes(int32_t id) const;
  bool is_special(int32_t id) const;
  bool is_eos(int32_t id) const;
  const std::vector<int32_t>& eos_ids() const { return eos_ids_; }

  const std::vector<TrieNode>& trie() const { return trie_; }
  const std::vector<int32_t>& trie_tokens() const { return trie_tokens_; }

 private:
  GrammarVocabulary() = default;
  void build_trie();

  std::vector<std::string> bytes_;
  std::vector<uint8_t> special_;
  std::vector<int32_t> eos_ids_;
  int32_t logits_vocab_size_ = 0;
  std::vector<TrieNode> trie_;
  std::vector<int32_t> trie_tokens_;
};

}  // namespace pagoda::grammar
