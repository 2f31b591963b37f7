// Content hash of one full KV block, chained through the previous block's
// hash so that equal hashes mean equal prefixes (prefix caching).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace pagoda {

// 128-bit XXH3 digest: collisions are negligible, and cache hits are still
// confirmed by comparing the stored tokens (BlockPool::find_cached).
struct BlockHash {
  uint64_t low = 0;
  uint64_t high = 0;
  bool operator==(const BlockHash&) const = default;
};

// Parent hash of a sequence's first block.
inline constexpr BlockHash kRootBlockHash{};

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const {
    return static_cast<size_t>(h.low ^ (h.high * 0x9E3779B97F4A7C15ull));
  }
};

// Hash of a full block: XXH3-128 over (parent hash, token ids, extra keys).
// `extra_keys` separate caches that must not share KV for equal tokens
// (LoRA adapter id, multimodal content hash, cache salt); empty for none.
BlockHash hash_block(const BlockHash& parent, std::span<const int32_t> tokens,
                     std::span<const uint64_t> extra_keys);

}  // namespace pagoda
