// Decoders of tokenizer.json ("decoder"): a chain of steps over the list of
// token pieces, joined at the end (Hugging Face Decoder::decode_chain).
// `at_start` false decodes a continuation of earlier text: start-of-text
// rules (Metaspace's first-token space, Strip after Fuse, WordPiece's first
// token, the space joiner of a tokenizer without decoder) do not apply.
// `at_end` false decodes text that more tokens will follow (BPEDecoder turns
// the suffix of the very last token into nothing, of the others into a space).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/regex.h"

namespace pagoda::tok {

struct DecoderStep {
  enum class Kind {
    kByteLevel,     // byte alphabet -> bytes, lossy UTF-8 of the whole; one token out
    kByteFallback,  // runs of <0xXX> -> UTF-8 (or one U+FFFD per byte when invalid)
    kFuse,          // one token out
    kStrip,         // content (one char), start, stop
    kReplace,       // regex -> content
    kMetaspace,     // replacement, prepend_scheme
    kWordPiece,     // content = prefix, cleanup
    kBpe,           // content = suffix
  };
  Kind kind = Kind::kFuse;
  std::string content;
  std::shared_ptr<const Regex> regex;
  std::string replacement;
  PrependScheme prepend_scheme = PrependScheme::kAlways;
  size_t start = 0;
  size_t stop = 0;
  bool cleanup = false;
};

class Decoder {
 public:
  void add(DecoderStep step) { steps_.push_back(std::move(step)); }
  // A tokenizer without decoder joins pieces with spaces.
  bool empty() const { return steps_.empty(); }
  bool has(DecoderStep::Kind kind) const;

  // raw_bytes: ByteLevel and ByteFallback keep bytes that are not valid
  // UTF-8 as they are instead of replacing them with U+FFFD.
  std::string decode(std::vector<std::string> tokens, bool at_start, bool at_end = true,
                     bool raw_bytes = false) const;

 private:
  std::vector<DecoderStep> steps_;
};

// The decoder of SentencePiece-style vocabularies (transformers' LlamaConverter):
// Replace("▁" -> " "), ByteFallback, Fuse, then Strip `num_leading_spaces`
// leading spaces (1 when encoding prepends one).
Decoder sentencepiece_decoder(size_t num_leading_spaces);

// "<0xAB>" -> 0xAB.
std::optional<uint8_t> parse_byte_token(std::string_view token);

}  // namespace pagoda::tok
