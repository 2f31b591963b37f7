#include "tokenizer/wordpiece_model.h"

#include <algorithm>

#include "core/utf8.h"

namespace pagoda::tok {

Result<std::unique_ptr<WordPieceModel>> WordPieceModel::create(
    const std::vector<std::pair<std::string, int32_t>>& vocab, const WordPieceConfig& config) {
  std::unique_ptr<WordPieceModel> m(new WordPieceModel());
  m->config_ = config;
  int32_t max_id = -1;
  for (const auto& [piece, id] : vocab) {
    if (id < 0 || id >= kMaxTokenId) {
      return make_error(ErrorCode::kCorrupt, "WordPiece vocabulary entry '" + piece + "' has id " +
                                                 std::to_string(id) + " outside [0, 2^24)");
    }
    max_id = std::max(max_id, id);
  }
  m->pieces_.resize(static_cast<size_t>(max_id + 1));
  m->has_piece_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [piece, id] : vocab) {
    m->pieces_[id] = piece;
    m->has_piece_[id] = true;
    m->vocab_.insert(piece, id);
  }
  auto unk = m->vocab_.find(config.unk_token);
  if (!unk) {
    return make_error(ErrorCode::kCorrupt,
                      "WordPiece unk_token '" + config.unk_token + "' is not in the vocabulary");
  }
  m->unk_id_ = *unk;
  return m;
}

const std::string* WordPieceModel::id_to_token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= pieces_.size() || !has_piece_[id]) return nullptr;
  return &pieces_[id];
}

void WordPieceModel::tokenize(std::string_view word, std::vector<int32_t>& out) const {
  size_t num_chars = 0;
  for (char c : word) num_chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  if (num_chars > config_.max_input_chars_per_word) {
    out.push_back(unk_id_);
    return;
  }
  size_t first = out.size();
  std::string key;
  for (size_t start = 0; start < word.size();) {
    size_t end = word.size();
    std::optional<int32_t> id;
    while (start < end) {
      key.assign(start > 0 ? config_.continuing_subword_prefix : std::string());
      key.append(word.substr(start, end - start));
      if ((id = vocab_.find(key))) break;
      size_t prev = end;
      prev_code_point(word, prev);
      end = prev;
    }
    if (!id) {  // not coverable: the whole word is unknown
      out.resize(first);
      out.push_back(unk_id_);
      return;
    }
    out.push_back(*id);
    start = end;
  }
}

}  // namespace pagoda::tok
