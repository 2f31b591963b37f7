#include "grammar/stack_set.h"

#include <algorithm>
#include <cstring>

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace pagoda::grammar {

namespace {

using Kind = Element::Kind;

uint64_t mix(uint64_t h, uint32_t v) {
  h ^= v + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
  return h * 0xFF51AFD7ED558CCDULL;
}

constexpr uint64_t kHashSeed = 0x243F6A8885A308D3ULL;

// A stack's hash, extendable frame by frame (the prefix's is computed once
// per expansion, not once per emitted stack).
uint64_t hash_frames(uint64_t h, std::span<const uint32_t> frames) {
  for (uint32_t f : frames) h = mix(h, f);
  return h;
}

}  // namespace

StackSet StackSet::start(const Grammar& g) {
  StackSet s;
  // Expand a reference to the root with nothing to return to.
  for (uint32_t i = g.first_begin[g.root]; i < g.first_begin[g.root + 1];
       i += 1 + g.first_stacks[i]) {
    s.emit({}, kHashSeed, {}, {g.first_stacks.data() + i + 1, g.first_stacks[i]});
  }
  if (g.nullable[g.root]) s.emit({}, kHashSeed, {}, {});
  s.canonicalize();
  return s;
}

StackSet StackSet::of_stack(std::span<const uint32_t> frames) {
  StackSet s;
  s.emit({}, kHashSeed, {}, frames);
  return s;
}

StackSet StackSet::resume(const Grammar& g, std::span<const uint32_t> frames) {
  StackSet s;
  if (frames.empty()) {
    s.emit({}, kHashSeed, {}, {});
    return s;
  }
  s.scratch_.assign(frames.begin(), frames.end() - 1);
  std::vector<uint32_t> scratch;
  scratch.swap(s.scratch_);
  if (!s.expand(g, scratch, frames.back())) s.clear();
  return s;
}

void StackSet::clear() {
  data_.clear();
  offsets_.clear();
  hashes_.clear();
}

bool StackSet::can_end() const {
  for (uint32_t off : offsets_) {
    if (data_[off] == 0) return true;
  }
  return false;
}

ByteSet StackSet::next_bytes(const Grammar& g) const {
  ByteSet set;
  for (uint32_t off : offsets_) {
    const uint32_t len = data_[off];
    if (len == 0) continue;
    set.add_all(g.byte_sets[g.elements[data_[off + len]].value]);
  }
  return set;
}

bool StackSet::emit(std::span<const uint32_t> prefix, uint64_t prefix_hash,
                    std::span<const uint32_t> middle, std::span<const uint32_t> suffix) {
  const size_t len = prefix.size() + middle.size() + suffix.size();
  if (len > kMaxStackDepth) return false;
  const uint32_t off = static_cast<uint32_t>(data_.size());
  data_.push_back(static_cast<uint32_t>(len));
  data_.insert(data_.end(), prefix.begin(), prefix.end());
  data_.insert(data_.end(), middle.begin(), middle.end());
  data_.insert(data_.end(), suffix.begin(), suffix.end());
  const uint64_t h =
      mix(hash_frames(hash_frames(prefix_hash, middle), suffix), static_cast<uint32_t>(len));
  for (size_t k = 0; k < hashes_.size(); ++k) {
    if (hashes_[k] != h) continue;
    const uint32_t other = offsets_[k];
    if (data_[other] == len &&
        std::memcmp(&data_[other + 1], &data_[off + 1], len * sizeof(uint32_t)) == 0) {
      data_.resize(off);  // already present
      return true;
    }
  }
  if (offsets_.size() >= kMaxStacks) return false;
  offsets_.push_back(off);
  hashes_.push_back(h);
  return true;
}

bool StackSet::expand(const Grammar& g, std::vector<uint32_t>& frames, uint32_t pos) {
  uint64_t frames_hash = hash_frames(kHashSeed, frames);
  for (;;) {
    const Element& e = g.elements[pos];
    if (e.kind == Kind::kBytes) return emit(frames, frames_hash, {}, {&pos, 1});
    if (e.kind == Kind::kEnd) {
      if (frames.empty()) return emit({}, kHashSeed, {}, {});
      pos = frames.back();
      frames.pop_back();
      frames_hash = hash_frames(kHashSeed, frames);
      continue;
    }
    // A reference: push the return position (none when the alternative ends
    // here: a tail call), then every first stack of the rule.
    const uint32_t next = pos + 1;
    const bool tail = g.elements[next].kind == Kind::kEnd;
    const std::span<const uint32_t> ret = tail ? std::span<const uint32_t>() : std::span(&next, 1);
    for (uint32_t i = g.first_begin[e.value]; i < g.first_begin[e.value + 1];
         i += 1 + g.first_stacks[i]) {
      if (!emit(frames, frames_hash, ret, {g.first_stacks.data() + i + 1, g.first_stacks[i]})) {
        return false;
      }
    }
    if (!g.nullable[e.value]) return true;
    pos = next;
  }
}

bool StackSet::advance(const Grammar& g, uint8_t byte, StackSet& out) const {
  out.clear();
  for (uint32_t off : offsets_) {
    const uint32_t len = data_[off];
    if (len == 0) continue;
    const uint32_t top = data_[off + len];
    if (!g.byte_sets[g.elements[top].value].contains(byte)) continue;
    out.scratch_.assign(data_.begin() + off + 1, data_.begin() + off + len);
    if (!out.expand(g, out.scratch_, top + 1)) {
      out.clear();
      return false;
    }
  }
  return !out.empty();
}

uint64_t StackSet::canonicalize() {
  std::vector<uint32_t> order(offsets_.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  auto record = [&](uint32_t i) {
    const uint32_t off = offsets_[i];
    return std::span<const uint32_t>(data_.data() + off, data_[off] + 1);
  };
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    auto x = record(a), y = record(b);
    return std::lexicographical_compare(x.begin(), x.end(), y.begin(), y.end());
  });
  std::vector<uint32_t> data, offsets;
  std::vector<uint64_t> hashes;
  data.reserve(data_.size());
  for (uint32_t i : order) {
    offsets.push_back(static_cast<uint32_t>(data.size()));
    hashes.push_back(hashes_[i]);
    auto r = record(i);
    data.insert(data.end(), r.begin(), r.end());
  }
  data_.swap(data);
  offsets_.swap(offsets);
  hashes_.swap(hashes);
  return XXH3_64bits(data_.data(), data_.size() * sizeof(uint32_t));
}

}  // namespace pagoda::grammar
