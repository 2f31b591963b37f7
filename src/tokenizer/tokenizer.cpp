#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "core/utf8.h"
#include "io/hf_config.h"
#include "io/model_description.h"
#include "tokenizer/tokenizer_state.h"

namespace pagoda {

namespace fs = std::filesystem;
using tok::TokenizerState;

namespace {

// Names of end-of-turn tokens that stop generation (as llama.cpp's EOG list).
constexpr std::string_view kEndOfGenerationNames[] = {
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<\xEF\xBD\x9C"
    "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",
    "<|return|>",
    "<|call|>"};

bool is_gguf_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::string_view(magic, 4) == "GGUF";
}

// tokenizer.json, else tokenizer.model, in `dir`.
Result<std::unique_ptr<TokenizerState>> load_folder_model(const std::string& path) {
  std::error_code ec;
  const fs::path dir(path);
  if (fs::exists(dir / "tokenizer.json", ec)) {
    return tok::load_tokenizer_json((dir / "tokenizer.json").string());
  }
  if (fs::exists(dir / "tokenizer.model", ec)) {
    return tok::load_sentencepiece_file((dir / "tokenizer.model").string());
  }
  return make_error(
      ErrorCode::kNotFound,
      "tokenizer folder '" + path + "' has neither tokenizer.json nor tokenizer.model");
}

// A tokenizer.json / tokenizer.model and the tokenizer files of `folder`,
// read here (no ModelDescription: a folder or file that may have no config.json).
Result<std::unique_ptr<TokenizerState>> with_folder_config(
    Result<std::unique_ptr<TokenizerState>> loaded, const std::string& folder) {
  if (!loaded.ok()) return loaded.error();
  std::unique_ptr<TokenizerState> state = std::move(loaded).value();
  PAGODA_ASSIGN_OR_RETURN(HfTokenizerConfig files,
                          read_hf_tokenizer_config(fs::path(folder.empty() ? "." : folder)));
  PAGODA_ASSIGN_OR_RETURN(GenerationDefaults generation, load_folder_generation_config(folder));
  PAGODA_RETURN_IF_ERROR(tok::apply_hf_config(folder, files, generation.eos_token_ids, *state));
  return state;
}

Result<std::unique_ptr<TokenizerState>> load_state(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return with_folder_config(load_folder_model(path), path);
  if (!fs::is_regular_file(path, ec)) {
    return make_error(ErrorCode::kNotFound, "tokenizer path '" + path + "' does not exist");
  }
  if (is_gguf_file(path)) {
    PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> gguf, GgufFile::open(path));
    return tok::load_gguf_tokenizer(*gguf);
  }
  fs::path file(path);
  const std::string folder = file.parent_path().string();
  if (file.extension() == ".json") return with_folder_config(tok::load_tokenizer_json(path), folder);
  if (file.extension() == ".model") {
    return with_folder_config(tok::load_sentencepiece_file(path), folder);
  }
  return make_error(ErrorCode::kInvalidArgument,
                    "tokenizer file '" + path +
                        "' is neither a GGUF file, a tokenizer.json nor a tokenizer.model");
}

// The tokenizer of a described model: nothing is read again but the
// vocabulary file of a folder.
Result<std::unique_ptr<TokenizerState>> load_state(const ModelDescription& model) {
  if (model.gguf != nullptr) return tok::load_gguf_tokenizer(*model.gguf);
  const std::string& folder = model.location.path;
  PAGODA_ASSIGN_OR_RETURN(std::unique_ptr<TokenizerState> state, load_folder_model(folder));
  PAGODA_RETURN_IF_ERROR(tok::apply_hf_config(folder, model.tokenizer_files,
                                              model.generation.eos_token_ids, *state));
  return state;
}

}  // namespace

namespace tok {

void finish_state(TokenizerState& state) {
  int32_t size = state.model ? state.model->vocab_size() : 0;
  for (const AddedToken& t : state.added.tokens()) size = std::max(size, t.id + 1);
  state.vocab_size = size;
  state.special.assign(static_cast<size_t>(size), false);
  for (const AddedToken& t : state.added.tokens()) {
    if (t.special) state.special[t.id] = true;
  }
  std::unordered_map<int32_t, std::string> normalized;
  for (const AddedToken& t : state.added.tokens()) {
    if (!t.normalized || state.normalizer.empty()) continue;
    state.normalizer.normalize(t.content, normalized[t.id]);
  }
  state.added.build(normalized);

  std::vector<int32_t> eos;
  if (state.eos_id) eos.push_back(*state.eos_id);
  eos.insert(eos.end(), state.extra_eos_ids.begin(), state.extra_eos_ids.end());
  for (std::string_view name : kEndOfGenerationNames) {
    auto id = state.added.find(name);
    if (id && state.special[*id]) eos.push_back(*id);
  }
  std::vector<int32_t> unique;
  for (int32_t id : eos) {
    if (id >= 0 && id < size && std::find(unique.begin(), unique.end(), id) == unique.end()) {
      unique.push_back(id);
    }
  }
  state.eos_ids = std::move(unique);
}

}  // namespace tok

Tokenizer::Tokenizer(std::unique_ptr<TokenizerState> state) : state_(std::move(state)) {}
Tokenizer::~Tokenizer() = default;

Result<std::unique_ptr<Tokenizer>> Tokenizer::load(const std::string& path) {
  PAGODA_ASSIGN_OR_RETURN(auto state, load_state(path));
  tok::finish_state(*state);
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(state)));
}

Result<std::unique_ptr<Tokenizer>> Tokenizer::load(const ModelDescription& model) {
  PAGODA_ASSIGN_OR_RETURN(auto state, load_state(model));
  tok::finish_state(*state);
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(state)));
}

void Tokenizer::encode_text(std::string_view text, bool at_origin, bool parse_special,
                            std::vector<int32_t>& ids) const {
  const TokenizerState& s = *state_;
  std::string normalized;
  std::string_view norm = text;
  if (!s.normalizer.empty()) {
    at_origin = s.normalizer.normalize(text, normalized) && at_origin;
    norm = normalized;
  }
  std::vector<tok::Segment> segments;
  if (s.added.has_normalized_tokens()) {
    s.added.split(norm, /*normalized_pass=*/true, parse_special, segments);
  } else {
    segments.push_back({0, norm.size(), -1});
  }
  std::vector<tok::Piece> pieces;
  std::deque<std::string> storage;
  for (const tok::Segment& seg : segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    pieces.clear();
    s.pre_tokenizer.split(norm.substr(seg.start, seg.end - seg.start), at_origin && seg.start == 0,
                          pieces, storage);
    for (const tok::Piece& p : pieces) s.model->tokenize(p.text, ids);
  }
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens,
                                       bool parse_special) const {
  const TokenizerState& s = *state_;
  std::string repaired;
  if (!is_valid_utf8(text)) {
    repaired = to_valid_utf8(text);
    text = repaired;
  }
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = s.prefix_ids;
  ids.reserve(ids.size() + text.size() / 3 + 4);
  std::vector<tok::Segment> segments;
  s.added.split(text, /*normalized_pass=*/false, parse_special, segments);
  for (const tok::Segment& seg : segments) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
    } else if (seg.end > seg.start) {
      encode_text(text.substr(seg.start, seg.end - seg.start), seg.start == 0, parse_special, ids);
    }
  }
  if (add_special_tokens) ids.insert(ids.end(), s.suffix_ids.begin(), s.suffix_ids.end());
  return ids;
}

std::vector<int32_t> Tokenizer::encode_prompt(std::string_view text) const {
  const TokenizerState& s = *state_;
  std::vector<int32_t> ids = encode(text, true, true);
  bool starts_with_bos = !s.bos_token.empty() && text.substr(0, s.bos_token.size()) == s.bos_token;
  if (starts_with_bos && s.bos_id && !s.prefix_ids.empty() && s.prefix_ids[0] == *s.bos_id &&
      ids.size() >= 2 && ids[0] == *s.bos_id && ids[1] == *s.bos_id) {
    ids.erase(ids.begin());
  }
  return ids;
}

std::string Tokenizer::decode_impl(std::span<const int32_t> ids, bool skip_special_tokens,
                                   bool at_start, bool at_end) const {
  const TokenizerState& s = *state_;
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (int32_t id : ids) {
    if (id < 0 || id >= s.vocab_size) continue;
    if (skip_special_tokens && s.special[id]) continue;
    if (const tok::AddedToken* t = s.added.find(id)) {
      tokens.push_back(t->content);
    } else if (const std::string* piece = s.model->id_to_token(id)) {
      tokens.push_back(*piece);
    }
  }
  return s.decoder.decode(std::move(tokens), at_start, at_end);
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special_tokens) const {
  return decode_impl(ids, skip_special_tokens, /*at_start=*/true, /*at_end=*/true);
}

std::string Tokenizer::token_bytes(int32_t id) const {
  const TokenizerState& s = *state_;
  if (id < 0 || id >= s.vocab_size) return {};
  std::string piece;
  if (const tok::AddedToken* t = s.added.find(id)) {
    if (s.special[id]) return t->content;
    piece = t->content;
  } else if (const std::string* p = s.model->id_to_token(id)) {
    piece = *p;
  } else {
    return {};
  }
  return s.decoder.decode({std::move(piece)}, /*at_start=*/false, /*at_end=*/false,
                          /*raw_bytes=*/true);
}

bool Tokenizer::is_open_byte(int32_t id) const {
  if (!state_->decoder.has(tok::DecoderStep::Kind::kByteFallback)) return false;
  if (id < 0 || id >= state_->vocab_size || state_->added.find(id)) return false;
  const std::string* piece = state_->model->id_to_token(id);
  return piece != nullptr && tok::parse_byte_token(*piece).has_value();
}

bool Tokenizer::last_token_depends_on_next() const {
  return state_->decoder.has(tok::DecoderStep::Kind::kBpe);
}

int32_t Tokenizer::vocab_size() const {
  return state_->vocab_size;
}
std::optional<int32_t> Tokenizer::bos_id() const {
  return state_->bos_id;
}
std::optional<int32_t> Tokenizer::eos_id() const {
  return state_->eos_id;
}
std::optional<int32_t> Tokenizer::pad_id() const {
  return state_->pad_id;
}
std::optional<int32_t> Tokenizer::unk_id() const {
  return state_->unk_id;
}
std::string Tokenizer::bos_token() const {
  return state_->bos_token;
}
std::string Tokenizer::eos_token() const {
  return state_->eos_token;
}
std::vector<int32_t> Tokenizer::eos_ids() const {
  return state_->eos_ids;
}
bool Tokenizer::add_bos() const {
  return state_->add_bos;
}
bool Tokenizer::add_eos() const {
  return state_->add_eos;
}
const std::string& Tokenizer::description() const {
  return state_->description;
}

std::optional<std::string> Tokenizer::chat_template(std::string_view name) const {
  for (const auto& [n, t] : state_->chat_templates) {
    if (n == name) return t;
  }
  return std::nullopt;
}

std::vector<std::string> Tokenizer::chat_template_names() const {
  std::vector<std::string> names;
  for (const auto& [n, t] : state_->chat_templates) names.push_back(n);
  return names;
}

std::optional<int32_t> Tokenizer::token_to_id(std::string_view token) const {
  if (auto id = state_->added.find(token)) return id;
  return state_->model->token_to_id(token);
}

std::string Tokenizer::id_to_token(int32_t id) const {
  if (const tok::AddedToken* t = state_->added.find(id)) return t->content;
  const std::string* piece = state_->model->id_to_token(id);
  return piece ? *piece : std::string();
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && id < state_->vocab_size && state_->special[id];
}

}  // namespace pagoda
