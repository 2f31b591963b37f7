// json_schema_sampler SCHEMA_FILE NUM SEED: prints a JSON array of NUM random
// sentences of the schema's grammar (json_schema_to_gbnf -> parse_gbnf), each
// made by a random walk over the matcher: a uniformly chosen allowed byte at
// every step, ending with probability 1/2 wherever the grammar may end. Walks
// longer than 20000 bytes are dropped. tests/python/grammar validates the
// sentences with Python's jsonschema (an independent reference): the
// grammar-level form of "random-weight models must produce valid output".
// Exit status 1 with a message on a conversion error or a dead state (a
// prefix the grammar accepted that no sentence continues).
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema_to_gbnf.h"
#include "grammar/matcher.h"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: json_schema_sampler SCHEMA_FILE NUM SEED\n");
    return 2;
  }
  std::ifstream file(argv[1]);
  std::stringstream schema;
  schema << file.rdbuf();
  const auto gbnf = pagoda::grammar::json_schema_to_gbnf(schema.str());
  if (!gbnf.ok()) {
    std::fprintf(stderr, "%s\n", gbnf.error().message.c_str());
    return 1;
  }
  const auto grammar = pagoda::grammar::parse_gbnf_shared(*gbnf);
  if (!grammar.ok()) {
    std::fprintf(stderr, "%s\n", grammar.error().message.c_str());
    return 1;
  }
  constexpr size_t kMaxBytes = 20000;
  const int num = std::stoi(argv[2]);
  std::mt19937_64 rng(std::stoull(argv[3]));
  nlohmann::json samples = nlohmann::json::array();
  for (int attempt = 0; attempt < num * 20 && static_cast<int>(samples.size()) < num; ++attempt) {
    pagoda::grammar::Matcher matcher(*grammar);
    std::string text;
    while (text.size() < kMaxBytes) {
      const pagoda::grammar::ByteSet next = matcher.next_bytes();
      if (matcher.can_end() && (next.empty() || rng() % 2 == 0)) break;
      std::vector<uint8_t> allowed;
      for (int b = 0; b < 256; ++b)
        if (next.contains(static_cast<uint8_t>(b))) allowed.push_back(static_cast<uint8_t>(b));
      if (allowed.empty()) {
        std::fprintf(stderr, "dead state after %zu bytes: %s\n", text.size(), text.c_str());
        return 1;
      }
      const char byte = static_cast<char>(allowed[rng() % allowed.size()]);
      if (!matcher.accept_bytes(std::string_view(&byte, 1))) {
        std::fprintf(stderr, "next_bytes offered a byte accept_bytes refused after: %s\n",
                     text.c_str());
        return 1;
      }
      text.push_back(byte);
    }
    if (text.size() < kMaxBytes) samples.push_back(text);
  }
  // Sentences are valid UTF-8 by construction; a replacement character here
  // would show up as a validation failure on the Python side.
  std::printf("%s\n",
              samples.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  return 0;
}
