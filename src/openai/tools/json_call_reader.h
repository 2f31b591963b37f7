// Reads one tool call written as a JSON object, {"name": N, "arguments": A}
// ("parameters" for "arguments"; A an object, or a string holding JSON), from
// text in pieces, for the JSON formats (hermes, llama3_json, mistral's list).
//
// When the object starts with the name followed by the arguments (as models
// write it), the call is announced (id and name) once the arguments start and
// an object's text streams out as it grows (JsonValueStream). Any other key
// order is read whole and announced at the object's end. Until it is
// announced, the text may turn out not to be a call (kNotACall): raw() then
// holds everything consumed, for the caller to return as content.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "openai/tools/json_value_stream.h"
#include "openai/tools/tool_parser.h"

namespace pagoda::openai {

class JsonCallReader {
 public:
  enum class State { kReading, kDone, kNotACall };

  JsonCallReader(int index, std::string id) : index_(index), id_(std::move(id)) {}

  // Consumes `text` up to the end of the object (all of it while unfinished),
  // adding the call's pieces to `delta`. Returns the bytes consumed; when not
  // a call, those up to where that became clear.
  size_t feed(std::string_view text, ToolStreamDelta& delta);
  // The output ended inside the object: an announced call is closed (kDone),
  // anything else is kNotACall.
  void finish(ToolStreamDelta& delta);

  State state() const { return state_; }
  bool announced() const { return phase_ >= Phase::kArguments; }
  const std::string& raw() const { return raw_; }

 private:
  enum class Phase { kHeader, kWhole, kArguments, kTail, kSkipRest, kEnd };

  size_t feed_header(std::string_view text, ToolStreamDelta& delta);
  size_t feed_whole(std::string_view text, ToolStreamDelta& delta);
  size_t feed_arguments(std::string_view text, ToolStreamDelta& delta);
  size_t feed_tail(std::string_view text);
  void end_arguments(ToolStreamDelta& delta);

  int index_;
  std::string id_;
  State state_ = State::kReading;
  Phase phase_ = Phase::kHeader;
  std::string raw_;  // text consumed while not announced
  JsonValueStream value_{/*object_only=*/false};
  bool string_arguments_ = false;
  std::string string_literal_;  // arguments given as a string: its JSON text
};

}  // namespace pagoda::openai
