// libFuzzer target: the input is a GBNF grammar, optionally followed by a NUL
// byte and bytes to feed the matcher (without one, the grammar text itself
// is fed). Parsing may fail (errors are values); when it succeeds, the
// matcher's contracts must hold, else the fuzzer aborts:
//  - a refused accept_bytes leaves the state unchanged;
//  - after a successful accept the state is not dead;
//  - forced_bytes are accepted by a copy of the state;
//  - a byte outside next_bytes() is refused.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"

namespace {

void check(bool ok) {
  if (!ok) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pagoda::grammar;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view text = input.substr(0, nul);
  const std::string_view feed = nul == std::string_view::npos ? text : input.substr(nul + 1);
  auto grammar = parse_gbnf_shared(text);
  if (!grammar.ok()) return 0;
  Matcher m(*grammar);
  for (size_t i = 0; i < feed.size(); ++i) {
    const auto b = static_cast<uint8_t>(feed[i]);
    const uint64_t before = m.state_hash();
    const bool expected = m.next_bytes().contains(b);
    const bool accepted = m.accept_bytes(feed.substr(i, 1));
    if (!accepted) {
      check(m.state_hash() == before);
      continue;
    }
    check(expected);
    check(!m.is_dead());
    if (i % 8 == 0) {
      Matcher copy = m;
      const std::string forced = m.forced_bytes(16);
      check(copy.accept_bytes(forced));
    }
  }
  (void)m.can_end();
  return 0;
}
