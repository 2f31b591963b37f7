// libFuzzer target for the JSON Schema -> GBNF converter, which reads schemas
// from requests (response_format, guided_json, tool parameters). Input: the
// schema text. Beyond no crash, hang or runaway memory: whenever the
// converter succeeds, parse_gbnf must accept its grammar (the converter's
// contract: a schema is either refused with a json_schema error or becomes a
// grammar the matcher can run), and a refusal must be an InvalidArgument
// naming the schema.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "grammar/gbnf_parser.h"
#include "grammar/json_schema_to_gbnf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view schema(reinterpret_cast<const char*>(data), size);
  const auto gbnf = pagoda::grammar::json_schema_to_gbnf(schema);
  if (!gbnf.ok()) {
    const pagoda::Error& error = gbnf.error();
    if (error.code != pagoda::ErrorCode::kInvalidArgument ||
        error.message.rfind("json_schema at '", 0) != 0) {
      std::fprintf(stderr, "unexpected error: %s\n", error.message.c_str());
      std::abort();
    }
    return 0;
  }
  const auto grammar = pagoda::grammar::parse_gbnf(*gbnf);
  if (!grammar.ok()) {
    std::fprintf(stderr, "parse_gbnf refused the converter's grammar: %s\n%s\n",
                 grammar.error().message.c_str(), gbnf->c_str());
    std::abort();
  }
  return 0;
}
