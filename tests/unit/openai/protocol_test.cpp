// JSON helpers, SSE framing, auth, route matching, field reading and error shapes.
#include <gtest/gtest.h>

#include <map>

#include "openai/api_error.h"
#include "openai/auth.h"
#include "openai/field_reader.h"
#include "openai/route_table.h"
#include "openai/sse.h"
#include "openai/wire/ids.h"
#include "openai/wire/json_util.h"

namespace pagoda::openai {
namespace {

using json = nlohmann::ordered_json;

TEST(Utf8, FindsFirstInvalidSequence) {
  EXPECT_EQ(find_invalid_utf8("plain ascii"), std::string_view::npos);
  EXPECT_EQ(find_invalid_utf8("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80"),
            std::string_view::npos);                      // é € 😀
  EXPECT_EQ(find_invalid_utf8("ab\xFF"), 2u);             // never valid
  EXPECT_EQ(find_invalid_utf8("\xC0\x80"), 0u);           // overlong NUL
  EXPECT_EQ(find_invalid_utf8("x\xE0\x80\xAF"), 1u);      // overlong '/'
  EXPECT_EQ(find_invalid_utf8("\xED\xA0\x80"), 0u);       // UTF-16 surrogate
  EXPECT_EQ(find_invalid_utf8("a\xF4\x90\x80\x80"), 1u);  // above U+10FFFF
  EXPECT_EQ(find_invalid_utf8("abc\xE2\x82"), 3u);        // truncated
  EXPECT_EQ(find_invalid_utf8("\xE2\x28\xA1"), 0u);       // bad continuation
}

TEST(Utf8, CountsCodePoints) {
  EXPECT_EQ(count_code_points("abc"), 3u);
  EXPECT_EQ(count_code_points("caf\xC3\xA9"), 4u);
  EXPECT_EQ(count_code_points("\xF0\x9F\x98\x80!"), 2u);
}

TEST(Json, DumpReplacesInvalidUtf8) {
  EXPECT_EQ(dump_json(json{{"t", std::string("a\xFF"
                                             "b")}}),
            "{\"t\":\"a\xEF\xBF\xBD"
            "b\"}");
}

TEST(Json, ParseObjectErrors) {
  EXPECT_TRUE(parse_json_object(R"({"a": 1})").ok());
  auto not_object = parse_json_object("[1, 2]");
  ASSERT_FALSE(not_object.ok());
  EXPECT_NE(not_object.error().message.find("JSON object, got array"), std::string::npos);
  auto syntax = parse_json_object(R"({"a": })");
  ASSERT_FALSE(syntax.ok());
  EXPECT_NE(syntax.error().message.find("not valid JSON"), std::string::npos);
  auto utf8 = parse_json_object("{\"a\": \"\xC3\x28\"}");
  ASSERT_FALSE(utf8.ok());
  EXPECT_EQ(utf8.error().message, "request body is not valid UTF-8 (byte offset 7)");
  const std::string deep = std::string(100, '[') + std::string(100, ']');
  auto nested = parse_json_object("{\"a\": " + deep + "}");
  ASSERT_FALSE(nested.ok());
  EXPECT_NE(nested.error().message.find("nests 101 levels"), std::string::npos);
  // Brackets inside strings do not count.
  EXPECT_TRUE(parse_json_object("{\"a\": \"" + deep + "\"}").ok());
}

// An independent SSE reader: splits on blank lines, collects data: lines.
std::vector<std::string> read_sse(const std::string& stream) {
  std::vector<std::string> events;
  size_t start = 0;
  while (start < stream.size()) {
    const size_t end = stream.find("\n\n", start);
    if (end == std::string::npos) break;
    const std::string block = stream.substr(start, end - start);
    EXPECT_EQ(block.rfind("data: ", 0), 0u) << block;
    EXPECT_EQ(block.find('\n'), std::string::npos) << "one data line per event";
    events.push_back(block.substr(6));
    start = end + 2;
  }
  EXPECT_EQ(start, stream.size()) << "trailing bytes outside an event";
  return events;
}

TEST(Sse, FramesEventsAndDone) {
  const std::string stream =
      sse_event(json{{"text", "line1\nline2"}}) + sse_event(json{{"n", 2}}) + sse_done();
  auto events = read_sse(stream);
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(json::parse(events[0])["text"], "line1\nline2");
  EXPECT_EQ(json::parse(events[1])["n"], 2);
  EXPECT_EQ(events[2], "[DONE]");
}

TEST(Auth, BearerToken) {
  EXPECT_TRUE(is_authorized("", ""));
  EXPECT_TRUE(is_authorized("anything", ""));
  EXPECT_TRUE(is_authorized("Bearer sk-123", "sk-123"));
  EXPECT_TRUE(is_authorized("bearer  sk-123 ", "sk-123"));
  EXPECT_FALSE(is_authorized("", "sk-123"));
  EXPECT_FALSE(is_authorized("sk-123", "sk-123"));
  EXPECT_FALSE(is_authorized("Bearer sk-12", "sk-123"));
  EXPECT_FALSE(is_authorized("Bearer sk-1234", "sk-123"));
  EXPECT_FALSE(is_authorized("Basic sk-123", "sk-123"));
}

// One pass over a table finds the route, or what a miss answers: 404 (no
// route has the path) or 405 with the methods that the path allows.
TEST(RouteTable, RoutesAnd404And405) {
  const Route routes[] = {
      {.method = "POST", .path = "/v1/completions"},
      {.method = "GET", .path = "/v1/models"},
      {.method = "GET", .path = "/v1/models/", .match = PathMatch::kPrefix},
  };
  EXPECT_EQ(match_route(routes, "POST", "/v1/completions").route, &routes[0]);
  EXPECT_EQ(match_route(routes, "GET", "/v1/models/org/name").route, &routes[2]);
  auto not_found = match_route(routes, "GET", "/v1/nothing");
  EXPECT_EQ(not_found.route, nullptr);
  EXPECT_EQ(not_found.allow, "");
  auto wrong_method = match_route(routes, "GET", "/v1/completions");
  EXPECT_EQ(wrong_method.route, nullptr);
  EXPECT_EQ(wrong_method.allow, "POST");
}

// A route's stages hold for its path (the API key) and for its method (the
// drain gate), so that a miss gets them too.
TEST(RouteTable, StagesOfMatchesAndMisses) {
  const Route routes[] = {
      {.method = "POST", .path = "/generate", .drain_gated = true},
      {.method = "GET", .path = "/health", .needs_api_key = false},
      {.method = "DELETE", .path = "/health"},
  };
  auto generate = match_route(routes, "POST", "/generate");
  EXPECT_TRUE(generate.needs_api_key);
  EXPECT_TRUE(generate.drain_gated);
  auto health = match_route(routes, "GET", "/health");
  EXPECT_FALSE(health.needs_api_key);
  EXPECT_FALSE(health.drain_gated);
  auto post_health = match_route(routes, "POST", "/health");
  EXPECT_EQ(post_health.route, nullptr);
  EXPECT_EQ(post_health.allow, "GET, DELETE");
  EXPECT_FALSE(post_health.needs_api_key);
  EXPECT_TRUE(post_health.drain_gated);
  auto get_nowhere = match_route(routes, "GET", "/nowhere");
  EXPECT_TRUE(get_nowhere.needs_api_key);
  EXPECT_FALSE(get_nowhere.drain_gated);
}

TEST(ApiError, OpenAiShape) {
  json body = api_error_json(invalid_field("temperature", "bad"));
  EXPECT_EQ(body, json::parse(R"({"error": {"message": "bad", "type": "invalid_request_error",
                                            "param": "temperature", "code": null}})"));
  EXPECT_EQ(api_error_from(make_error(ErrorCode::kResourceExhausted, "full")).status, 429);
  EXPECT_EQ(api_error_from(make_error(ErrorCode::kInvalidArgument, "x")).status, 400);
  EXPECT_EQ(api_error_from(make_error(ErrorCode::kInternal, "x")).status, 500);
  EXPECT_EQ(error_type_for_status(401), std::string("authentication_error"));
}

TEST(Ids, PrefixAndAlphabet) {
  const std::string id = random_id("call_");
  EXPECT_EQ(id.size(), 5u + 24u);
  EXPECT_EQ(id.rfind("call_", 0), 0u);
  for (char c : id.substr(5)) EXPECT_TRUE(std::isalnum(static_cast<unsigned char>(c)));
  EXPECT_NE(random_id("x"), random_id("x"));
}

TEST(FieldReader, TypesRangesAndFirstError) {
  json body =
      json::parse(R"({"t": 0.5, "i": 3, "f": 2.0, "b": true, "s": "x", "l": ["a", "b"], "one": "a",
                              "n": null, "big": 1e300, "neg": -1})");
  FieldReader r(body);
  EXPECT_EQ(r.number("t", 0, 2), 0.5);
  EXPECT_EQ(r.integer("i", 0, 10), 3);
  EXPECT_EQ(r.integer("f", 0, 10), 2);  // integral float accepted
  EXPECT_EQ(r.boolean("b"), true);
  EXPECT_EQ(r.string("s"), "x");
  EXPECT_EQ(r.string_list("l"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(r.string_list("one"), (std::vector<std::string>{"a"}));
  EXPECT_FALSE(r.integer("n", 0, 1).has_value());  // null reads as absent
  EXPECT_FALSE(r.integer("missing", 0, 1).has_value());
  EXPECT_FALSE(r.error().has_value());

  EXPECT_FALSE(r.integer("neg", 0, 10).has_value());
  ASSERT_TRUE(r.error().has_value());
  EXPECT_EQ(r.error()->param, "neg");
  EXPECT_EQ(r.error()->message, "'neg' must be in [0, 10], got -1");
  r.boolean("s");  // a second error does not replace the first
  EXPECT_EQ(r.error()->param, "neg");
}

TEST(FieldReader, ErrorMessages) {
  struct Case {
    const char* body;
    std::function<void(FieldReader&)> read;
    const char* message;
  };
  const std::vector<Case> cases = {
      {R"({"x": "hot"})", [](FieldReader& r) { r.number("x", 0, 2); },
       "'x' must be a number in [0, 2], got string \"hot\""},
      {R"({"x": 0})", [](FieldReader& r) { r.number("x", 0, 1, true); },
       "'x' must be in (0, 1], got 0"},
      {R"({"x": 1.5})", [](FieldReader& r) { r.integer("x", 0, 9); },
       "'x' must be an integer, got number 1.5"},
      {R"({"x": "1"})", [](FieldReader& r) { r.boolean("x"); },
       "'x' must be a boolean, got string \"1\""},
      {R"({"x": 1})", [](FieldReader& r) { r.string("x"); }, "'x' must be a string, got number 1"},
      {R"({"x": ["a", 2]})", [](FieldReader& r) { r.string_list("x"); },
       "'x' [1] must be a string, got number 2"},
      {R"({"x": [1, 99]})", [](FieldReader& r) { r.integer_list("x", 0, 9); },
       "'x' [1] must be an integer in [0, 9], got number 99"},
  };
  for (const auto& c : cases) {
    json body = json::parse(c.body);
    FieldReader r(body, "");
    c.read(r);
    ASSERT_TRUE(r.error().has_value()) << c.body;
    EXPECT_EQ(r.error()->message, c.message);
    EXPECT_EQ(r.error()->param, "x");
    EXPECT_EQ(r.error()->status, 400);
  }
  json nested = json::parse(R"({"include_usage": 1})");
  FieldReader r(nested, "stream_options.");
  r.boolean("include_usage");
  EXPECT_EQ(r.error()->param, "stream_options.include_usage");
}

}  // namespace
}  // namespace pagoda::openai
