#include "tokenizer/sentencepiece_model.h"

#include <sentencepiece_processor.h>

#include <algorithm>
#include <cstddef>
#include <string>

namespace pagoda::tok {

SentencePieceModel::SentencePieceModel()
    : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {}

SentencePieceModel::~SentencePieceModel() = default;

Result<std::unique_ptr<SentencePieceModel>> SentencePieceModel::load(const std::string& path) {
  std::unique_ptr<SentencePieceModel> m(new SentencePieceModel());
  auto status = m->sp_->Load(path);
  if (!status.ok()) {
    return make_error(ErrorCode::kCorrupt,
                      "cannot load SentencePiece model '" + path + "': " + status.ToString());
  }
  int n = m->sp_->GetPieceSize();
  m->pieces_.reserve(static_cast<size_t>(n));
  for (int id = 0; id < n; ++id) {
    m->pieces_.push_back(m->sp_->IdToPiece(id));
    if (!m->piece_to_id_.find(m->pieces_.back())) m->piece_to_id_.insert(m->pieces_.back(), id);
  }
  m->bos_id_ = m->sp_->bos_id();
  m->eos_id_ = m->sp_->eos_id();
  m->unk_id_ = m->sp_->unk_id();
  m->pad_id_ = m->sp_->pad_id();
  std::vector<std::string> probe, spaced;
  if (m->sp_->Encode("a", &probe).ok() && !probe.empty()) {
    m->adds_dummy_prefix_ = probe[0].rfind("\xE2\x96\x81", 0) == 0;
  }
  if (m->sp_->Encode("  a", &spaced).ok()) m->removes_extra_whitespace_ = spaced == probe;
  return m;
}

void SentencePieceModel::tokenize(std::string_view piece, std::vector<int32_t>& out) const {
  std::vector<int> ids;
  if (!sp_->Encode(piece, &ids).ok()) return;
  out.insert(out.end(), ids.begin(), ids.end());
}

void SentencePieceModel::tokenize_continuation(std::string_view piece, std::vector<int32_t>& out) const {
  if (!adds_dummy_prefix_) {
    tokenize(piece, out);
    return;
  }
  // The unknown piece's text rarely merges with what follows; a newline
  // (a byte token in most vocabularies) when it does.
  std::vector<std::string> anchors = {"\n"};
  if (const std::string* unk = unk_id_ >= 0 ? id_to_token(unk_id_) : nullptr) anchors.insert(anchors.begin(), *unk);
  std::vector<int> lead, ids;
  for (const std::string& anchor : anchors) {
    std::string text = anchor;
    text.append(piece);
    if (!sp_->Encode(anchor, &lead).ok() || !sp_->Encode(text, &ids).ok() || ids.size() <= lead.size() ||
        !std::equal(lead.begin(), lead.end(), ids.begin())) {
      continue;
    }
    out.insert(out.end(), ids.begin() + static_cast<std::ptrdiff_t>(lead.size()), ids.end());
    return;
  }
  tokenize(piece, out);
}

const std::string* SentencePieceModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return nullptr;
  return &pieces_[id];
}

bool SentencePieceModel::is_control(int32_t id) const {
  return id >= 0 && id < vocab_size() && sp_->IsControl(id);
}

bool SentencePieceModel::is_unknown(int32_t id) const {
  return id >= 0 && id < vocab_size() && sp_->IsUnknown(id);
}

}  // namespace pagoda::tok
