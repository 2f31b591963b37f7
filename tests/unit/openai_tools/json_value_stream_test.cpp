// JsonValueStream: the normalized spelling, and that every prefix of a JSON
// text writes a prefix of the whole's output which close() turns into valid JSON.
#include "openai/tools/json_value_stream.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace pagoda::openai {
namespace {

using json = nlohmann::ordered_json;

TEST(JsonValueStream, NormalizesSpacing) {
  EXPECT_EQ(normalized_json("{\"a\":1,\"b\" :[ true,null , {}, [] ],\"c\":{\"d\":\"x y\"}}"),
            "{\"a\": 1, \"b\": [true, null, {}, []], \"c\": {\"d\": \"x y\"}}");
  EXPECT_EQ(normalized_json(" \"\\u00e9\\n\" "), "\"\\u00e9\\n\"");  // escapes as written
  EXPECT_EQ(normalized_json("-0.5e+3"), "-0.5e+3");
  std::string out;
  JsonValueStream raw_newline;
  raw_newline.feed("{\"s\": \"a\nb\tc\"}", out);
  EXPECT_EQ(out, "{\"s\": \"a\\nb\\tc\"}");  // raw control characters escaped
}

TEST(JsonValueStream, StopsAtTheEndOfTheValue) {
  JsonValueStream stream;
  std::string out;
  EXPECT_EQ(stream.feed("  {\"a\": [1]} tail", out), 12u);
  EXPECT_EQ(stream.state(), JsonValueStream::State::kDone);
  EXPECT_EQ(out, "{\"a\": [1]}");
  JsonValueStream number(/*object_only=*/false);
  out.clear();
  EXPECT_EQ(number.feed("42,", out), 2u);
  EXPECT_EQ(out, "42");
}

TEST(JsonValueStream, Errors) {
  for (const char* bad : {"[1]", "{'a': 1}", "{\"a\" 1}", "{\"a\": tru }", "{\"a\": 01}",
                          "{\"a\": \"\\x\"}", "{\"a\": 1,}", "{\"a\": [1 2]}"}) {
    JsonValueStream stream;
    std::string out;
    stream.feed(bad, out);
    EXPECT_EQ(stream.state(), JsonValueStream::State::kError) << bad;
    stream.close(out);
    EXPECT_EQ(out.empty(), !stream.started()) << bad;
    if (stream.started()) {
      EXPECT_TRUE(json::accept(out)) << bad << " → " << out;
    }
  }
  std::string deep(200, '[');
  JsonValueStream stream(/*object_only=*/false);
  std::string out;
  stream.feed(deep, out);
  EXPECT_EQ(stream.state(), JsonValueStream::State::kError);
}

TEST(JsonValueStream, EveryPrefixClosesToValidJson) {
  const std::string text =
      "{\"name\": \"x\", \"n\": -12.5e-3, \"list\": [1, \"two\", {\"three\": [true, false, "
      "null]}, []], \"esc\": \"q\\\"\\\\\\u00e9\\n\", \"empty\": {}, \"last\": 7}";
  const std::string whole = normalized_json(text);
  ASSERT_EQ(json::parse(whole), json::parse(text));
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    JsonValueStream stream;
    std::string out;
    stream.feed(text.substr(0, cut), out);
    EXPECT_EQ(whole.compare(0, out.size(), out), 0) << "prefix " << cut << ": " << out;
    stream.close(out);
    if (cut > 0) {
      EXPECT_TRUE(json::accept(out)) << "prefix " << cut << ": " << out;
    }
  }
}

}  // namespace
}  // namespace pagoda::openai
