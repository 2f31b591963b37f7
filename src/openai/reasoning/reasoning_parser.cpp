#include "openai/reasoning/reasoning_parser.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace pagoda::openai {

namespace {

constexpr std::string_view kSpace = " \t\r\n";
constexpr std::string_view kNewlines = "\r\n";

// Length of the longest suffix of `text` that is a proper prefix of `marker`.
size_t partial_marker_suffix(std::string_view text, std::string_view marker) {
  for (size_t len = std::min(text.size(), marker.size() - 1); len > 0; --len) {
    if (text.substr(text.size() - len) == marker.substr(0, len)) return len;
  }
  return 0;
}

bool ends_with(std::string_view text, std::string_view tail) {
  return text.size() >= tail.size() && text.substr(text.size() - tail.size()) == tail;
}

}  // namespace

PromptThinkState prompt_think_state(std::string_view prompt_text) {
  const size_t end = prompt_text.find_last_not_of(kSpace);
  if (end == std::string_view::npos) return PromptThinkState::kNone;
  const std::string_view text = prompt_text.substr(0, end + 1);
  if (ends_with(text, kThinkOpen)) return PromptThinkState::kOpen;
  if (ends_with(text, kThinkClose)) return PromptThinkState::kClosed;
  return PromptThinkState::kNone;
}

ReasoningStream::ReasoningStream(bool reasoning_first) : reasoning_first_(reasoning_first) {}

ReasoningDelta ReasoningStream::feed(std::string_view text) {
  ReasoningDelta out;
  pending_ += text;
  step(out);
  return out;
}

ReasoningDelta ReasoningStream::finish() {
  ReasoningDelta out;
  switch (phase_) {
    case Phase::kLead:  // whitespace, or the start of a "<think>" cut off
      (reasoning_first_ ? out.reasoning : out.content) += pending_;
      break;
    case Phase::kReasoning:  // the start of a "</think>" cut off
      out.reasoning += pending_;
      break;
    case Phase::kAfterClose:  // newlines only: dropped
    case Phase::kContent:
      break;
  }
  pending_.clear();
  return out;
}

// Moves what pending_ resolves into `out`, phase by phase; returns when the
// rest may still change meaning with more text.
void ReasoningStream::step(ReasoningDelta& out) {
  while (true) {
    switch (phase_) {
      case Phase::kLead: {
        const size_t start = pending_.find_first_not_of(kSpace);
        if (start == std::string::npos) return;
        const std::string_view rest = std::string_view(pending_).substr(start);
        if (rest.substr(0, kThinkOpen.size()) == kThinkOpen) {
          pending_.erase(0, start + kThinkOpen.size());
          phase_ = Phase::kReasoning;
        } else if (rest.size() < kThinkOpen.size() && kThinkOpen.substr(0, rest.size()) == rest) {
          return;
        } else {
          phase_ = reasoning_first_ ? Phase::kReasoning : Phase::kContent;
        }
        break;
      }
      case Phase::kReasoning: {
        const size_t close = pending_.find(kThinkClose);
        if (close == std::string::npos) {
          const size_t keep = pending_.size() - partial_marker_suffix(pending_, kThinkClose);
          out.reasoning.append(pending_, 0, keep);
          pending_.erase(0, keep);
          return;
        }
        out.reasoning.append(pending_, 0, close);
        pending_.erase(0, close + kThinkClose.size());
        phase_ = Phase::kAfterClose;
        break;
      }
      case Phase::kAfterClose: {
        const size_t start = pending_.find_first_not_of(kNewlines);
        if (start == std::string::npos) {
          pending_.clear();
          return;
        }
        pending_.erase(0, start);
        phase_ = Phase::kContent;
        break;
      }
      case Phase::kContent:
        out.content += pending_;
        pending_.clear();
        return;
    }
  }
}

bool ReasoningParser::starts_in_reasoning(PromptThinkState state) const {
  switch (state) {
    case PromptThinkState::kOpen:
      return true;
    case PromptThinkState::kClosed:
      return false;
    case PromptThinkState::kNone:
      return reasons_without_open_marker_;
  }
  return false;
}

ParsedReasoning parse_reasoning(const ReasoningParser& parser, PromptThinkState state,
                                std::string_view text) {
  ReasoningStream stream = parser.start(state);
  ReasoningDelta all = stream.feed(text);
  ReasoningDelta last = stream.finish();
  all.reasoning += last.reasoning;
  all.content += last.content;
  ParsedReasoning parsed;
  if (!all.reasoning.empty()) parsed.reasoning = std::move(all.reasoning);
  parsed.content = std::move(all.content);
  return parsed;
}

const std::vector<std::string>& reasoning_parser_names() {
  static const std::vector<std::string> names = {"deepseek_r1", "qwen3"};
  return names;
}

Result<std::unique_ptr<ReasoningParser>> make_reasoning_parser(std::string_view name) {
  if (name == "deepseek_r1") return std::make_unique<ReasoningParser>("deepseek_r1", true);
  if (name == "qwen3") return std::make_unique<ReasoningParser>("qwen3", false);
  return make_error(ErrorCode::kInvalidArgument,
                    fmt::format("unknown reasoning parser '{}'; the reasoning parsers are: {}",
                                name, fmt::join(reasoning_parser_names(), ", ")));
}

}  // namespace pagoda::openai
