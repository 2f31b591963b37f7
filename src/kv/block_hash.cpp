#include "kv/block_hash.h"

#include <xxhash.h>

#include <cstring>
#include <vector>

namespace pagoda {

namespace {

void put(std::vector<unsigned char>& buf, const void* data, size_t bytes) {
  if (bytes == 0) return;
  size_t at = buf.size();
  buf.resize(at + bytes);
  std::memcpy(buf.data() + at, data, bytes);
}

}  // namespace

BlockHash hash_block(const BlockHash& parent, std::span<const int32_t> tokens,
                     std::span<const uint64_t> extra_keys) {
  // Layout: parent.low, parent.high, num_tokens, tokens..., num_extra, extra...
  // The counts keep (tokens, extra) pairs of different splits apart.
  std::vector<unsigned char> buf;
  buf.reserve(16 + 8 + tokens.size_bytes() + 8 + extra_keys.size_bytes());
  put(buf, &parent.low, sizeof(parent.low));
  put(buf, &parent.high, sizeof(parent.high));
  uint64_t num_tokens = tokens.size();
  put(buf, &num_tokens, sizeof(num_tokens));
  put(buf, tokens.data(), tokens.size_bytes());
  uint64_t num_extra = extra_keys.size();
  put(buf, &num_extra, sizeof(num_extra));
  put(buf, extra_keys.data(), extra_keys.size_bytes());
  XXH128_hash_t h = XXH3_128bits(buf.data(), buf.size());
  return BlockHash{h.low64, h.high64};
}

}  // namespace pagoda
