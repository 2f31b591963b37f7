// tokenizer.json (Hugging Face tokenizers) -> TokenizerState.
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tokenizer/bpe_model.h"
#include "tokenizer/tokenizer_state.h"
#include "core/utf8.h"
#include "tokenizer/wordpiece_model.h"

namespace pagoda::tok {

namespace {

using nlohmann::json;

Error unsupported(const std::string& file, const std::string& what) {
  return make_error(ErrorCode::kUnsupported, "tokenizer '" + file + "': " + what);
}

Error corrupt(const std::string& file, const std::string& what) {
  return make_error(ErrorCode::kCorrupt, "tokenizer '" + file + "': " + what);
}

std::string str_or(const json& j, const char* key, const std::string& fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}

bool bool_or(const json& j, const char* key, bool fallback) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

// A "pattern" object: {"String": s} (literal) or {"Regex": r}.
Result<std::shared_ptr<const Regex>> parse_pattern(const json& j, const std::string& file) {
  std::string source;
  if (j.contains("Regex") && j["Regex"].is_string()) {
    source = j["Regex"].get<std::string>();
  } else if (j.contains("String") && j["String"].is_string()) {
    source = regex_escape(j["String"].get<std::string>());
  } else {
    return corrupt(file, "pattern " + j.dump() + " is neither {\"String\"} nor {\"Regex\"}");
  }
  PAGODA_ASSIGN_OR_RETURN(auto re, Regex::compile(source));
  return std::shared_ptr<const Regex>(std::move(re));
}

Result<SplitBehavior> parse_behavior(const json& j, const std::string& file) {
  std::string b = j.is_string() ? j.get<std::string>() : "";
  if (b == "Removed") return SplitBehavior::kRemoved;
  if (b == "Isolated") return SplitBehavior::kIsolated;
  if (b == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (b == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (b == "Contiguous") return SplitBehavior::kContiguous;
  return corrupt(file, "unknown split behavior " + j.dump());
}

PrependScheme parse_prepend_scheme(const json& j) {
  if (j.contains("prepend_scheme") && j["prepend_scheme"].is_string()) {
    std::string s = j["prepend_scheme"].get<std::string>();
    if (s == "first") return PrependScheme::kFirst;
    if (s == "never") return PrependScheme::kNever;
    return PrependScheme::kAlways;
  }
  return bool_or(j, "add_prefix_space", true) ? PrependScheme::kAlways : PrependScheme::kNever;
}

Status parse_normalizer(const json& j, const std::string& file, Normalizer& out, bool& byte_level) {
  if (j.is_null()) return Status::Ok();
  std::string type = str_or(j, "type", "");
  NormalizerStep s;
  using Kind = NormalizerStep::Kind;
  if (type == "Sequence") {
    for (const json& child : j.value("normalizers", json::array())) {
      PAGODA_RETURN_IF_ERROR(parse_normalizer(child, file, out, byte_level));
    }
    return Status::Ok();
  } else if (type == "NFC" || type == "NFD" || type == "NFKC" || type == "NFKD") {
    s.kind = Kind::kUnicode;
    s.form = type == "NFC"    ? NormalForm::kNfc
             : type == "NFD"  ? NormalForm::kNfd
             : type == "NFKC" ? NormalForm::kNfkc
                              : NormalForm::kNfkd;
  } else if (type == "Lowercase") {
    s.kind = Kind::kLowercase;
  } else if (type == "Strip") {
    s.kind = Kind::kStrip;
    s.left = bool_or(j, "strip_left", true);
    s.right = bool_or(j, "strip_right", true);
  } else if (type == "StripAccents") {
    s.kind = Kind::kStripAccents;
  } else if (type == "Replace") {
    s.kind = Kind::kReplace;
    PAGODA_ASSIGN_OR_RETURN(s.regex, parse_pattern(j.value("pattern", json()), file));
    s.content = str_or(j, "content", "");
  } else if (type == "Prepend") {
    s.kind = Kind::kPrepend;
    s.content = str_or(j, "prepend", "");
  } else if (type == "Nmt") {
    s.kind = Kind::kNmt;
  } else if (type == "BertNormalizer") {
    s.kind = Kind::kBert;
    s.clean_text = bool_or(j, "clean_text", true);
    s.chinese_chars = bool_or(j, "handle_chinese_chars", true);
    s.lowercase = bool_or(j, "lowercase", true);
    s.strip_accents = bool_or(j, "strip_accents", s.lowercase);
  } else if (type == "ByteLevel") {
    byte_level = true;  // folded into the byte-level model
    return Status::Ok();
  } else if (type == "Precompiled" && !j.value("precompiled_charsmap", json()).is_string()) {
    return Status::Ok();  // no character map: the identity
  } else {
    return unsupported(file, "normalizer type '" + type + "' is not supported");
  }
  out.add(std::move(s));
  return Status::Ok();
}

Status parse_pre_tokenizer(const json& j, const std::string& file, PreTokenizer& out,
                           bool& byte_level) {
  if (j.is_null()) return Status::Ok();
  std::string type = str_or(j, "type", "");
  PreTokenizerStep s;
  using Kind = PreTokenizerStep::Kind;
  if (type == "Sequence") {
    for (const json& child : j.value("pretokenizers", json::array())) {
      PAGODA_RETURN_IF_ERROR(parse_pre_tokenizer(child, file, out, byte_level));
    }
    return Status::Ok();
  } else if (type == "Split") {
    s.kind = Kind::kSplit;
    PAGODA_ASSIGN_OR_RETURN(s.regex, parse_pattern(j.value("pattern", json()), file));
    PAGODA_ASSIGN_OR_RETURN(s.behavior, parse_behavior(j.value("behavior", json()), file));
    s.invert = bool_or(j, "invert", false);
  } else if (type == "ByteLevel") {
    s.kind = Kind::kByteLevel;
    s.add_prefix_space = bool_or(j, "add_prefix_space", true);
    if (bool_or(j, "use_regex", true)) {
      PAGODA_ASSIGN_OR_RETURN(auto re, Regex::compile(kGpt2Pattern));
      s.regex = std::move(re);
    }
    byte_level = true;
  } else if (type == "Metaspace") {
    s.kind = Kind::kMetaspace;
    s.replacement = str_or(j, "replacement", "\xE2\x96\x81");
    s.prepend_scheme = parse_prepend_scheme(j);
    s.split = bool_or(j, "split", true);
  } else if (type == "Digits") {
    s.kind = Kind::kDigits;
    s.individual_digits = bool_or(j, "individual_digits", false);
  } else if (type == "Punctuation") {
    s.kind = Kind::kPunctuation;
    s.behavior = SplitBehavior::kIsolated;
    if (j.contains("behavior")) {
      PAGODA_ASSIGN_OR_RETURN(s.behavior, parse_behavior(j["behavior"], file));
    }
  } else if (type == "Whitespace") {
    s.kind = Kind::kWhitespace;
    PAGODA_ASSIGN_OR_RETURN(auto re, Regex::compile(R"(\w+|[^\w\s]+)"));
    s.regex = std::move(re);
  } else if (type == "WhitespaceSplit") {
    s.kind = Kind::kWhitespaceSplit;
  } else if (type == "BertPreTokenizer") {
    s.kind = Kind::kBert;
  } else if (type == "CharDelimiterSplit") {
    s.kind = Kind::kCharDelimiter;
    std::string d = str_or(j, "delimiter", " ");
    size_t i = 0;
    s.delimiter = d.empty() || !is_valid_utf8(d) ? ' ' : next_code_point(d, i);
  } else {
    return unsupported(file, "pre-tokenizer type '" + type + "' is not supported");
  }
  out.add(std::move(s));
  return Status::Ok();
}

Status parse_decoder(const json& j, const std::string& file, Decoder& out) {
  if (j.is_null()) return Status::Ok();
  std::string type = str_or(j, "type", "");
  DecoderStep s;
  using Kind = DecoderStep::Kind;
  if (type == "Sequence") {
    for (const json& child : j.value("decoders", json::array())) {
      PAGODA_RETURN_IF_ERROR(parse_decoder(child, file, out));
    }
    return Status::Ok();
  } else if (type == "ByteLevel") {
    s.kind = Kind::kByteLevel;
  } else if (type == "ByteFallback") {
    s.kind = Kind::kByteFallback;
  } else if (type == "Fuse") {
    s.kind = Kind::kFuse;
  } else if (type == "Strip") {
    s.kind = Kind::kStrip;
    s.content = str_or(j, "content", " ");
    s.start = j.value("start", 0);
    s.stop = j.value("stop", 0);
  } else if (type == "Replace") {
    s.kind = Kind::kReplace;
    PAGODA_ASSIGN_OR_RETURN(s.regex, parse_pattern(j.value("pattern", json()), file));
    s.content = str_or(j, "content", "");
  } else if (type == "Metaspace") {
    s.kind = Kind::kMetaspace;
    s.replacement = str_or(j, "replacement", "\xE2\x96\x81");
    s.prepend_scheme = parse_prepend_scheme(j);
  } else if (type == "WordPiece") {
    s.kind = Kind::kWordPiece;
    s.content = str_or(j, "prefix", "##");
    s.cleanup = bool_or(j, "cleanup", true);
  } else if (type == "BPEDecoder") {
    s.kind = Kind::kBpe;
    s.content = str_or(j, "suffix", "</w>");
  } else {
    return unsupported(file, "decoder type '" + type + "' is not supported");
  }
  out.add(std::move(s));
  return Status::Ok();
}

// Ids a post-processor puts before and after a single sequence.
Status parse_post_processor(const json& j, const std::string& file, std::vector<int32_t>& prefix,
                            std::vector<int32_t>& suffix) {
  if (j.is_null()) return Status::Ok();
  std::string type = str_or(j, "type", "");
  if (type == "Sequence") {
    for (const json& child : j.value("processors", json::array())) {
      PAGODA_RETURN_IF_ERROR(parse_post_processor(child, file, prefix, suffix));
    }
    return Status::Ok();
  }
  if (type == "ByteLevel") return Status::Ok();
  if (type == "BertProcessing" || type == "RobertaProcessing") {
    const json& cls = j.value("cls", json());
    const json& sep = j.value("sep", json());
    if (!cls.is_array() || cls.size() != 2 || !sep.is_array() || sep.size() != 2) {
      return corrupt(file, type + " needs cls and sep as [token, id]");
    }
    prefix.insert(prefix.begin(), cls[1].get<int32_t>());
    suffix.push_back(sep[1].get<int32_t>());
    return Status::Ok();
  }
  if (type != "TemplateProcessing") {
    return unsupported(file, "post-processor type '" + type + "' is not supported");
  }
  const json& specials = j.value("special_tokens", json::object());
  std::vector<int32_t> before, after;
  bool seen_sequence = false;
  for (const json& item : j.value("single", json::array())) {
    if (item.contains("Sequence")) {
      seen_sequence = true;
      continue;
    }
    std::string name = item.value("SpecialToken", json::object()).value("id", "");
    auto it = specials.find(name);
    if (it == specials.end()) {
      return corrupt(file, "TemplateProcessing names special token '" + name +
                               "' missing from special_tokens");
    }
    for (const json& id : it->value("ids", json::array())) {
      (seen_sequence ? after : before).push_back(id.get<int32_t>());
    }
  }
  prefix.insert(prefix.begin(), before.begin(), before.end());
  suffix.insert(suffix.end(), after.begin(), after.end());
  return Status::Ok();
}

Result<std::unique_ptr<Model>> parse_wordpiece(const json& j,
                                               std::vector<std::pair<std::string, int32_t>> vocab) {
  WordPieceConfig config;
  config.unk_token = str_or(j, "unk_token", config.unk_token);
  config.continuing_subword_prefix =
      str_or(j, "continuing_subword_prefix", config.continuing_subword_prefix);
  config.max_input_chars_per_word = j.value("max_input_chars_per_word", size_t{100});
  PAGODA_ASSIGN_OR_RETURN(auto model, WordPieceModel::create(vocab, config));
  return std::unique_ptr<Model>(std::move(model));
}

Result<std::unique_ptr<Model>> parse_model(const json& j, const std::string& file,
                                           bool byte_level) {
  std::string type = str_or(j, "type", j.contains("merges") ? "BPE" : "");
  if (type != "BPE" && type != "WordPiece") {
    return unsupported(file, "model type '" + type +
                                 "' is not supported (only BPE and WordPiece; Unigram and "
                                 "WordLevel are not)");
  }
  const json& vocab_json = j.value("vocab", json::object());
  if (!vocab_json.is_object()) return corrupt(file, "model.vocab is not an object");
  std::vector<std::pair<std::string, int32_t>> vocab;
  vocab.reserve(vocab_json.size());
  for (auto it = vocab_json.begin(); it != vocab_json.end(); ++it) {
    vocab.emplace_back(it.key(), it.value().get<int32_t>());
  }
  if (type == "WordPiece") return parse_wordpiece(j, std::move(vocab));
  std::vector<std::pair<std::string, std::string>> merges;
  for (const json& m : j.value("merges", json::array())) {
    if (m.is_array() && m.size() == 2) {
      merges.emplace_back(m[0].get<std::string>(), m[1].get<std::string>());
      continue;
    }
    std::string line = m.is_string() ? m.get<std::string>() : "";
    size_t space = line.find(' ');
    if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
      return corrupt(file, "merge " + m.dump() + " is not 'left right'");
    }
    merges.emplace_back(line.substr(0, space), line.substr(space + 1));
  }
  BpeConfig config;
  config.byte_level = byte_level;
  config.byte_fallback = bool_or(j, "byte_fallback", false);
  config.ignore_merges = bool_or(j, "ignore_merges", false);
  config.fuse_unk = bool_or(j, "fuse_unk", false);
  if (j.contains("unk_token") && j["unk_token"].is_string()) config.unk_token = j["unk_token"];
  config.continuing_subword_prefix = str_or(j, "continuing_subword_prefix", "");
  config.end_of_word_suffix = str_or(j, "end_of_word_suffix", "");
  PAGODA_ASSIGN_OR_RETURN(auto model, BpeModel::create(vocab, merges, config));
  return std::unique_ptr<Model>(std::move(model));
}

Status parse_added_tokens(const json& j, AddedVocab& added) {
  for (const json& t : j) {
    AddedToken a;
    a.id = t.value("id", -1);
    a.content = t.value("content", "");
    a.special = t.value("special", false);
    a.lstrip = t.value("lstrip", false);
    a.rstrip = t.value("rstrip", false);
    a.normalized = t.value("normalized", !a.special);
    a.single_word = t.value("single_word", false);
    if (a.id >= 0 && a.id < kMaxTokenId) added.add(std::move(a));
  }
  return Status::Ok();
}

Status fill_state(const json& root, const std::string& file, TokenizerState& state) {
  bool byte_level = false;
  PAGODA_RETURN_IF_ERROR(
      parse_normalizer(root.value("normalizer", json()), file, state.normalizer, byte_level));
  PAGODA_RETURN_IF_ERROR(parse_pre_tokenizer(root.value("pre_tokenizer", json()), file,
                                             state.pre_tokenizer, byte_level));
  PAGODA_RETURN_IF_ERROR(parse_decoder(root.value("decoder", json()), file, state.decoder));
  PAGODA_RETURN_IF_ERROR(parse_post_processor(root.value("post_processor", json()), file,
                                              state.prefix_ids, state.suffix_ids));
  if (!root.contains("model")) return corrupt(file, "no \"model\"");
  PAGODA_ASSIGN_OR_RETURN(state.model, parse_model(root["model"], file, byte_level));
  PAGODA_RETURN_IF_ERROR(
      parse_added_tokens(root.value("added_tokens", json::array()), state.added));
  std::string type = root["model"].value("type", std::string("BPE"));
  state.description =
      "tokenizer.json (" + type + std::string(byte_level ? ", byte-level" : "") + ")";
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<TokenizerState>> load_tokenizer_json(const std::string& json_path) {
  std::ifstream in(json_path, std::ios::binary);
  if (!in) return make_error(ErrorCode::kIo, "cannot open tokenizer file '" + json_path + "'");
  std::stringstream buffer;
  buffer << in.rdbuf();
  auto state = std::make_unique<TokenizerState>();
  try {
    json root = json::parse(buffer.str());
    if (!root.is_object()) return corrupt(json_path, "top level is not a JSON object");
    PAGODA_RETURN_IF_ERROR(fill_state(root, json_path, *state));
  } catch (const json::exception& e) {
    return corrupt(json_path, std::string("invalid JSON: ") + e.what());
  }
  return state;
}

}  // namespace pagoda::tok
