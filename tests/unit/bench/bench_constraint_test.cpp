// The structured-output constraint of `pagoda bench` (--response-format-schema
// / --structured-output) and the response_format it puts in request bodies.
#include "bench/bench_constraint.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "bench/openai_stream.h"

namespace pagoda::bench {
namespace {

using nlohmann::json;

std::string write_temp(const std::string& name, const std::string& text) {
  std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

TEST(BenchConstraint, NoneByDefault) {
  for (const char* kind : {"", "none"}) {
    auto c = bench_constraint("", kind);
    ASSERT_TRUE(c.ok()) << c.error().message;
    EXPECT_FALSE(c->has_value());
  }
}

TEST(BenchConstraint, JsonObject) {
  auto c = bench_constraint("", "json_object");
  ASSERT_TRUE(c.ok() && c->has_value());
  EXPECT_EQ((*c)->kind, StructuredOutputSpec::Kind::kJsonObject);
  EXPECT_EQ(response_format_json(**c), json({{"type", "json_object"}}));
}

TEST(BenchConstraint, SchemaFile) {
  auto path = write_temp("bench_schema.json",
                         R"({"type": "object", "properties": {"a": {"type": "integer"}}})");
  auto c = bench_constraint(path, "");
  ASSERT_TRUE(c.ok() && c->has_value()) << (c.ok() ? "" : c.error().message);
  EXPECT_EQ((*c)->kind, StructuredOutputSpec::Kind::kJsonSchema);
  json rf = response_format_json(**c);
  EXPECT_EQ(rf["type"], "json_schema");
  EXPECT_EQ(rf["json_schema"]["name"], "bench");
  EXPECT_EQ(rf["json_schema"]["schema"]["properties"]["a"]["type"], "integer");
}

TEST(BenchConstraint, BadFlagsAreErrors) {
  auto bad_kind = bench_constraint("", "regex");
  ASSERT_FALSE(bad_kind.ok());
  EXPECT_NE(bad_kind.error().message.find("--structured-output"), std::string::npos);
  auto missing = bench_constraint(::testing::TempDir() + "no_such_schema.json", "");
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("no_such_schema.json"), std::string::npos);
  auto not_object = bench_constraint(write_temp("bench_array.json", "[1, 2]"), "");
  ASSERT_FALSE(not_object.ok());
  EXPECT_NE(not_object.error().message.find("not a JSON object"), std::string::npos);
  auto both = bench_constraint(write_temp("bench_ok.json", "{}"), "json_object");
  ASSERT_FALSE(both.ok());
  EXPECT_NE(both.error().message.find("exclude"), std::string::npos);
}

TEST(BenchConstraint, RequestBodiesCarryResponseFormat) {
  BenchRequest r{{5, 6}, "hi", 2, 4};
  PayloadOptions plain{"m", true, 0.0, std::nullopt};
  EXPECT_FALSE(json::parse(build_request_body(Api::kChat, r, plain)).contains("response_format"));
  auto c = bench_constraint(write_temp("bench_schema2.json", R"({"type": "string"})"), "");
  ASSERT_TRUE(c.ok());
  PayloadOptions constrained{"m", true, 0.0, *c};
  for (Api api : {Api::kChat, Api::kCompletions}) {
    json body = json::parse(build_request_body(api, r, constrained));
    EXPECT_EQ(body["response_format"]["type"], "json_schema");
    EXPECT_EQ(body["response_format"]["json_schema"]["schema"], json({{"type", "string"}}));
  }
}

}  // namespace
}  // namespace pagoda::bench
