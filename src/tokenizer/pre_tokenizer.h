// Pre-tokenizers of tokenizer.json ("pre_tokenizer"), flattened into steps.
// Each step splits every current piece into smaller pieces; empty pieces are
// dropped. ByteLevel only adds the prefix space and the GPT-2 split here: the
// byte-to-unicode mapping is folded into the byte-level BPE model, which reads
// raw bytes.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/regex.h"

namespace pagoda::tok {

enum class SplitBehavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
enum class PrependScheme { kAlways, kFirst, kNever };

// The regex of GPT-2's ByteLevel pre-tokenizer.
inline constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct PreTokenizerStep {
  enum class Kind {
    kSplit,        // regex, behavior, invert
    kByteLevel,    // add_prefix_space, regex (null when use_regex is false)
    kMetaspace,    // replacement, prepend_scheme, split
    kDigits,       // individual_digits
    kPunctuation,  // behavior
    kWhitespace,   // regex (\w+|[^\w\s]+, kept), rest removed
    kWhitespaceSplit,
    kBert,
    kCharDelimiter,  // delimiter
  };
  Kind kind = Kind::kSplit;
  std::shared_ptr<const Regex> regex;
  SplitBehavior behavior = SplitBehavior::kIsolated;
  bool invert = false;
  bool add_prefix_space = false;
  std::string replacement;
  PrependScheme prepend_scheme = PrependScheme::kAlways;
  bool split = true;
  bool individual_digits = false;
  uint32_t delimiter = 0;
};

struct Piece {
  std::string_view text;
  bool at_origin = false;  // starts at offset 0 of the original input
};

class PreTokenizer {
 public:
  void add(PreTokenizerStep step) { steps_.push_back(std::move(step)); }
  bool empty() const { return steps_.empty(); }
  const std::vector<PreTokenizerStep>& steps() const { return steps_; }

  // Appends the pieces of `text` to `out`. Texts rewritten by a step (prefix
  // space, Metaspace) live in `storage`, which must outlive `out`.
  // continues: `text` continues earlier text, so the piece at its start gets
  // no prefix (no ByteLevel prefix space, no Metaspace replacement prepended)
  // and is marked at_origin (the caller tokenizes it as a continuation).
  void split(std::string_view text, bool at_origin, std::vector<Piece>& out,
             std::deque<std::string>& storage, bool continues = false) const;

 private:
  std::vector<PreTokenizerStep> steps_;
};

}  // namespace pagoda::tok
