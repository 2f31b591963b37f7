// Added tokens (special and user-added) and the leftmost-longest matcher that
// cuts them out of the input before normalization, like Hugging Face's
// AddedVocabulary (single_word, lstrip, rstrip, normalized).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pagoda::tok {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;  // matched against the normalized text instead of the raw text
  bool single_word = false;
};

// A piece of the input: text (id < 0) or an added token.
struct Segment {
  size_t start = 0;
  size_t end = 0;
  int32_t id = -1;
};

// Byte trie over token contents with leftmost-longest search.
class TokenTrie {
 public:
  void insert(std::string_view key, int32_t value);
  bool empty() const { return nodes_.size() <= 1; }
  // Longest key that starts at text[pos]; returns its length (0: none).
  size_t longest_at(std::string_view text, size_t pos, int32_t* value) const;
  // First position >= pos where some key may start.
  bool may_start(unsigned char c) const { return first_bytes_[c]; }

 private:
  struct Node {
    std::vector<std::pair<unsigned char, int32_t>> children;
    int32_t value = -1;
  };
  std::vector<Node> nodes_{Node{}};
  std::array<bool, 256> first_bytes_{};
};

class AddedVocab {
 public:
  // Later duplicates of an id replace earlier ones.
  void add(AddedToken token);
  // Builds the matchers; `normalized_contents[i]` is the content of the i-th
  // normalized token after the tokenizer's normalizer (by id order of add()).
  void build(const std::unordered_map<int32_t, std::string>& normalized_contents);

  bool empty() const { return by_id_.empty(); }
  bool has_normalized_tokens() const { return !normalized_trie_.empty(); }
  const AddedToken* find(int32_t id) const;
  std::optional<int32_t> find(std::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

  // Splits `text` into text segments and added tokens, covering all of it.
  // `normalized_pass`: match the normalized tokens (on normalized text)
  // instead of the raw ones. Special tokens are only cut out when
  // `parse_special`.
  void split(std::string_view text, bool normalized_pass, bool parse_special,
             std::vector<Segment>& out) const;

 private:
  std::vector<AddedToken> tokens_;  // by insertion order
  std::unordered_map<int32_t, size_t> by_id_;
  std::unordered_map<std::string, int32_t> by_content_;
  TokenTrie raw_trie_;
  TokenTrie normalized_trie_;
};

}  // namespace pagoda::tok
