#include "engine/jump_forward.h"

#include <string>
#include <string_view>

#include "core/utf8.h"

namespace pagoda {

std::optional<JumpForward> plan_jump_forward(const Tokenizer& tok, const TokenConstraint& before,
                                             const TokenConstraint& after, int32_t token,
                                             size_t max_bytes, int32_t max_tokens) {
  if (max_tokens < 1) return std::nullopt;
  const std::string forced = after.forced_bytes(max_bytes);
  if (forced.empty()) return std::nullopt;
  const std::string sampled = tok.token_bytes(token);
  std::string text = sampled + forced;
  // Whole characters only: the tokenizer reads valid UTF-8.
  const size_t invalid = find_invalid_utf8(text);
  if (invalid != std::string_view::npos) text.resize(invalid);
  if (text.size() <= sampled.size()) return std::nullopt;

  JumpForward jump;
  jump.tokens = tok.encode_continuation(text);
  std::string spelled;
  for (int32_t t : jump.tokens) spelled += tok.token_bytes(t);
  if (spelled != text) return std::nullopt;
  if (jump.tokens.size() > static_cast<size_t>(max_tokens))
    jump.tokens.resize(static_cast<size_t>(max_tokens));
  if (jump.tokens.size() == 1 && jump.tokens[0] == token) return std::nullopt;
  jump.state = before.clone();
  for (int32_t t : jump.tokens) {
    if (!jump.state->accept(t)) return std::nullopt;
  }
  return jump;
}

}  // namespace pagoda
