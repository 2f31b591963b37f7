#include "tokenizer/decoder.h"

#include "tokenizer/byte_level.h"
#include "core/utf8.h"

namespace pagoda::tok {

namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void byte_level(std::vector<std::string>& tokens, bool raw_bytes) {
  std::string bytes;
  for (const std::string& t : tokens) {
    auto decoded = byte_level_decode(t);
    bytes += decoded ? *decoded : t;
  }
  tokens.assign(1, raw_bytes ? bytes : to_valid_utf8(bytes));
}

void byte_fallback(std::vector<std::string>& tokens, bool raw_bytes) {
  std::vector<std::string> out;
  out.reserve(tokens.size());
  std::string pending;
  auto flush = [&] {
    if (pending.empty()) return;
    if (raw_bytes || is_valid_utf8(pending)) {
      out.push_back(pending);
    } else {
      for (size_t i = 0; i < pending.size(); ++i) out.emplace_back("\xEF\xBF\xBD");
    }
    pending.clear();
  };
  for (std::string& t : tokens) {
    if (auto b = parse_byte_token(t)) {
      pending.push_back(static_cast<char>(*b));
      continue;
    }
    flush();
    out.push_back(std::move(t));
  }
  flush();
  tokens.swap(out);
}

void strip(std::string& token, const std::string& content, size_t start, size_t stop) {
  size_t begin = 0;
  for (size_t k = 0; k < start && token.compare(begin, content.size(), content) == 0; ++k) {
    begin += content.size();
  }
  size_t end = token.size();
  for (size_t k = 0; k < stop && end >= begin + content.size() &&
                     token.compare(end - content.size(), content.size(), content) == 0;
       ++k) {
    end -= content.size();
  }
  token = token.substr(begin, end - begin);
}

std::string replace_all(const std::string& text, const Regex& re, const std::string& content) {
  std::vector<Match> matches;
  re.find_all(text, matches);
  if (matches.empty()) return text;
  std::string out;
  size_t pos = 0;
  for (const Match& m : matches) {
    out.append(text, pos, m.start - pos);
    out += content;
    pos = m.end;
  }
  out.append(text, pos, std::string::npos);
  return out;
}

void replace_literal(std::string& s, std::string_view from, std::string_view to) {
  size_t pos = 0;
  while ((pos = s.find(from, pos)) != std::string::npos) {
    s.replace(pos, from.size(), to);
    pos += to.size();
  }
}

// transformers' clean_up_tokenization.
void cleanup(std::string& s) {
  static const std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
      {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
      {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) replace_literal(s, from, to);
}

void metaspace(std::vector<std::string>& tokens, const DecoderStep& s, bool at_start) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    bool drop = i == 0 && at_start && s.prepend_scheme != PrependScheme::kNever;
    std::string out;
    size_t pos = 0;
    const std::string& t = tokens[i];
    while (pos < t.size()) {
      if (t.compare(pos, s.replacement.size(), s.replacement) == 0 && !s.replacement.empty()) {
        if (!drop) out.push_back(' ');
        pos += s.replacement.size();
      } else {
        out.push_back(t[pos++]);
      }
    }
    tokens[i] = std::move(out);
  }
}

// Continuation pieces lose their prefix, the others get a space before them.
void word_piece(std::vector<std::string>& tokens, const DecoderStep& s, bool at_start) {
  for (size_t i = 0; i < tokens.size(); ++i) {
    std::string& t = tokens[i];
    if (i != 0 || !at_start) {
      if (t.compare(0, s.content.size(), s.content) == 0) {
        t.erase(0, s.content.size());
      } else {
        t.insert(t.begin(), ' ');
      }
    }
    if (s.cleanup) cleanup(t);
  }
}

}  // namespace

std::optional<uint8_t> parse_byte_token(std::string_view token) {
  if (token.size() != 6 || token.compare(0, 3, "<0x") != 0 || token[5] != '>') return std::nullopt;
  int hi = hex_value(token[3]);
  int lo = hex_value(token[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<uint8_t>(hi * 16 + lo);
}

bool Decoder::has(DecoderStep::Kind kind) const {
  for (const DecoderStep& s : steps_) {
    if (s.kind == kind) return true;
  }
  return false;
}

std::string Decoder::decode(std::vector<std::string> tokens, bool at_start, bool at_end,
                            bool raw_bytes) const {
  using Kind = DecoderStep::Kind;
  if (steps_.empty()) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0 || !at_start) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  bool whole = false;  // the chain holds one token standing for the whole text
  for (const DecoderStep& s : steps_) {
    switch (s.kind) {
      case Kind::kByteLevel:
        byte_level(tokens, raw_bytes);
        whole = true;
        break;
      case Kind::kByteFallback:
        byte_fallback(tokens, raw_bytes);
        break;
      case Kind::kFuse: {
        std::string joined;
        for (const std::string& t : tokens) joined += t;
        tokens.assign(1, std::move(joined));
        whole = true;
        break;
      }
      case Kind::kStrip:
        for (std::string& t : tokens) strip(t, s.content, whole && !at_start ? 0 : s.start, s.stop);
        break;
      case Kind::kReplace:
        for (std::string& t : tokens) t = replace_all(t, *s.regex, s.content);
        break;
      case Kind::kMetaspace:
        metaspace(tokens, s, at_start);
        break;
      case Kind::kWordPiece:
        word_piece(tokens, s, at_start);
        break;
      case Kind::kBpe:
        for (size_t i = 0; i < tokens.size(); ++i) {
          replace_literal(tokens[i], s.content, at_end && i + 1 == tokens.size() ? "" : " ");
        }
        break;
    }
  }
  std::string out;
  for (const std::string& t : tokens) out += t;
  return out;
}

Decoder sentencepiece_decoder(size_t num_leading_spaces) {
  Decoder d;
  DecoderStep replace;
  replace.kind = DecoderStep::Kind::kReplace;
  auto marker = Regex::compile("\xE2\x96\x81");  // a literal: always compiles
  replace.regex = std::shared_ptr<const Regex>(std::move(marker).value());
  replace.content = std::string(1, ' ');
  d.add(std::move(replace));
  for (auto kind : {DecoderStep::Kind::kByteFallback, DecoderStep::Kind::kFuse}) {
    DecoderStep step;
    step.kind = kind;
    d.add(std::move(step));
  }
  if (num_leading_spaces > 0) {
    DecoderStep strip;
    strip.kind = DecoderStep::Kind::kStrip;
    strip.content = std::string(1, ' ');
    strip.start = num_leading_spaces;
    d.add(std::move(strip));
  }
  return d;
}

}  // namespace pagoda::tok
