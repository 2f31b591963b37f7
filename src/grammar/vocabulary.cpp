#include "grammar/vocabulary.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace pagoda::grammar {

Result<std::shared_ptr<const GrammarVocabulary>> GrammarVocabulary::create(
    std::vector<std::string> token_bytes, std::vector<uint8_t> special,
    std::vector<int32_t> eos_ids, int32_t logits_vocab_size) {
  const auto n = static_cast<int64_t>(token_bytes.size());
  if (special.size() != token_bytes.size()) {
    return make_error(ErrorCode::kInternal,
                      "grammar vocabulary: special flags do not match the tokens");
  }
  if (logits_vocab_size < n) {
    return make_error(ErrorCode::kInvalidArgument, "grammar vocabulary: the logits' vocabulary (" +
                                                       std::to_string(logits_vocab_size) +
                                                       ") is smaller than the tokenizer's (" +
                                                       std::to_string(n) + ")");
  }
  std::vector<int32_t> eos;
  for (int32_t id : eos_ids) {
    if (id >= 0 && id < logits_vocab_size) eos.push_back(id);
  }
  std::sort(eos.begin(), eos.end());
  eos.erase(std::unique(eos.begin(), eos.end()), eos.end());
  std::shared_ptr<GrammarVocabulary> v(new GrammarVocabulary());
  v->bytes_ = std::move(token_bytes);
  v->special_ = std::move(special);
  v->eos_ids_ = std::move(eos);
  v->logits_vocab_size_ = logits_vocab_size;
  v->build_trie();
  return std::shared_ptr<const GrammarVocabulary>(std::move(v));
}

Result<std::shared_ptr<const GrammarVocabulary>> GrammarVocabulary::from_tokenizer(
    const Tokenizer& tokenizer, std::span<const int32_t> eos_ids, int32_t logits_vocab_size) {
  // Ids at or past the logits' vocabulary can never be sampled.
  const int32_t n = std::min(tokenizer.vocab_size(), logits_vocab_size);
  std::vector<std::string> bytes(static_cast<size_t>(n));
  std::vector<uint8_t> special(static_cast<size_t>(n));
  for (int32_t id = 0; id < n; ++id) {
    bytes[id] = tokenizer.token_bytes(id);
    special[id] = tokenizer.is_special(id);
  }
  return create(std::move(bytes), std::move(special), {eos_ids.begin(), eos_ids.end()},
                logits_vocab_size);
}

const std::string& GrammarVocabulary::token_bytes(int32_t id) const {
  static const std::string kEmpty;
  return id >= 0 && id < num_tokens() ? bytes_[id] : kEmpty;
}

bool GrammarVocabulary::is_special(int32_t id) const {
  return id >= 0 && id < num_tokens() && special_[id];
}

bool GrammarVocabulary::is_eos(int32_t id) const {
  return std::binary_search(eos_ids_.begin(), eos_ids_.end(), id);
}

// Sorted token bytes give the preorder directly: each token's node path
// shares the previous token's path up to their common prefix.
void GrammarVocabulary::build_trie() {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < num_tokens(); ++id) {
    if (!special_[id] && !bytes_[id].empty() && !is_eos(id)) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) {
    return bytes_[a] != bytes_[b] ? bytes_[a] < bytes_[b] : a < b;
  });
  trie_.assign(1, TrieNode{});
  trie_tokens_.clear();
  trie_tokens_.reserve(ids.size());
  std::vector<uint32_t> path{0};  // node per depth of the current token
  const std::string* prev = nullptr;
  for (int32_t id : ids) {
    const std::string& b = bytes_[id];
    size_t common = 0;
    if (prev) {
      while (common < b.size() && common < prev->size() && (*prev)[common] == b[common]) ++common;
    }
    while (path.size() > common + 1) {
      trie_[path.back()].end = static_cast<uint32_t>(trie_.size());
      path.pop_back();
    }
    for (size_t d = common; d < b.size(); ++d) {
      TrieNode node;
      node.byte = static_cast<uint8_t>(b[d]);
      node.tokens_begin = node.tokens_end = static_cast<uint32_t>(trie_tokens_.size());
      path.push_back(static_cast<uint32_t>(trie_.size()));
      trie_.push_back(node);
    }
    TrieNode& leaf = trie_[path.back()];
    if (leaf.tokens_end != trie_tokens_.size())
      leaf.tokens_begin = static_cast<uint32_t>(trie_tokens_.size());
    trie_tokens_.push_back(id);
    leaf.tokens_end = static_cast<uint32_t>(trie_tokens_.size());
    prev = &b;
  }
  while (!path.empty()) {
    trie_[path.back()].end = static_cast<uint32_t>(trie_.size());
    path.pop_back();
  }
}

}  // namespace pagoda::grammar
