#include "tokenizer/pre_tokenizer.h"

#include <algorithm>

#include "tokenizer/unicode_data.h"
#include "core/utf8.h"

namespace pagoda::tok {

namespace {

// A run of a piece that a pattern matched (or not); runs cover the piece.
struct Run {
  size_t start;
  size_t end;
  bool is_match;
};

void runs_from_matches(std::string_view text, const std::vector<Match>& matches,
                       std::vector<Run>& runs) {
  size_t prev = 0;
  for (const Match& m : matches) {
    if (prev != m.start) runs.push_back({prev, m.start, false});
    runs.push_back({m.start, m.end, true});
    prev = m.end;
  }
  if (prev != text.size()) runs.push_back({prev, text.size(), false});
}

// Every char for which pred() holds is its own match.
template <typename Pred>
void runs_from_predicate(std::string_view text, Pred pred, std::vector<Run>& runs) {
  size_t last = 0;
  size_t i = 0;
  while (i < text.size()) {
    size_t start = i;
    uint32_t cp = next_code_point(text, i);
    if (!pred(cp)) continue;
    if (last < start) runs.push_back({last, start, false});
    runs.push_back({start, i, true});
    last = i;
  }
  if (last < text.size()) runs.push_back({last, text.size(), false});
}

// Applies a split behavior (Hugging Face NormalizedString::split) and appends
// the resulting non-empty sub-pieces of `piece`.
void emit_runs(const Piece& piece, std::vector<Run>& runs, SplitBehavior behavior, bool invert,
               std::vector<Piece>& out) {
  if (invert) {
    for (Run& r : runs) r.is_match = !r.is_match;
  }
  std::vector<Run> parts;
  parts.reserve(runs.size());
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kRemoved:
      for (const Run& r : runs) {
        if (!r.is_match) parts.push_back(r);
      }
      break;
    case SplitBehavior::kIsolated:
      parts = runs;
      break;
    case SplitBehavior::kContiguous:
      for (const Run& r : runs) {
        if (r.is_match == previous_match && !parts.empty()) {
          parts.back().end = r.end;
        } else {
          parts.push_back(r);
        }
        previous_match = r.is_match;
      }
      break;
    case SplitBehavior::kMergedWithPrevious:
      for (const Run& r : runs) {
        if (r.is_match && !previous_match && !parts.empty()) {
          parts.back().end = r.end;
        } else {
          parts.push_back(r);
        }
        previous_match = r.is_match;
      }
      break;
    case SplitBehavior::kMergedWithNext:
      for (size_t k = runs.size(); k-- > 0;) {
        const Run& r = runs[k];
        if (r.is_match && !previous_match && !parts.empty()) {
          parts.back().start = r.start;
        } else {
          parts.push_back(r);
        }
        previous_match = r.is_match;
      }
      std::reverse(parts.begin(), parts.end());
      break;
  }
  for (const Run& r : parts) {
    if (r.end > r.start) {
      out.push_back({piece.text.substr(r.start, r.end - r.start), piece.at_origin && r.start == 0});
    }
  }
}

void split_regex(const Piece& p, const Regex& re, SplitBehavior behavior, bool invert,
                 std::vector<Piece>& out) {
  std::vector<Match> matches;
  re.find_all(p.text, matches);
  std::vector<Run> runs;
  runs_from_matches(p.text, matches, runs);
  emit_runs(p, runs, behavior, invert, out);
}

template <typename Pred>
void split_predicate(const Piece& p, Pred pred, SplitBehavior behavior, std::vector<Piece>& out) {
  std::vector<Run> runs;
  runs_from_predicate(p.text, pred, runs);
  emit_runs(p, runs, behavior, false, out);
}

bool is_bert_punctuation(uint32_t cp) {
  if (cp < 0x80) {
    return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
           (cp >= 0x7B && cp <= 0x7E);
  }
  return is_punctuation_v8(cp);
}

std::string replace_spaces(std::string_view text, std::string_view replacement) {
  std::string out;
  out.reserve(text.size() + 8);
  for (char c : text) {
    if (c == ' ') {
      out.append(replacement);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

void metaspace(const PreTokenizerStep& s, const Piece& p, bool continues, std::vector<Piece>& out,
               std::deque<std::string>& storage) {
  std::string text = replace_spaces(p.text, s.replacement);
  bool starts = text.compare(0, s.replacement.size(), s.replacement) == 0;
  if (!starts && !(continues && p.at_origin) &&
      (s.prepend_scheme == PrependScheme::kAlways ||
       (s.prepend_scheme == PrependScheme::kFirst && p.at_origin))) {
    text.insert(0, s.replacement);
  }
  Piece rewritten{storage.emplace_back(std::move(text)), p.at_origin};
  if (!s.split) {
    if (!rewritten.text.empty()) out.push_back(rewritten);
    return;
  }
  size_t rep_start = 0;
  uint32_t rep_cp = s.replacement.empty() ? 0 : next_code_point(s.replacement, rep_start);
  split_predicate(
      rewritten, [rep_cp](uint32_t cp) { return cp == rep_cp; }, SplitBehavior::kMergedWithNext,
      out);
}

// continues: the piece at the origin continues earlier text (no prefix).
void apply_step(const PreTokenizerStep& s, const Piece& p, bool continues, std::vector<Piece>& out,
                std::deque<std::string>& storage) {
  using Kind = PreTokenizerStep::Kind;
  switch (s.kind) {
    case Kind::kSplit:
      split_regex(p, *s.regex, s.behavior, s.invert, out);
      return;
    case Kind::kByteLevel: {
      Piece q = p;
      if (s.add_prefix_space && !(continues && p.at_origin) && (p.text.empty() || p.text[0] != ' ')) {
        std::string& spaced = storage.emplace_back();
        spaced.reserve(p.text.size() + 1);
        spaced.push_back(' ');
        spaced.append(p.text);
        q.text = spaced;
      }
      if (s.regex) {
        split_regex(q, *s.regex, SplitBehavior::kIsolated, false, out);
      } else if (!q.text.empty()) {
        out.push_back(q);
      }
      return;
    }
    case Kind::kMetaspace:
      metaspace(s, p, continues, out, storage);
      return;
    case Kind::kDigits:
      split_predicate(p, is_numeric,
                      s.individual_digits ? SplitBehavior::kIsolated : SplitBehavior::kContiguous,
                      out);
      return;
    case Kind::kPunctuation:
      split_predicate(p, is_bert_punctuation, s.behavior, out);
      return;
    case Kind::kWhitespace:
      split_regex(p, *s.regex, SplitBehavior::kRemoved, true, out);
      return;
    case Kind::kWhitespaceSplit:
      split_predicate(p, is_white_space, SplitBehavior::kRemoved, out);
      return;
    case Kind::kBert: {
      std::vector<Piece> words;
      split_predicate(p, is_white_space, SplitBehavior::kRemoved, words);
      for (const Piece& w : words)
        split_predicate(w, is_bert_punctuation, SplitBehavior::kIsolated, out);
      return;
    }
    case Kind::kCharDelimiter: {
      uint32_t d = s.delimiter;
      split_predicate(
          p, [d](uint32_t cp) { return cp == d; }, SplitBehavior::kRemoved, out);
      return;
    }
  }
}

}  // namespace

void PreTokenizer::split(std::string_view text, bool at_origin, std::vector<Piece>& out,
                         std::deque<std::string>& storage, bool continues) const {
  if (text.empty()) return;
  at_origin = at_origin || continues;
  if (steps_.empty()) {
    out.push_back({text, at_origin});
    return;
  }
  std::vector<Piece> cur{{text, at_origin}};
  std::vector<Piece> next;
  for (size_t k = 0; k < steps_.size(); ++k) {
    std::vector<Piece>& dst = k + 1 == steps_.size() ? out : next;
    if (k + 1 < steps_.size()) next.clear();
    for (const Piece& p : cur) apply_step(steps_[k], p, continues, dst, storage);
    if (k + 1 < steps_.size()) cur.swap(next);
  }
}

}  // namespace pagoda::tok
