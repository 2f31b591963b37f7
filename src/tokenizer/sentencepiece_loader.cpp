// tokenizer.model without tokenizer.json: libsentencepiece encodes each text
// segment; control pieces ([INST], <s>, ...) are special tokens; decoding is
// the pipeline transformers' LlamaConverter writes for such a model.
#include <cstdint>

#include "tokenizer/sentencepiece_model.h"
#include "tokenizer/tokenizer_state.h"

namespace pagoda::tok {

Result<std::unique_ptr<TokenizerState>> load_sentencepiece_file(const std::string& model_path) {
  PAGODA_ASSIGN_OR_RETURN(auto model, SentencePieceModel::load(model_path));
  auto state = std::make_unique<TokenizerState>();
  state->description = "tokenizer.model (SentencePiece)";
  for (int32_t id = 0; id < model->vocab_size(); ++id) {
    if (!model->is_control(id) && !model->is_unknown(id)) continue;
    AddedToken a;
    a.content = *model->id_to_token(id);
    a.id = id;
    a.special = true;
    a.normalized = false;
    state->added.add(std::move(a));
  }
  state->bos_id = model->bos_id();
  state->eos_id = model->eos_id();
  state->unk_id = model->unk_id();
  state->pad_id = model->pad_id();
  if (state->bos_id) {
    state->bos_token = *model->id_to_token(*state->bos_id);
    state->prefix_ids.push_back(*state->bos_id);
  }
  if (state->eos_id) state->eos_token = *model->id_to_token(*state->eos_id);

  // SentencePiece drops every leading space when it removes extra whitespace.
  size_t strip =
      model->removes_extra_whitespace() ? SIZE_MAX : (model->adds_dummy_prefix() ? 1 : 0);
  state->decoder = sentencepiece_decoder(strip);
  state->model = std::move(model);
  return state;
}

}  // namespace pagoda::tok
