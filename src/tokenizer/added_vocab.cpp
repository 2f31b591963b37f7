#include "tokenizer/added_vocab.h"

#include "tokenizer/unicode_data.h"
#include "core/utf8.h"

namespace pagoda::tok {

namespace {

// Rust regex's Unicode \w: Alphabetic, marks, decimal digits, connector
// punctuation and the joiners.
bool is_word_char(uint32_t cp) {
  if (cp < 0x80) {
    return (cp >= '0' && cp <= '9') || ((cp | 0x20) >= 'a' && (cp | 0x20) <= 'z') || cp == '_';
  }
  if (cp == 0x200C || cp == 0x200D) return true;
  if (is_alphabetic(cp)) return true;
  auto gc = general_category(cp);
  return gc == GeneralCategory::kMn || gc == GeneralCategory::kMc || gc == GeneralCategory::kMe ||
         gc == GeneralCategory::kNd || gc == GeneralCategory::kPc;
}

bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t end = s.size();
  return is_word_char(prev_code_point(s, end));
}

bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  size_t i = 0;
  return is_word_char(next_code_point(s, i));
}

}  // namespace

void TokenTrie::insert(std::string_view key, int32_t value) {
  if (key.empty()) return;
  first_bytes_[static_cast<unsigned char>(key[0])] = true;
  size_t node = 0;
  for (char ch : key) {
    auto c = static_cast<unsigned char>(ch);
    int32_t next = -1;
    for (const auto& [k, child] : nodes_[node].children) {
      if (k == c) {
        next = child;
        break;
      }
    }
    if (next < 0) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_[node].children.emplace_back(c, next);
      nodes_.emplace_back();
    }
    node = static_cast<size_t>(next);
  }
  nodes_[node].value = value;
}

size_t TokenTrie::longest_at(std::string_view text, size_t pos, int32_t* value) const {
  size_t node = 0;
  size_t best = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    auto c = static_cast<unsigned char>(text[i]);
    int32_t next = -1;
    for (const auto& [k, child] : nodes_[node].children) {
      if (k == c) {
        next = child;
        break;
      }
    }
    if (next < 0) break;
    node = static_cast<size_t>(next);
    if (nodes_[node].value >= 0) {
      best = i + 1 - pos;
      *value = nodes_[node].value;
    }
  }
  return best;
}

void AddedVocab::add(AddedToken token) {
  if (token.content.empty()) return;
  auto it = by_id_.find(token.id);
  if (it != by_id_.end()) {
    by_content_.erase(tokens_[it->second].content);
    by_content_[token.content] = token.id;
    tokens_[it->second] = std::move(token);
    return;
  }
  by_id_[token.id] = tokens_.size();
  by_content_[token.content] = token.id;
  tokens_.push_back(std::move(token));
}

void AddedVocab::build(const std::unordered_map<int32_t, std::string>& normalized_contents) {
  raw_trie_ = TokenTrie();
  normalized_trie_ = TokenTrie();
  for (const AddedToken& t : tokens_) {
    if (!t.normalized) {
      raw_trie_.insert(t.content, t.id);
      continue;
    }
    auto it = normalized_contents.find(t.id);
    normalized_trie_.insert(it != normalized_contents.end() ? it->second : t.content, t.id);
  }
}

const AddedToken* AddedVocab::find(int32_t id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<int32_t> AddedVocab::find(std::string_view content) const {
  auto it = by_content_.find(std::string(content));
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

void AddedVocab::split(std::string_view text, bool normalized_pass, bool parse_special,
                       std::vector<Segment>& out) const {
  const TokenTrie& trie = normalized_pass ? normalized_trie_ : raw_trie_;
  size_t start_offset = 0;
  size_t pos = 0;
  while (!trie.empty() && pos < text.size()) {
    if (!trie.may_start(static_cast<unsigned char>(text[pos]))) {
      ++pos;
      continue;
    }
    int32_t id = -1;
    size_t len = trie.longest_at(text, pos, &id);
    if (len == 0) {
      ++pos;
      continue;
    }
    size_t start = pos;
    size_t stop = pos + len;
    pos = stop;  // matches never overlap, even when one is discarded below
    const AddedToken* token = find(id);
    if (token->special && !parse_special) continue;
    if (token->single_word) {
      bool start_ok = start == 0 || !ends_with_word(text.substr(0, start));
      bool stop_ok = stop == text.size() || !starts_with_word(text.substr(stop));
      if (!start_ok || !stop_ok) continue;
    }
    if (token->lstrip) {
      size_t s = start;
      while (s > 0) {
        size_t prev = s;
        if (!is_white_space(prev_code_point(text, prev))) break;
        s = prev;
      }
      start = std::max(s, start_offset);
    }
    if (token->rstrip) {
      while (stop < text.size()) {
        size_t next = stop;
        if (!is_white_space(next_code_point(text, next))) break;
        stop = next;
      }
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, id});
    start_offset = stop;  // the search goes on from the match end, before any rstrip
  }
  if (start_offset < text.size() || text.empty()) out.push_back({start_offset, text.size(), -1});
}

}  // namespace pagoda::tok
