// The tokenizer embedded in a GGUF file (tokenizer.ggml.*), tokenized the way
// llama.cpp does: "gpt2" = byte-level BPE by merge rank after the named
// pre-tokenizer, "llama" = SentencePiece-style BPE by score with byte fallback.
#include <algorithm>
#include <cctype>

#include "io/chat_templates.h"
#include "io/gguf.h"
#include "io/gguf_model.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/gguf_presets.h"
#include "tokenizer/spm_model.h"
#include "tokenizer/tokenizer_state.h"
#include "tokenizer/wordpiece_model.h"

namespace pagoda::tok {

namespace {

constexpr const char* kSpace = "\xE2\x96\x81";  // ▁

Error field_error(const std::string& path, const std::string& what) {
  return make_error(ErrorCode::kCorrupt, "GGUF '" + path + "': " + what);
}

std::optional<int32_t> id_key(const GgufFile& g, const char* key, int32_t vocab_size) {
  auto v = g.get_int(key);
  if (!v || *v < 0 || *v >= vocab_size) return std::nullopt;
  return static_cast<int32_t>(*v);
}

std::shared_ptr<const Regex> must_compile(std::string_view pattern) {
  auto re = Regex::compile(pattern);
  return re.ok() ? std::shared_ptr<const Regex>(std::move(re).value()) : nullptr;
}

Status build_gpt2(const GgufFile& g, const std::string& path,
                  const std::vector<std::string>& tokens, TokenizerState& state, bool& add_bos) {
  std::string pre = g.get_string("tokenizer.ggml.pre").value_or("default");
  const GgufPreset* preset = find_gguf_preset(pre);
  if (preset == nullptr) {
    return make_error(ErrorCode::kUnsupported,
                      "GGUF '" + path + "': pre-tokenizer '" + pre + "' is not supported");
  }
  const std::vector<std::string>* merge_lines = g.get_string_array("tokenizer.ggml.merges");
  if (merge_lines == nullptr) return field_error(path, "tokenizer.ggml.merges is missing");
  std::vector<std::pair<std::string, std::string>> merges;
  merges.reserve(merge_lines->size());
  for (const std::string& line : *merge_lines) {
    size_t space = line.find(' ', 1);
    if (space == std::string::npos) {
      merges.emplace_back();  // keeps later ranks in place; never matches
      continue;
    }
    merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  std::vector<std::pair<std::string, int32_t>> vocab;
  vocab.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) vocab.emplace_back(tokens[i], static_cast<int32_t>(i));
  BpeConfig config;
  config.byte_level = true;
  config.ignore_merges = preset->ignore_merges;
  config.strict_merges = false;
  config.later_merge_wins = false;
  PAGODA_ASSIGN_OR_RETURN(auto model, BpeModel::create(vocab, merges, config));
  state.model = std::move(model);
  for (std::string_view pattern : preset->patterns) {
    PreTokenizerStep s;
    s.kind = PreTokenizerStep::Kind::kSplit;
    s.regex = must_compile(pattern);
    if (!s.regex) return field_error(path, "preset regex of '" + pre + "' does not compile");
    s.behavior = SplitBehavior::kIsolated;
    state.pre_tokenizer.add(std::move(s));
  }
  DecoderStep d;
  d.kind = DecoderStep::Kind::kByteLevel;
  state.decoder.add(std::move(d));
  add_bos = preset->add_bos;
  state.description = "GGUF gpt2 (byte-level BPE, pre '" + pre + "')";
  return Status::Ok();
}

Status build_llama(const GgufFile& g, const std::string& path,
                   const std::vector<std::string>& tokens, const std::vector<GgufTokenType>& types,
                   TokenizerState& state) {
  auto scores_d = g.get_float_array("tokenizer.ggml.scores");
  std::vector<float> scores(tokens.size(), 0.0f);
  if (scores_d) {
    if (scores_d->size() < tokens.size()) return field_error(path, "fewer scores than tokens");
    for (size_t i = 0; i < tokens.size(); ++i) scores[i] = static_cast<float>((*scores_d)[i]);
  }
  int32_t n = static_cast<int32_t>(tokens.size());
  int32_t unk = id_key(g, "tokenizer.ggml.unknown_token_id", n).value_or(n > 0 ? 0 : -1);
  PAGODA_ASSIGN_OR_RETURN(auto model, SpmModel::create(tokens, scores, types, unk));
  state.model = std::move(model);
  bool space_prefix = g.get_bool("tokenizer.ggml.add_space_prefix").value_or(true);
  auto space_re = must_compile(" ");
  if (space_prefix) {
    NormalizerStep p;
    p.kind = NormalizerStep::Kind::kPrepend;
    p.content = std::string(kSpace);
    state.normalizer.add(std::move(p));
  }
  NormalizerStep r;
  r.kind = NormalizerStep::Kind::kReplace;
  r.regex = space_re;
  r.content = std::string(kSpace);
  state.normalizer.add(std::move(r));
  state.decoder = sentencepiece_decoder(space_prefix ? 1 : 0);
  state.description = "GGUF llama (SentencePiece BPE)";
  return Status::Ok();
}

// convert_hf_to_gguf.py writes WordPiece vocabularies with a phantom space:
// "▁word" starts a word, a bare piece continues one ("##piece" in
// tokenizer.json), "[X]" is special. Undone here, then tokenized as BERT.
Status build_bert(const GgufFile& g, const std::string& path,
                  const std::vector<std::string>& tokens, TokenizerState& state) {
  std::vector<std::pair<std::string, int32_t>> vocab;
  vocab.reserve(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    std::string piece;
    if (t.rfind(kSpace, 0) == 0) {
      piece = t.substr(3);
    } else if (t.size() >= 2 && t.front() == '[' && t.back() == ']') {
      piece = t;
    } else {
      piece = "##" + t;
    }
    vocab.emplace_back(std::move(piece), static_cast<int32_t>(i));
  }
  int32_t n = static_cast<int32_t>(tokens.size());
  auto unk = id_key(g, "tokenizer.ggml.unknown_token_id", n);
  WordPieceConfig config;
  if (unk) config.unk_token = tokens[*unk];
  PAGODA_ASSIGN_OR_RETURN(auto model, WordPieceModel::create(vocab, config));
  state.model = std::move(model);
  NormalizerStep norm;
  norm.kind = NormalizerStep::Kind::kBert;
  norm.clean_text = true;
  norm.chinese_chars = true;
  norm.lowercase = g.get_bool("tokenizer.ggml.normalizer.lowercase").value_or(true);
  norm.strip_accents =
      g.get_bool("tokenizer.ggml.normalizer.strip_accents").value_or(norm.lowercase);
  state.normalizer.add(std::move(norm));
  PreTokenizerStep pre;
  pre.kind = PreTokenizerStep::Kind::kBert;
  state.pre_tokenizer.add(std::move(pre));
  DecoderStep dec;
  dec.kind = DecoderStep::Kind::kWordPiece;
  dec.content = std::string("##");
  dec.cleanup = true;
  state.decoder.add(std::move(dec));
  state.description = "GGUF bert (WordPiece)";
  return Status::Ok();
}

// llama.cpp marks every control/user-defined token of a model named Phi-3 rstrip.
bool is_phi3(const GgufFile& g) {
  std::string name = g.get_string("general.name").value_or("");
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return name.find("phi-3") != std::string::npos || name.find("phi3") != std::string::npos;
}

void add_special_tokens(const GgufFile& g, const std::vector<std::string>& tokens,
                        const std::vector<GgufTokenType>& types, TokenizerState& state) {
  bool phi3 = is_phi3(g);
  for (size_t i = 0; i < tokens.size(); ++i) {
    GgufTokenType t = types[i];
    if (t != GgufTokenType::kControl && t != GgufTokenType::kUserDefined &&
        t != GgufTokenType::kUnknown) {
      continue;
    }
    AddedToken a;
    a.content = tokens[i];
    a.id = static_cast<int32_t>(i);
    a.special = t != GgufTokenType::kUserDefined;
    a.normalized = false;
    a.rstrip = phi3 && a.content != "<unk>" && a.content != "<s>" && a.content != "<|endoftext|>";
    state.added.add(std::move(a));
  }
}

struct SpecialDefaults {
  std::optional<int32_t> bos, eos;
  bool add_bos = true;
};

// bos/eos/unk/pad, end-of-turn ids and add_bos/add_eos from tokenizer.ggml.*.
void read_special_ids(const GgufFile& g, const std::vector<std::string>& tokens,
                      const SpecialDefaults& defaults, TokenizerState& state) {
  int32_t n = static_cast<int32_t>(tokens.size());
  state.bos_id = id_key(g, "tokenizer.ggml.bos_token_id", n);
  if (!state.bos_id) state.bos_id = defaults.bos;
  state.eos_id = id_key(g, "tokenizer.ggml.eos_token_id", n);
  if (!state.eos_id) state.eos_id = defaults.eos;
  state.unk_id = id_key(g, "tokenizer.ggml.unknown_token_id", n);
  state.pad_id = id_key(g, "tokenizer.ggml.padding_token_id", n);
  // eos, eot and eom ids; finish_state() keeps those inside the vocabulary, once.
  state.extra_eos_ids = gguf_eos_token_ids(g);
  if (state.bos_id) state.bos_token = tokens[*state.bos_id];
  if (state.eos_id) state.eos_token = tokens[*state.eos_id];
  state.add_bos = g.get_bool("tokenizer.ggml.add_bos_token").value_or(defaults.add_bos) &&
                  state.bos_id.has_value();
  state.add_eos =
      g.get_bool("tokenizer.ggml.add_eos_token").value_or(false) && state.eos_id.has_value();
  if (state.add_bos) state.prefix_ids.insert(state.prefix_ids.begin(), *state.bos_id);
  if (state.add_eos) state.suffix_ids.push_back(*state.eos_id);
}

}  // namespace

Result<std::unique_ptr<TokenizerState>> load_gguf_tokenizer(const GgufFile& g) {
  const std::string& path = g.path();
  auto model_name = g.get_string("tokenizer.ggml.model");
  if (!model_name) return field_error(path, "tokenizer.ggml.model is missing");
  const std::vector<std::string>* tokens = g.get_string_array("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->empty())
    return field_error(path, "tokenizer.ggml.tokens is missing");
  std::vector<GgufTokenType> types(tokens->size(), GgufTokenType::kNormal);
  if (auto t = g.get_int_array("tokenizer.ggml.token_type")) {
    if (t->size() < tokens->size()) return field_error(path, "fewer token types than tokens");
    for (size_t i = 0; i < tokens->size(); ++i) types[i] = static_cast<GgufTokenType>((*t)[i]);
  }
  auto state = std::make_unique<TokenizerState>();
  int32_t n = static_cast<int32_t>(tokens->size());
  SpecialDefaults defaults;
  if (*model_name == "gpt2") {
    PAGODA_RETURN_IF_ERROR(build_gpt2(g, path, *tokens, *state, defaults.add_bos));
  } else if (*model_name == "llama") {
    PAGODA_RETURN_IF_ERROR(build_llama(g, path, *tokens, types, *state));
    defaults.bos = n > 1 ? std::optional<int32_t>(1) : std::nullopt;
    defaults.eos = n > 2 ? std::optional<int32_t>(2) : std::nullopt;
  } else if (*model_name == "bert") {
    PAGODA_RETURN_IF_ERROR(build_bert(g, path, *tokens, *state));
    defaults.bos = id_key(g, "tokenizer.ggml.cls_token_id", n);  // [CLS] text [SEP]
    if (auto sep = id_key(g, "tokenizer.ggml.seperator_token_id", n))
      state->suffix_ids.push_back(*sep);
  } else {
    return make_error(ErrorCode::kUnsupported,
                      "GGUF '" + path + "': tokenizer model '" + *model_name +
                          "' is not supported (only 'gpt2' byte-level BPE, 'llama' "
                          "SentencePiece BPE and 'bert' WordPiece; 't5' Unigram is not)");
  }
  add_special_tokens(g, *tokens, types, *state);
  read_special_ids(g, *tokens, defaults, *state);
  state->chat_templates = gguf_chat_templates(g);
  return state;
}

}  // namespace pagoda::tok
