// The pre-tokenizer of each tokenizer.ggml.pre name that llama.cpp knows for
// BPE ("gpt2") vocabularies: the regexes that split the text one after the
// other (each keeps matches and gaps as pieces, like Split Isolated), taken
// from the Hugging Face tokenizer.json of those models.
#pragma once

#include <string_view>
#include <vector>

namespace pagoda::tok {

struct GgufPreset {
  std::vector<std::string_view> patterns;
  bool ignore_merges = false;
  bool add_bos = false;  // default of tokenizer.ggml.add_bos_token
};

// nullptr for a name llama.cpp does not know or pagoda does not support
// (kimi-k2 and afmoe need llama.cpp's hand-written splitters; gemma4,
// sarvam-moe and whitespace are not byte-level vocabularies).
const GgufPreset* find_gguf_preset(std::string_view pre);
std::vector<std::string_view> gguf_preset_names();

}  // namespace pagoda::tok
