// libFuzzer target: the input is a regex. regex_to_gbnf must return an error
// or GBNF that parse_gbnf accepts: a refusal there is a converter bug (abort),
// except the one bound regex_to_gbnf cannot foresee, the first-byte table of
// a very ambiguous grammar outgrowing kMaxFirstStackWords ("too ambiguous";
// the request still gets a 400). The grammar then runs once over the
// pattern's own bytes. Any other outcome but a crash, a hang or runaway
// memory is fine. Seeds: the regex corpus (tests/data/grammar/regex_fuzz_seeds).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "grammar/gbnf_parser.h"
#include "grammar/matcher.h"
#include "grammar/regex_to_gbnf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pagoda::grammar;
  const std::string_view pattern(reinterpret_cast<const char*>(data), size);
  pagoda::Result<std::string> gbnf = regex_to_gbnf(pattern, "root");
  if (!gbnf.ok()) return 0;
  pagoda::Result<std::shared_ptr<const Grammar>> grammar = parse_gbnf_shared(*gbnf);
  if (!grammar.ok() && grammar.error().message.find("is too ambiguous") == std::string::npos) {
    std::fprintf(stderr, "parse_gbnf refused regex_to_gbnf's output: %s\n--- grammar:\n%s\n",
                 grammar.error().message.c_str(), gbnf->c_str());
    std::abort();
  }
  if (grammar.ok()) (void)grammar_matches(*grammar, pattern);
  return 0;
}
