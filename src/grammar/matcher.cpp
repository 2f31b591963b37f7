#include "grammar/matcher.h"

#include <utility>

namespace pagoda::grammar {

Matcher::Matcher(std::shared_ptr<const Grammar> grammar)
    : grammar_(std::move(grammar)), stacks_(StackSet::start(*grammar_)) {
  hash_ = stacks_.canonicalize();
}

bool Matcher::accept_bytes(std::string_view bytes) {
  if (bytes.empty()) return true;
  StackSet cur, next;
  const StackSet* from = &stacks_;
  for (char c : bytes) {
    if (!from->advance(*grammar_, static_cast<uint8_t>(c), next)) return false;
    std::swap(cur, next);
    from = &cur;
  }
  stacks_ = std::move(cur);
  hash_ = stacks_.canonicalize();
  return true;
}

std::string Matcher::forced_bytes(size_t max_bytes) const {
  std::string out;
  StackSet cur = stacks_, next;
  while (out.size() < max_bytes && !cur.can_end()) {
    const ByteSet set = cur.next_bytes(*grammar_);
    if (set.count() != 1) break;
    int b = 0;
    while (!set.contains(static_cast<uint8_t>(b))) ++b;
    if (!cur.advance(*grammar_, static_cast<uint8_t>(b), next)) break;
    out.push_back(static_cast<char>(b));
    std::swap(cur, next);
  }
  return out;
}

bool grammar_matches(std::shared_ptr<const Grammar> grammar, std::string_view text) {
  Matcher m(std::move(grammar));
  return m.accept_bytes(text) && m.can_end();
}

}  // namespace pagoda::grammar
