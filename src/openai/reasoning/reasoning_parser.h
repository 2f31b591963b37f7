// Reasoning parsers: split a reasoning model's output into its reasoning (the
// text between <think> and </think>) and its answer (`content`), streaming or
// not, as vLLM's --reasoning-parser names them:
//   deepseek_r1  the output may lack the opening <think> (the chat template put
//                it in the prompt): everything up to the first </think> is
//                reasoning; with no </think> at all, everything is.
//   qwen3        the output reasons only when <think> opens it (leading
//                whitespace aside); otherwise (enable_thinking false) it is
//                plain content.
// For both, the end of the prompt decides first (prompt_think_state): a
// prompt that ends inside an open <think> makes the output start in the
// reasoning, one that ends right after </think> makes it plain content
// unless the output opens a <think> itself. A <think> opening the output is
// dropped; the content after </think> loses its leading newlines; markers
// later in the content are content.
//
// Streaming gives exactly the whole parse for any split of the text: text
// that may still be part of a marker (or the newlines after </think>) is held
// back until resolved.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace pagoda::openai {

inline constexpr std::string_view kThinkOpen = "<think>";
inline constexpr std::string_view kThinkClose = "</think>";

// Where the prompt leaves the reasoning: the last think marker of the prompt
// text followed by nothing but whitespace (what the chat template appended to
// the generation prompt). Markers earlier in the conversation do not count.
enum class PromptThinkState {
  kNone,    // the prompt does not end with a marker
  kOpen,    // it ends with <think>: the output starts in the reasoning
  kClosed,  // it ends with </think>: the reasoning is over (enable_thinking false)
};
PromptThinkState prompt_think_state(std::string_view prompt_text);

// What one feed()/finish() step releases.
struct ReasoningDelta {
  std::string reasoning;
  std::string content;
};

class ReasoningStream {
 public:
  // `reasoning_first`: the output starts in the reasoning without an opening
  // marker (ReasoningParser::starts_in_reasoning).
  explicit ReasoningStream(bool reasoning_first);
  ReasoningDelta feed(std::string_view text);  // the next text delta
  ReasoningDelta finish();                     // end of output

 private:
  enum class Phase { kLead, kReasoning, kAfterClose, kContent };
  void step(ReasoningDelta& out);

  Phase phase_ = Phase::kLead;
  bool reasoning_first_;
  std::string pending_;  // text not yet released
};

class ReasoningParser {
 public:
  ReasoningParser(std::string name, bool reasons_without_open_marker)
      : name_(std::move(name)), reasons_without_open_marker_(reasons_without_open_marker) {}
  const std::string& name() const { return name_; }
  // Whether the output of a prompt in `state` starts in the reasoning even
  // without an opening <think>.
  bool starts_in_reasoning(PromptThinkState state) const;
  ReasoningStream start(PromptThinkState state) const {
    return ReasoningStream(starts_in_reasoning(state));
  }

 private:
  std::string name_;
  bool reasons_without_open_marker_;  // deepseek_r1
};

// The whole output split. reasoning: nullopt when the output had none (or it
// was empty); content: the answer ("" when none).
struct ParsedReasoning {
  std::optional<std::string> reasoning;
  std::string content;
};
ParsedReasoning parse_reasoning(const ReasoningParser& parser, PromptThinkState state,
                                std::string_view text);

// The names make_reasoning_parser accepts: deepseek_r1, qwen3.
const std::vector<std::string>& reasoning_parser_names();

// By name; kInvalidArgument listing the names otherwise.
Result<std::unique_ptr<ReasoningParser>> make_reasoning_parser(std::string_view name);

}  // namespace pagoda::openai
