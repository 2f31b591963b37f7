// Fuzzes the server's request path: raw HTTP bytes (Beast's parser with the
// server's limits, pipelined requests included) or a JSON body, through the
// OpenAI service (field validation, chat messages with tool calls whose
// `arguments` strings are re-parsed as JSON, four chat templates, the
// tokenizer) to the fake engine and back; the fake answers "SAY: <text>"
// prompts with <text>, so tool calls in model output are parsed too.
//
// Input: byte 0 picks the mode; the rest is the payload.
//   bit 7 set: the payload is raw HTTP (up to 4 pipelined requests);
//   else bits 2-3 pick the route (completions, chat, tokenize, detokenize)
//   and the payload is its JSON body. Bits 0-1 pick the chat template.
// Invariants (trap on violation): nothing crashes; every request gets one
// answer within the time limit, never a 5xx; a non-streamed answer is a JSON
// object (choices on success, error.message on failure); a stream ends with
// "data: [DONE]" or an error event.
#include <chrono>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "fake_service.h"
#include "http/http_parse.h"

namespace {

using pagoda::http::HttpRequest;
using Json = nlohmann::ordered_json;

void require(bool ok) {
  if (!ok) __builtin_trap();
}

// The answer to a request on `path` is one well-formed answer, never a 5xx.
void check(const pagoda::testing::RecordingResponder& answer, const std::string& path) {
  require(answer.num_answers == 1);
  require(answer.status >= 200 && answer.status < 500);
  if (answer.streaming) {
    const std::string& body = answer.body;
    require(body.ends_with("data: [DONE]\n\n") || body.find("data: {\"error\"") != body.npos);
    return;
  }
  if (path == "/metrics") return;
  Json parsed = Json::parse(answer.body, nullptr, /*allow_exceptions=*/false);
  require(parsed.is_object());
  if (answer.status >= 400) {
    require(parsed.contains("error") && parsed["error"]["message"].is_string());
  } else if (path == "/v1/completions" || path == "/v1/chat/completions") {
    require(parsed.contains("choices"));
  }
}

// One service per chat template, over the fake engine; built once, never freed.
std::vector<std::unique_ptr<pagoda::testing::FakeService>>* make_services() {
  const std::string shared = PAGODA_SHARED_DIR "/models/tokenizers/chat-templates/";
  const std::string templates[] = {
      PAGODA_SOURCE_DIR "/tests/data/server/simple_chat.jinja",
      shared + "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja",
      shared + "meta-llama-Llama-3.1-8B-Instruct.jinja",
      shared + "Qwen-Qwen2.5-7B-Instruct.jinja",
  };
  auto* services = new std::vector<std::unique_ptr<pagoda::testing::FakeService>>();
  for (const std::string& file : templates) {
    pagoda::testing::FakeEngineOptions options;
    options.tokenizer_path = PAGODA_SHARED_DIR "/models/stories260K";
    options.chat_template_file = file;
    options.step_time = std::chrono::microseconds(5);
    options.max_model_len = 4096;
    options.scripted_failures = false;  // a "FAIL:" prompt would be an intended 500
    // The template text picks the tool-call parser (Hermes, Llama 3 JSON), so
    // "SAY: <tool_call>..." prompts fuzz the parsing of model output too.
    std::ifstream in(file, std::ios::binary);
    pagoda::openai::ServiceOptions service_options;
    service_options.chat_template_text.assign(std::istreambuf_iterator<char>(in), {});
    auto service = pagoda::testing::FakeService::create(options, service_options);
    require(service.ok());
    services->push_back(std::move(service.value()));
  }
  return services;
}

void handle(pagoda::testing::FakeService& service, HttpRequest request) {
  const std::string path = request.path;
  check(*service.call(std::move(request)), path);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static auto* services = make_services();
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const int which = mode & 3;
  std::string_view payload(reinterpret_cast<const char*>(data + 1), size - 1);
  if (mode & 0x80) {
    pagoda::http::HttpLimits limits;
    limits.max_body_bytes = 1 << 20;
    for (int i = 0; i < 4 && !payload.empty(); ++i) {
      auto parsed = pagoda::http::parse_http_request(payload, limits);
      if (!parsed.request) return 0;  // incomplete or malformed: the session answers 400
      handle(*(*services)[which], std::move(*parsed.request));
      payload.remove_prefix(parsed.consumed);
    }
    return 0;
  }
  static const char* const kRoutes[] = {"/v1/completions", "/v1/chat/completions", "/tokenize",
                                        "/detokenize"};
  HttpRequest request;
  request.method = "POST";
  request.path = kRoutes[(mode >> 2) & 3];
  request.body = std::string(payload);
  request.request_id = "fuzz";
  handle(*(*services)[which], std::move(request));
  return 0;
}
