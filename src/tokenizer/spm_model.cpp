#include "tokenizer/spm_model.h"

#include <queue>

#include "tokenizer/decoder.h"
#include "core/utf8.h"

namespace pagoda::tok {

Result<std::unique_ptr<SpmModel>> SpmModel::create(std::vector<std::string> tokens,
                                                   std::vector<float> scores,
                                                   std::vector<GgufTokenType> types,
                                                   int32_t unk_id) {
  if (scores.size() != tokens.size() || types.size() != tokens.size()) {
    return make_error(ErrorCode::kCorrupt,
                      "SentencePiece vocabulary: " + std::to_string(tokens.size()) +
                          " tokens but " + std::to_string(scores.size()) + " scores and " +
                          std::to_string(types.size()) + " token types");
  }
  std::unique_ptr<SpmModel> m(new SpmModel());
  m->byte_ids_.fill(-1);
  for (size_t i = 0; i < tokens.size(); ++i) {
    auto id = static_cast<int32_t>(i);
    const std::string& t = tokens[i];
    if (!m->all_.find(t)) m->all_.insert(t, id);
    if (types[i] == GgufTokenType::kNormal || types[i] == GgufTokenType::kUserDefined ||
        types[i] == GgufTokenType::kUndefined) {
      if (!m->mergeable_.find(t)) m->mergeable_.insert(t, id);
    }
    if (types[i] == GgufTokenType::kByte) {
      if (auto b = parse_byte_token(t)) m->byte_ids_[*b] = id;
    }
  }
  m->tokens_ = std::move(tokens);
  m->scores_ = std::move(scores);
  m->unk_id_ = unk_id;
  return m;
}

const std::string* SpmModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= tokens_.size()) return nullptr;
  return &tokens_[id];
}

void SpmModel::tokenize(std::string_view text, std::vector<int32_t>& out) const {
  struct Sym {
    size_t start;
    size_t len;  // 0: merged into its left neighbour
    int32_t prev;
    int32_t next;
  };
  struct Bigram {
    float score;
    int32_t left;
    int32_t right;
    size_t len;
    bool operator<(const Bigram& o) const {  // max-heap: higher score, then leftmost
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::vector<Sym> syms;
  for (size_t i = 0; i < text.size();) {
    size_t len = utf8_len(static_cast<unsigned char>(text[i]));
    auto index = static_cast<int32_t>(syms.size());
    syms.push_back({i, len, index - 1, i + len < text.size() ? index + 1 : -1});
    i += len;
  }
  std::priority_queue<Bigram> queue;
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    size_t len = syms[left].len + syms[right].len;
    auto id = mergeable_.find(text.substr(syms[left].start, len));
    if (id) queue.push({scores_[*id], left, right, len});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(syms.size()); ++i) try_add(i - 1, i);
  while (!queue.empty()) {
    Bigram b = queue.top();
    queue.pop();
    Sym& l = syms[b.left];
    Sym& r = syms[b.right];
    if (l.len == 0 || r.len == 0 || l.len + r.len != b.len) continue;
    l.len += r.len;
    r.len = 0;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = b.left;
    try_add(l.prev, b.left);
    try_add(b.left, l.next);
  }
  for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
    std::string_view s = text.substr(syms[i].start, syms[i].len);
    if (auto id = mergeable_.find(s)) {
      out.push_back(*id);
      continue;
    }
    bool bytes = true;
    for (char c : s) bytes = bytes && byte_ids_[static_cast<uint8_t>(c)] >= 0;
    if (bytes) {
      for (char c : s) out.push_back(byte_ids_[static_cast<uint8_t>(c)]);
    } else if (unk_id_ >= 0) {
      out.push_back(unk_id_);
    }
  }
}

}  // namespace pagoda::tok
