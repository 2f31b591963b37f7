#include "openai/sse.h"

#include "openai/wire/json_util.h"

namespace pagoda::openai {

std::string sse_event(const Json& payload) {
  std::string out = "data: ";
  out += dump_json(payload);
  out += "\n\n";
  return out;
}

std::string sse_done() {
  return "data: [DONE]\n\n";
}

}  // namespace pagoda::openai
