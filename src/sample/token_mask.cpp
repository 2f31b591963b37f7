#include "sample/token_mask.h"

#include <bit>
#include <cassert>

namespace pagoda {

std::vector<uint32_t> pack_token_mask(std::span<const int32_t> ids, int64_t vocab) {
  std::vector<uint32_t> words(static_cast<size_t>(mask_num_words(vocab)), 0u);
  for (int32_t t : ids) {
    assert(t >= 0 && t < vocab);
    words[static_cast<size_t>(t) >> 5] |= 1u << (t & 31);
  }
  return words;
}

int64_t count_allowed(std::span<const uint32_t> words) {
  int64_t n = 0;
  for (uint32_t w : words) n += std::popcount(w);
  return n;
}

}  // namespace pagoda
