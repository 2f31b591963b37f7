#include "jinja/final_message.h"

#include "jinja/methods.h"

namespace pagoda {

namespace {

// The text to continue: the content string, or the last part with "text".
Result<std::string> final_text(const nlohmann::ordered_json& message) {
  const auto no_text = [] {
    return make_error(ErrorCode::kInvalidArgument,
                      "continue_final_message is set but the final message has no text to "
                      "continue");
  };
  if (!message.is_object() || !message.contains("content")) return no_text();
  const nlohmann::ordered_json& content = message["content"];
  if (content.is_string()) return content.get<std::string>();
  if (content.is_array()) {
    for (auto it = content.rbegin(); it != content.rend(); ++it) {
      if (it->is_object() && it->contains("text") && (*it)["text"].is_string())
        return (*it)["text"].get<std::string>();
    }
  }
  return no_text();
}

}  // namespace

Result<std::string> open_final_message(std::string rendered,
                                       const nlohmann::ordered_json& final_message) {
  PAGODA_ASSIGN_OR_RETURN(std::string text, final_text(final_message));
  const std::string stripped = jinja::py_strip(text, nullptr, true, true);
  const size_t at = rendered.rfind(stripped);
  if (at == std::string::npos) {
    return make_error(ErrorCode::kInvalidArgument,
                      "continue_final_message is set but the final message does not appear in "
                      "the chat after applying the chat template (the template changes or drops "
                      "part of it)");
  }
  // Byte offsets give the same cut as transformers' code-point offsets: a
  // UTF-8 substring match always starts and ends on character boundaries.
  const size_t left_stripped = jinja::py_strip(text, nullptr, true, false).size();
  const bool spacing_kept = rendered.compare(at, left_stripped, text) == 0;
  rendered.resize(at + (spacing_kept ? left_stripped : stripped.size()));
  return rendered;
}

}  // namespace pagoda
