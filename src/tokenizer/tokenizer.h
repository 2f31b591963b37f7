// Tokenizers that match Hugging Face byte for byte: tokenizer.json (BPE,
// byte-level or with byte fallback), tokenizer.model (SentencePiece) and the
// vocabulary embedded in a GGUF file (tokenizer.ggml.*). All const methods are
// thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace pagoda {

namespace tok {
struct TokenizerState;
}

struct ModelDescription;

class IncrementalDetokenizer;

class Tokenizer {
 public:
  // path: a folder (tokenizer.json, else tokenizer.model; plus
  // tokenizer_config.json, special_tokens_map.json, generation_config.json,
  // chat templates when present), one of those files, or a .gguf file.
  static Result<std::unique_ptr<Tokenizer>> load(const std::string& path);
  // The tokenizer of a described model (io/model_description.h): a folder's
  // tokenizer.json / tokenizer.model with the description's tokenizer files
  // and generation_config.json eos ids, or the GGUF file's vocabulary. Reads
  // no metadata file again.
  static Result<std::unique_ptr<Tokenizer>> load(const ModelDescription& model);
  ~Tokenizer();

  // Invalid UTF-8 in `text` is first replaced by U+FFFD. add_special_tokens:
  // the post-processor's tokens (BOS/EOS as tokenizer_config.json says).
  // parse_special: special-token text such as "<|im_start|>" becomes that
  // token; otherwise it is tokenized as plain text.
  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = true,
                              bool parse_special = true) const;
  // encode(text) for a chat-rendered prompt: no automatic BOS when the text
  // already starts with the BOS token text.
  std::vector<int32_t> encode_prompt(std::string_view text) const;
  // Ids outside the vocabulary are skipped.
  std::string decode(std::span<const int32_t> ids, bool skip_special_tokens = false) const;

  // The exact bytes token `id` adds to the output when decoded as a
  // continuation of earlier text (structured output matches these): the
  // byte-level alphabet unmapped, SentencePiece's ▁ as a space and a
  // byte-fallback <0xNN> as that one byte (possibly not valid UTF-8 alone);
  // a special token's text. "" outside the vocabulary.
  std::string token_bytes(int32_t id) const;

  int32_t vocab_size() const;  // including added tokens
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> pad_id() const;
  std::optional<int32_t> unk_id() const;
  std::string bos_token() const;  // "" when none
  std::string eos_token() const;
  // Every end-of-generation id known: eos, generation_config.json's
  // eos_token_id, and special tokens such as <|eot_id|>, <|im_end|>, <|end|>.
  std::vector<int32_t> eos_ids() const;
  bool add_bos() const;
  bool add_eos() const;
  // The folder's templates by transformers' rule (io/chat_templates.h:
  // chat_template.jinja and additional_chat_templates/ replace
  // tokenizer_config.json "chat_template"), or GGUF tokenizer.chat_template(.NAME).
  std::optional<std::string> chat_template(std::string_view name = "default") const;
  std::vector<std::string> chat_template_names() const;
  std::optional<int32_t> token_to_id(std::string_view token) const;
  std::string id_to_token(int32_t id) const;  // the raw vocabulary piece; "" outside
  bool is_special(int32_t id) const;
  // What was loaded, e.g. "tokenizer.json (BPE, byte-level)".
  const std::string& description() const;

 private:
  friend class IncrementalDetokenizer;
  explicit Tokenizer(std::unique_ptr<tok::TokenizerState> state);

  void encode_text(std::string_view text, bool at_origin, bool parse_special,
                   std::vector<int32_t>& ids) const;
  // Decodes as a continuation of earlier text when !at_start, and as text that
  // more ids will follow when !at_end.
  std::string decode_impl(std::span<const int32_t> ids, bool skip_special_tokens, bool at_start,
                          bool at_end) const;
  // The last id that decoding keeps may still change with the next ids (a
  // byte-fallback byte).
  bool is_open_byte(int32_t id) const;
  // The text of the last id depends on whether another id follows (BPEDecoder).
  bool last_token_depends_on_next() const;

  std::unique_ptr<tok::TokenizerState> state_;
};

// Streaming detokenization: feed ids one at a time; each call returns the
// newly final text. Never returns broken UTF-8 (incomplete characters and
// open byte-fallback runs are held back). Without prompt_ids, the
// concatenation of all returned strings plus flush() equals
// tok.decode(all fed ids, skip_special_tokens) exactly. With prompt_ids it is
// the text that decode(prompt_ids + ids) adds after decode(prompt_ids): the
// fed ids decode as a continuation (no leading-space stripping once the
// prompt has a kept id); exact whenever the prompt does not end inside a
// character. Not thread-safe; one per sequence.
class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer& tok, bool skip_special_tokens,
                         std::span<const int32_t> prompt_ids = {});
  std::string feed(int32_t id);
  std::string flush();

 private:
  bool kept(int32_t id) const;  // decoding keeps the text of id
  std::string take_new(std::string text);

  const Tokenizer* tok_;  // a pointer keeps the class copyable and assignable
  bool skip_special_;
  bool at_start_ = true;
  std::string shown_;             // text of the pending prompt ids that the caller already has
  std::vector<int32_t> pending_;  // ids since the last clean boundary
  bool hold_last_kept_ = false;   // the last kept id stays pending (last_token_depends_on_next)
};

}  // namespace pagoda
