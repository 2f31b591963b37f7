// Helpers for the tool-call parser tests: expected outputs, and the property
// every parser keeps — streaming the same text in any split gives the same
// content and calls as parsing it whole, each call announced once (id and
// name in its first piece) and its argument pieces concatenating to the whole
// parse's arguments exactly.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "openai/tools/tool_parser.h"

namespace pagoda::openai::testing {

using json = nlohmann::ordered_json;

struct Expected {
  std::string content;
  std::vector<std::pair<std::string, json>> calls;  // name, arguments
};

// Checks an id's shape; the default: "call_" + 24 alphanumerics.
using IdCheck = std::function<bool(const std::string&)>;
inline bool default_id(const std::string& id) {
  return id.rfind("call_", 0) == 0 && id.size() == 29;
}

inline void expect_parsed(const ParsedToolOutput& got, const Expected& want,
                          const std::string& text, const IdCheck& id_ok = default_id) {
  EXPECT_EQ(got.content, want.content) << text;
  ASSERT_EQ(got.tool_calls.size(), want.calls.size()) << text;
  for (size_t i = 0; i < want.calls.size(); ++i) {
    EXPECT_EQ(got.tool_calls[i].name, want.calls[i].first) << text;
    const json args = json::parse(got.tool_calls[i].arguments, nullptr, false);
    EXPECT_EQ(args, want.calls[i].second) << text << "\nargs: " << got.tool_calls[i].arguments;
    EXPECT_TRUE(id_ok(got.tool_calls[i].id)) << got.tool_calls[i].id;
  }
}

// Streams `text` cut at `cuts` (sorted offsets) and reassembles the pieces.
inline ParsedToolOutput stream_cut(const ToolParser& parser, const std::string& text,
                                   const std::vector<size_t>& cuts, const json& tools) {
  ParsedToolOutput out;
  auto stream = parser.start(tools);
  auto take = [&](const ToolStreamDelta& d) {
    out.content += d.content;
    int last_index = -1;
    for (const auto& c : d.calls) {
      EXPECT_NE(c.index, last_index) << "one piece per call and step";
      last_index = c.index;
      if (c.index == static_cast<int>(out.tool_calls.size())) {
        EXPECT_FALSE(c.id.empty()) << "a call's first piece carries its id";
        EXPECT_FALSE(c.name.empty()) << "a call's first piece carries its name";
        out.tool_calls.push_back({c.id, c.name, ""});
      } else {
        EXPECT_TRUE(c.id.empty()) << "id only in the first piece of a call";
        EXPECT_TRUE(c.name.empty()) << "name only in the first piece of a call";
      }
      ASSERT_LT(c.index, static_cast<int>(out.tool_calls.size()));
      out.tool_calls[c.index].arguments += c.arguments;
    }
  };
  size_t at = 0;
  for (size_t cut : cuts) {
    take(stream->feed(std::string_view(text).substr(at, cut - at)));
    at = cut;
  }
  take(stream->feed(std::string_view(text).substr(at)));
  take(stream->finish());
  return out;
}

// Every split of `text` (pieces of 1..4 bytes, and `num_trials` random cut
// sets) gives exactly the whole parse's content and calls; returns the whole
// parse.
inline ParsedToolOutput check_split_invariance(const ToolParser& parser, const std::string& text,
                                               const json& tools = json(), int num_trials = 40) {
  const ParsedToolOutput whole = parse_tool_output(parser, text, tools);
  auto same = [&](const ParsedToolOutput& got, const std::string& how) {
    EXPECT_EQ(got.content, whole.content) << how;
    ASSERT_EQ(got.tool_calls.size(), whole.tool_calls.size()) << how;
    for (size_t i = 0; i < got.tool_calls.size(); ++i) {
      EXPECT_EQ(got.tool_calls[i].name, whole.tool_calls[i].name) << how;
      EXPECT_EQ(got.tool_calls[i].arguments, whole.tool_calls[i].arguments) << how;
    }
  };
  for (size_t piece = 1; piece <= 4; ++piece) {
    std::vector<size_t> cuts;
    for (size_t i = piece; i < text.size(); i += piece) cuts.push_back(i);
    same(stream_cut(parser, text, cuts, tools), "pieces of " + std::to_string(piece));
  }
  std::mt19937 rng(static_cast<uint32_t>(std::hash<std::string>()(text)));
  for (int trial = 0; trial < num_trials && text.size() > 1; ++trial) {
    std::vector<size_t> cuts;
    const size_t num_cuts = std::uniform_int_distribution<size_t>(1, text.size() - 1)(rng);
    std::uniform_int_distribution<size_t> pick(1, text.size() - 1);
    for (size_t i = 0; i < num_cuts; ++i) cuts.push_back(pick(rng));
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    same(stream_cut(parser, text, cuts, tools), "random cuts, trial " + std::to_string(trial));
  }
  return whole;
}

// The whole parse matches `want`, and every split gives the same.
inline void check_splits(const ToolParser& parser, const std::string& text, const Expected& want,
                         const json& tools = json(), const IdCheck& id_ok = default_id) {
  SCOPED_TRACE(text);
  expect_parsed(check_split_invariance(parser, text, tools), want, text, id_ok);
}

}  // namespace pagoda::openai::testing
