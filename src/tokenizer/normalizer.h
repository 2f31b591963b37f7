// Text normalizers of tokenizer.json ("normalizer"), flattened into a list of
// steps applied in order. Input and output are valid UTF-8.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/unicode_data.h"

namespace pagoda::tok {

struct NormalizerStep {
  enum class Kind {
    kUnicode,  // form
    kLowercase,
    kStrip,         // left, right
    kStripAccents,  // drops marks (Mn, Mc, Me)
    kReplace,       // regex -> content
    kPrepend,       // content, when the text is not empty
    kNmt,
    kBert,  // clean_text, chinese_chars, strip_accents, lowercase
  };
  Kind kind = Kind::kLowercase;
  NormalForm form = NormalForm::kNfc;
  std::string content;
  std::shared_ptr<const Regex> regex;
  bool left = false;
  bool right = false;
  bool clean_text = false;
  bool chinese_chars = false;
  bool strip_accents = false;
  bool lowercase = false;
};

class Normalizer {
 public:
  void add(NormalizerStep step) { steps_.push_back(std::move(step)); }
  bool empty() const { return steps_.empty(); }
  // Writes the normalized `text` to `out` (cleared first). Returns whether the
  // first char of `out` stems from the first char of `text` (false when steps
  // dropped leading chars; Metaspace's prepend_scheme "first" needs it).
  // prepend false skips the Prepend steps (text that continues earlier text).
  bool normalize(std::string_view text, std::string& out, bool prepend = true) const;

 private:
  std::vector<NormalizerStep> steps_;
};

}  // namespace pagoda::tok
