#include "tokenizer/bpe_model.h"

#include <algorithm>
#include <climits>
#include <queue>

#include "tokenizer/byte_level.h"
#include "core/utf8.h"

namespace pagoda::tok {

namespace {

// Words up to this many symbols merge with a linear scan over cached pair
// ranks; longer ones use a heap.
constexpr size_t kShortWord = 48;

std::string byte_token_name(uint8_t b) {
  static const char* kHex = "0123456789ABCDEF";
  return std::string("<0x") + kHex[b >> 4] + kHex[b & 15] + ">";
}

}  // namespace

Result<std::unique_ptr<BpeModel>> BpeModel::create(
    const std::vector<std::pair<std::string, int32_t>>& vocab,
    const std::vector<std::pair<std::string, std::string>>& merges, const BpeConfig& config) {
  std::unique_ptr<BpeModel> m(new BpeModel(config));
  int32_t max_id = -1;
  for (const auto& [piece, id] : vocab) {
    if (id < 0 || id >= kMaxTokenId) {
      return make_error(ErrorCode::kCorrupt, "BPE vocabulary entry '" + piece + "' has id " +
                                                 std::to_string(id) + " outside [0, 2^24)");
    }
    max_id = std::max(max_id, id);
  }
  m->id_to_piece_.resize(static_cast<size_t>(max_id + 1));
  m->has_piece_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [piece, id] : vocab) {
    m->id_to_piece_[id] = piece;
    m->has_piece_[id] = true;
    m->piece_to_id_.insert(piece, id);
  }
  // The input-alphabet index; on a collision the first (lowest) id wins.
  for (int32_t id = 0; id <= max_id; ++id) {
    if (!m->has_piece_[id]) continue;
    const std::string& piece = m->id_to_piece_[id];
    std::optional<std::string> key =
        config.byte_level ? byte_level_decode(piece) : std::optional<std::string>(piece);
    if (key && !m->lookup_.find(*key)) m->lookup_.insert(*key, id);
  }
  auto to_key = [&](const std::string& s) {
    if (!config.byte_level) return s;
    return byte_level_decode(s).value_or(s);
  };
  m->prefix_key_ = to_key(config.continuing_subword_prefix);
  m->suffix_key_ = to_key(config.end_of_word_suffix);
  m->all_fallback_ = true;
  for (int b = 0; b < 256; ++b) {
    m->byte_ids_[b] =
        m->lookup_.find(std::string_view(reinterpret_cast<const char*>(&b), 1)).value_or(-1);
    m->fallback_ids_[b] =
        m->piece_to_id_.find(byte_token_name(static_cast<uint8_t>(b))).value_or(-1);
    if (m->fallback_ids_[b] < 0) m->all_fallback_ = false;
  }
  if (config.unk_token) m->unk_id_ = m->piece_to_id_.find(*config.unk_token).value_or(-1);
  PAGODA_RETURN_IF_ERROR(m->add_merges(merges));
  return m;
}

Status BpeModel::add_merges(const std::vector<std::pair<std::string, std::string>>& merges) {
  size_t prefix_len = config_.continuing_subword_prefix.size();
  auto add = [&](size_t rank) -> Status {
    const auto& [a, b] = merges[rank];
    auto ia = piece_to_id_.find(a);
    auto ib = piece_to_id_.find(b);
    std::string joined = a + (b.size() >= prefix_len ? b.substr(prefix_len) : b);
    auto inew = piece_to_id_.find(joined);
    if (!ia || !ib || !inew) {
      if (!config_.strict_merges) return Status::Ok();
      const std::string& missing = !ia ? a : (!ib ? b : joined);
      return make_error(ErrorCode::kCorrupt, "BPE merge '" + a + " " + b + "' (rank " +
                                                 std::to_string(rank) + ") names token '" +
                                                 missing + "' that is not in the vocabulary");
    }
    merges_.insert(*ia, *ib, {static_cast<int32_t>(rank), *inew});
    return Status::Ok();
  };
  // MergeMap keeps the first entry of a pair: walk backwards to let later ones win.
  if (config_.later_merge_wins) {
    for (size_t r = merges.size(); r-- > 0;) PAGODA_RETURN_IF_ERROR(add(r));
  } else {
    for (size_t r = 0; r < merges.size(); ++r) PAGODA_RETURN_IF_ERROR(add(r));
  }
  return Status::Ok();
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_piece_.size() || !has_piece_[id]) return nullptr;
  return &id_to_piece_[id];
}

// Hugging Face BPE::merge_word: one symbol per char (per byte when byte-level)
// with the subword prefix/suffix, byte fallback and (fused) unknown tokens.
void BpeModel::initial_symbols(std::string_view word, std::vector<int32_t>& syms) const {
  bool plain = prefix_key_.empty() && suffix_key_.empty();
  if (config_.byte_level && plain && unk_id_ < 0 && !config_.byte_fallback) {
    for (char c : word) {
      int32_t id = byte_ids_[static_cast<uint8_t>(c)];
      if (id >= 0) syms.push_back(id);
    }
    return;
  }
  int32_t pending_unk = -1;
  std::string key;
  size_t i = 0;
  while (i < word.size()) {
    size_t start = i;
    i += config_.byte_level ? 1 : utf8_len(static_cast<unsigned char>(word[i]));
    std::optional<int32_t> id;
    if (plain) {
      id = lookup_.find(word.substr(start, i - start));
    } else {
      key.clear();
      if (start > 0) key += prefix_key_;
      key.append(word.substr(start, i - start));
      if (i >= word.size()) key += suffix_key_;
      id = lookup_.find(key);
    }
    if (id) {
      if (pending_unk >= 0) syms.push_back(pending_unk);
      pending_unk = -1;
      syms.push_back(*id);
      continue;
    }
    std::string_view chars = plain ? word.substr(start, i - start) : std::string_view(key);
    if (config_.byte_fallback) {
      bool all = std::all_of(chars.begin(), chars.end(),
                             [&](char c) { return fallback_ids_[static_cast<uint8_t>(c)] >= 0; });
      if (all) {
        for (char c : chars) syms.push_back(fallback_ids_[static_cast<uint8_t>(c)]);
        continue;
      }
    }
    if (unk_id_ >= 0) {
      if (pending_unk >= 0 && !config_.fuse_unk) syms.push_back(pending_unk);
      pending_unk = unk_id_;
    }
  }
  if (pending_unk >= 0) syms.push_back(pending_unk);
}

void BpeModel::merge(std::vector<int32_t>& syms) const {
  size_t n = syms.size();
  if (n < 2) return;
  if (n > kShortWord) {
    merge_long(syms);
    return;
  }
  // ranks[i], news[i]: the merge of pair (syms[i], syms[i+1]).
  int32_t ranks[kShortWord];
  int32_t news[kShortWord];
  auto lookup = [&](size_t i) {
    const MergeResult* m = merges_.find(syms[i], syms[i + 1]);
    ranks[i] = m ? m->rank : INT32_MAX;
    news[i] = m ? m->new_id : -1;
  };
  for (size_t i = 0; i + 1 < n; ++i) lookup(i);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; ++i) {
      if (ranks[i] < ranks[best]) best = i;
    }
    if (ranks[best] == INT32_MAX) break;
    syms[best] = news[best];
    for (size_t i = best + 1; i + 1 < n; ++i) syms[i] = syms[i + 1];
    for (size_t i = best + 1; i + 2 < n; ++i) {
      ranks[i] = ranks[i + 1];
      news[i] = news[i + 1];
    }
    --n;
    if (best > 0) lookup(best - 1);
    if (best + 1 < n) lookup(best);
  }
  syms.resize(n);
}

void BpeModel::merge_long(std::vector<int32_t>& syms) const {
  struct Sym {
    int32_t id;
    int32_t prev;
    int32_t next;
    bool alive;
  };
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  int32_t n = static_cast<int32_t>(syms.size());
  std::vector<Sym> s(n);
  for (int32_t i = 0; i < n; ++i) s[i] = {syms[i], i - 1, i + 1 < n ? i + 1 : -1, true};
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto push = [&](int32_t pos) {
    if (pos < 0 || s[pos].next < 0) return;
    const MergeResult* m = merges_.find(s[pos].id, s[s[pos].next].id);
    if (m) heap.push({m->rank, pos, m->new_id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) push(i);
  while (!heap.empty()) {
    Candidate c = heap.top();
    heap.pop();
    Sym& left = s[c.pos];
    if (!left.alive || left.next < 0) continue;
    const MergeResult* m = merges_.find(left.id, s[left.next].id);
    if (m == nullptr || m->new_id != c.new_id) continue;
    Sym& right = s[left.next];
    left.id = c.new_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) s[right.next].prev = c.pos;
    push(left.prev);
    push(c.pos);
  }
  syms.clear();
  for (int32_t i = 0; i >= 0 && i < n; i = s[i].next) syms.push_back(s[i].id);
}

void BpeModel::tokenize(std::string_view piece, std::vector<int32_t>& out) const {
  if (config_.ignore_merges) {
    if (auto id = lookup_.find(piece)) {
      out.push_back(*id);
      return;
    }
  }
  uint64_t hash = 0;
  bool cacheable = piece.size() <= WordCache::kMaxWordBytes;
  if (cacheable) {
    hash = hash_bytes(piece);
    if (cache_.get(piece, hash, out)) return;
  }
  thread_local std::vector<int32_t> syms;
  syms.clear();
  initial_symbols(piece, syms);
  merge(syms);
  out.insert(out.end(), syms.begin(), syms.end());
  if (cacheable) cache_.put(piece, hash, syms);
}

}  // namespace pagoda::tok
