// A SentencePiece model file (tokenizer.model) through libsentencepiece: the
// library normalizes and encodes each text segment exactly as SentencePiece.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/result.h"
#include "tokenizer/flat_maps.h"
#include "tokenizer/model.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace pagoda::tok {

class SentencePieceModel final : public Model {
 public:
  static Result<std::unique_ptr<SentencePieceModel>> load(const std::string& path);
  ~SentencePieceModel() override;

  void tokenize(std::string_view piece, std::vector<int32_t>& out) const override;
  // Without the dummy prefix, as transformers' non-legacy Llama tokenizer:
  // the ids of an anchor + `piece`, less those of the anchor alone, for the
  // first anchor whose ids lead unchanged (the unknown piece's text, else a
  // newline); plain tokenize() when neither does.
  void tokenize_continuation(std::string_view piece, std::vector<int32_t>& out) const override;
  std::optional<int32_t> token_to_id(std::string_view token) const override {
    return piece_to_id_.find(token);
  }
  const std::string* id_to_token(int32_t id) const override;
  int32_t vocab_size() const override { return static_cast<int32_t>(pieces_.size()); }

  bool is_control(int32_t id) const;
  bool is_unknown(int32_t id) const;
  // Whether encoding prepends the dummy "▁" (normalizer add_dummy_prefix).
  bool adds_dummy_prefix() const { return adds_dummy_prefix_; }
  // Whether the normalizer drops leading and repeated spaces
  // (remove_extra_whitespaces); SentencePiece then decodes without any
  // leading space.
  bool removes_extra_whitespace() const { return removes_extra_whitespace_; }
  std::optional<int32_t> bos_id() const { return special_id(bos_id_); }
  std::optional<int32_t> eos_id() const { return special_id(eos_id_); }
  std::optional<int32_t> unk_id() const { return special_id(unk_id_); }
  std::optional<int32_t> pad_id() const { return special_id(pad_id_); }

 private:
  SentencePieceModel();
  std::optional<int32_t> special_id(int id) const {
    if (id < 0 || id >= vocab_size()) return std::nullopt;
    return id;
  }

  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  std::vector<std::string> pieces_;
  StringIdMap piece_to_id_;
  bool adds_dummy_prefix_ = true;
  bool removes_extra_whitespace_ = false;
  int bos_id_ = -1, eos_id_ = -1, unk_id_ = -1, pad_id_ = -1;
};

}  // namespace pagoda::tok
