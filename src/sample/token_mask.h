// Packed allowed-token masks, the layout of SamplingBatch::allowed_words:
// ceil(V / 32) words, bit t % 32 of word t / 32 set = token t allowed, bits
// at V and beyond clear.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace pagoda {

// Words of one mask over a vocabulary of `vocab` tokens.
inline int64_t mask_num_words(int64_t vocab) { return (vocab + 31) / 32; }

// The mask allowing exactly `ids` (each in [0, vocab); repeats are harmless).
std::vector<uint32_t> pack_token_mask(std::span<const int32_t> ids, int64_t vocab);

// Number of tokens a mask allows.
int64_t count_allowed(std::span<const uint32_t> words);

}  // namespace pagoda
