#include "sample/bad_words.h"

#include <algorithm>

namespace pagoda {

void add_bad_word_bans(std::span<const std::vector<int32_t>> words, std::span<const int32_t> output,
                       std::vector<int32_t>& banned) {
  for (const std::vector<int32_t>& word : words) {
    if (word.empty() || word.size() > output.size() + 1) continue;
    const size_t prefix = word.size() - 1;
    if (std::equal(word.begin(), word.end() - 1, output.end() - static_cast<std::ptrdiff_t>(prefix)))
      banned.push_back(word.back());
  }
}

bool has_multi_token_word(std::span<const std::vector<int32_t>> words) {
  return std::any_of(words.begin(), words.end(), [](const auto& w) { return w.size() > 1; });
}

}  // namespace pagoda
