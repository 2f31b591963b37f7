#include "tokenizer/normalizer.h"

#include "core/utf8.h"

namespace pagoda::tok {

namespace {

bool is_chinese_char(uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B920 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

// Rewrites `text` char by char: fn(cp, out) appends the replacement.
template <typename Fn>
std::string map_chars(std::string_view text, Fn fn) {
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) fn(next_code_point(text, i), out);
  return out;
}

std::string lowercase(std::string_view text) {
  return map_chars(text, [](uint32_t cp, std::string& out) { append_lowercase(out, cp); });
}

bool first_char_is(std::string_view text, bool (*pred)(uint32_t)) {
  if (text.empty()) return false;
  size_t i = 0;
  return pred(next_code_point(text, i));
}

// tokenizers' StripAccents drops the marks of Unicode 9.0.
std::string strip_marks(std::string_view text, bool* keeps_first) {
  *keeps_first = !first_char_is(text, is_mark_v9);
  return map_chars(text, [](uint32_t cp, std::string& out) {
    if (!is_mark_v9(cp)) append_utf8(out, cp);
  });
}

std::string strip(std::string_view text, bool left, bool right, bool* keeps_first) {
  size_t begin = 0;
  size_t end = text.size();
  while (left && begin < end) {
    size_t next = begin;
    if (!is_white_space(next_code_point(text, next))) break;
    begin = next;
  }
  while (right && end > begin) {
    size_t prev = end;
    if (!is_white_space(prev_code_point(text, prev))) break;
    end = prev;
  }
  *keeps_first = begin == 0;
  return std::string(text.substr(begin, end - begin));
}

std::string replace(std::string_view text, const Regex& re, std::string_view content,
                    bool* keeps_first) {
  std::vector<Match> matches;
  re.find_all(text, matches);
  if (matches.empty()) return std::string(text);
  *keeps_first = !(content.empty() && matches[0].start == 0 && matches[0].end > 0);
  std::string out;
  out.reserve(text.size() + matches.size() * content.size());
  size_t pos = 0;
  for (const Match& m : matches) {
    out.append(text.substr(pos, m.start - pos));
    out.append(content);
    pos = m.end;
  }
  out.append(text.substr(pos));
  return out;
}

bool is_nmt_removed(uint32_t cp) {
  return (cp >= 0x1 && cp <= 0x8) || cp == 0xB || (cp >= 0xE && cp <= 0x1F) || cp == 0x7F ||
         cp == 0x8F || cp == 0x9F;
}

std::string nmt(std::string_view text, bool* keeps_first) {
  *keeps_first = !first_char_is(text, is_nmt_removed);
  return map_chars(text, [](uint32_t cp, std::string& out) {
    if (is_nmt_removed(cp)) return;
    bool space = cp == 0x9 || cp == 0xA || cp == 0xC || cp == 0xD || cp == 0x1680 ||
                 (cp >= 0x200B && cp <= 0x200F) || cp == 0x2028 || cp == 0x2029 || cp == 0x2581 ||
                 cp == 0xFEFF || cp == 0xFFFD;
    append_utf8(out, space ? ' ' : cp);
  });
}

bool is_bert_removed(uint32_t cp) {
  bool control = cp != '\t' && cp != '\n' && cp != '\r' && is_control_v8(cp);
  return cp == 0 || cp == kReplacementChar || control;
}

bool is_mn_v8(uint32_t cp) {
  return general_category_v8(cp) == GeneralCategory::kMn;
}

std::string bert(std::string_view text, const NormalizerStep& s, bool* keeps_first) {
  std::string cur(text);
  if (s.clean_text) {
    if (first_char_is(cur, is_bert_removed)) *keeps_first = false;
    cur = map_chars(cur, [](uint32_t cp, std::string& out) {
      if (is_bert_removed(cp)) return;
      bool space = cp == '\t' || cp == '\n' || cp == '\r' || is_white_space(cp);
      append_utf8(out, space ? ' ' : cp);
    });
  }
  if (s.chinese_chars) {
    cur = map_chars(cur, [](uint32_t cp, std::string& out) {
      if (!is_chinese_char(cp)) {
        append_utf8(out, cp);
        return;
      }
      out.push_back(' ');
      append_utf8(out, cp);
      out.push_back(' ');
    });
  }
  if (s.strip_accents) {
    cur = normalize(cur, NormalForm::kNfd);
    if (first_char_is(cur, is_mn_v8)) *keeps_first = false;
    cur = map_chars(cur, [](uint32_t cp, std::string& out) {
      if (!is_mn_v8(cp)) append_utf8(out, cp);
    });
  }
  if (s.lowercase) cur = lowercase(cur);
  return cur;
}

// Rewrites `text` in place (no copy when a Unicode form leaves it unchanged).
void apply_step(const NormalizerStep& s, std::string& text, bool prepend, bool* keeps_first) {
  using Kind = NormalizerStep::Kind;
  switch (s.kind) {
    case Kind::kUnicode:
      if (!is_normalized_quick(text, s.form)) text = normalize(text, s.form);
      return;
    case Kind::kLowercase:
      text = lowercase(text);
      return;
    case Kind::kStrip:
      text = strip(text, s.left, s.right, keeps_first);
      return;
    case Kind::kStripAccents:
      text = strip_marks(text, keeps_first);
      return;
    case Kind::kReplace:
      text = replace(text, *s.regex, s.content, keeps_first);
      return;
    case Kind::kPrepend:
      if (prepend && !text.empty()) text.insert(0, s.content);
      return;
    case Kind::kNmt:
      text = nmt(text, keeps_first);
      return;
    case Kind::kBert:
      text = bert(text, s, keeps_first);
      return;
  }
}

}  // namespace

bool Normalizer::normalize(std::string_view text, std::string& out, bool prepend) const {
  out.assign(text);
  bool keeps_first = true;
  for (const NormalizerStep& s : steps_) {
    bool step_keeps = true;
    apply_step(s, out, prepend, &step_keeps);
    keeps_first = keeps_first && step_keeps;
  }
  return keeps_first;
}

}  // namespace pagoda::tok
