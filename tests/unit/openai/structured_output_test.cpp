// Structured output through the API: the request fields read into a
// StructuredOutputSpec (structured_output_request.h), what reaches the engine
// (FakeEngine records the specs it compiles), the errors, and tool_choice
// "required" / a named function constraining the output and answered as
// tool calls, streamed or not.
#include <gtest/gtest.h>

#include "fake_service.h"
#include "openai/structured_output_request.h"

namespace pagoda::openai {
namespace {

using json = nlohmann::ordered_json;
using Kind = StructuredOutputSpec::Kind;

// read_constraint_source over `body`: the source, or the error.
struct ReadResult {
  std::optional<ConstraintSource> source;
  std::optional<ApiError> error;
};
ReadResult read(const std::string& body) {
  json parsed = json::parse(body);
  FieldReader reader(parsed);
  ReadResult r;
  r.source = read_constraint_source(reader);
  r.error = reader.error();
  return r;
}

TEST(ConstraintSource, EachFieldGivesItsSpec) {
  struct Case {
    const char* body;
    Kind kind;
    const char* text;
    const char* field;
  };
  const std::vector<Case> cases = {
      {R"({"response_format": {"type": "json_object"}})", Kind::kJsonObject, "", "response_format"},
      {R"({"response_format": {"type": "json_object", "schema": {"type": "integer"}}})",
       Kind::kJsonSchema, R"({"type":"integer"})", "response_format.schema"},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"name": "n", "strict": true,
           "schema": {"type": "object", "properties": {"a": {"type": "string"}}}}}})",
       Kind::kJsonSchema, R"({"type":"object","properties":{"a":{"type":"string"}}})",
       "response_format.json_schema.schema"},
      {R"({"structured_outputs": {"json": {"type": "array"}}})", Kind::kJsonSchema,
       R"({"type":"array"})", "structured_outputs.json"},
      {R"({"structured_outputs": {"json": "{\"type\": \"array\"}", "disable_fallback": true}})",
       Kind::kJsonSchema, R"({"type":"array"})", "structured_outputs.json"},
      {R"({"structured_outputs": {"regex": "[0-9]+"}})", Kind::kRegex, "[0-9]+",
       "structured_outputs.regex"},
      {R"({"structured_outputs": {"grammar": "root ::= \"a\""}})", Kind::kGrammar, "root ::= \"a\"",
       "structured_outputs.grammar"},
      {R"({"structured_outputs": {"json_object": true}})", Kind::kJsonObject, "",
       "structured_outputs.json_object"},
      {R"({"guided_json": {"type": "string"}})", Kind::kJsonSchema, R"({"type":"string"})",
       "guided_json"},
      {R"({"guided_regex": "a|b", "guided_decoding_backend": "xgrammar"})", Kind::kRegex, "a|b",
       "guided_regex"},
      {R"({"guided_grammar": "root ::= [a-z]+", "guided_decoding_backend": "auto"})",
       Kind::kGrammar, "root ::= [a-z]+", "guided_grammar"},
      {R"({"grammar": "root ::= \"x\""})", Kind::kGrammar, "root ::= \"x\"", "grammar"},
      {R"({"json_schema": {"const": 1}})", Kind::kJsonSchema, R"({"const":1})", "json_schema"},
  };
  for (const auto& c : cases) {
    ReadResult r = read(c.body);
    ASSERT_FALSE(r.error) << c.body << " → " << r.error->message;
    ASSERT_TRUE(r.source) << c.body;
    EXPECT_EQ(r.source->spec.kind, c.kind) << c.body;
    EXPECT_EQ(r.source->spec.text, c.text) << c.body;
    EXPECT_EQ(r.source->field, c.field) << c.body;
  }
  ReadResult choice = read(R"({"guided_choice": ["yes", "no"]})");
  ASSERT_TRUE(choice.source);
  EXPECT_EQ(choice.source->spec.kind, Kind::kChoice);
  EXPECT_EQ(choice.source->spec.choices, (std::vector<std::string>{"yes", "no"}));
  choice = read(R"({"structured_outputs": {"choice": ["a"]}})");
  ASSERT_TRUE(choice.source);
  EXPECT_EQ(choice.source->field, "structured_outputs.choice");
}

TEST(ConstraintSource, NoConstraint) {
  for (const char* body :
       {R"({})", R"({"response_format": {"type": "text"}})", R"({"guided_json": null})",
        R"({"guided_decoding_backend": "outlines:no-fallback"})"}) {
    ReadResult r = read(body);
    EXPECT_FALSE(r.error) << body << " → " << r.error->message;
    EXPECT_FALSE(r.source) << body;
  }
}

TEST(ConstraintSource, ErrorsNameTheField) {
  struct Case {
    const char* body;
    const char* param;
    const char* says;  // a part of the message
  };
  const std::vector<Case> cases = {
      {R"({"response_format": "json"})", "response_format", "must be an object"},
      {R"({"response_format": {}})", "response_format.type", "is required"},
      {R"({"response_format": {"type": "xml"}})", "response_format.type", "\"xml\""},
      {R"({"response_format": {"type": "structural_tag"}})", "response_format.type",
       "not supported"},
      {R"({"response_format": {"type": "json_schema"}})", "response_format.json_schema",
       "must be an object"},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}})",
       "response_format.json_schema.schema", "is required"},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"schema": "{}"}}})",
       "response_format.json_schema.schema", "must be a JSON Schema object"},
      {R"({"response_format": {"type": "json_schema", "json_schema": {"name": 3, "schema": {}}}})",
       "response_format.json_schema.name", "must be a string"},
      {R"({"structured_outputs": {}})", "structured_outputs", "must hold one of"},
      {R"({"structured_outputs": {"json_object": false}})", "structured_outputs",
       "must hold one of"},
      {R"({"structured_outputs": {"regex": "a", "choice": ["a"]}})", "structured_outputs.choice",
       "'structured_outputs.regex' and 'structured_outputs.choice'"},
      {R"({"structured_outputs": {"json": "{not json"}})", "structured_outputs.json",
       "not valid JSON"},
      {R"({"structured_outputs": {"json": "[1]"}})", "structured_outputs.json",
       "must hold a JSON Schema object"},
      {R"({"structured_outputs": {"regex": "a", "whitespace_pattern": " "}})",
       "structured_outputs.whitespace_pattern", "not supported"},
      {R"({"structured_outputs": {"regex": "a", "disable_any_whitespace": true}})",
       "structured_outputs.disable_any_whitespace", "not supported"},
      {R"({"structured_outputs": {"structural_tag": "{}"}})", "structured_outputs.structural_tag",
       "not supported"},
      {R"({"guided_choice": []})", "guided_choice", "at least one"},
      {R"({"guided_choice": "yes"})", "guided_choice", "array of strings"},
      {R"({"guided_choice": ["a", 1]})", "guided_choice", "[1] must be a string"},
      {R"({"guided_regex": 5})", "guided_regex", "must be a string"},
      {R"({"guided_json": 5})", "guided_json", "JSON Schema object"},
      {R"({"guided_whitespace_pattern": " "})", "guided_whitespace_pattern", "not supported"},
      {R"({"guided_decoding_backend": "mine"})", "guided_decoding_backend", "\"mine\""},
      {R"({"guided_decoding_backend": "xgrammar:disable-any-whitespace"})",
       "guided_decoding_backend", "not supported"},
      {R"({"json_schema": "{}"})", "json_schema", "JSON Schema object"},
      // Two sources: a 400 naming both.
      {R"({"response_format": {"type": "json_object"}, "guided_regex": "a"})", "guided_regex",
       "'response_format' and 'guided_regex' both constrain the output"},
      {R"({"guided_json": {}, "guided_regex": "a"})", "guided_regex",
       "'guided_json' and 'guided_regex'"},
      {R"({"structured_outputs": {"regex": "a"}, "grammar": "root ::= \"a\""})", "grammar",
       "'structured_outputs.regex' and 'grammar'"},
      {R"({"grammar": "root ::= \"a\"", "json_schema": {}})", "json_schema",
       "'grammar' and 'json_schema'"},
  };
  for (const auto& c : cases) {
    ReadResult r = read(c.body);
    ASSERT_TRUE(r.error) << c.body;
    EXPECT_EQ(r.error->status, 400);
    EXPECT_EQ(r.error->param, c.param) << c.body << " → " << r.error->message;
    EXPECT_NE(r.error->message.find(c.says), std::string::npos)
        << c.body << " → " << r.error->message;
    EXPECT_FALSE(r.source) << c.body;
  }
}

class StructuredOutputService : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::FakeEngineOptions options;
    options.tokenizer_path = std::string(PAGODA_SHARED_DIR) + "/models/stories260K";
    options.chat_template_file =
        std::string(PAGODA_SOURCE_DIR) + "/tests/data/server/simple_chat.jinja";
    ServiceOptions service_options;
    service_options.tool_call_parser = "hermes";
    auto service = testing::FakeService::create(options, service_options);
    ASSERT_TRUE(service.ok()) << service.error().message;
    service_ = std::move(service.value());
  }

  std::shared_ptr<testing::RecordingResponder> post(const std::string& path, const json& body) {
    auto r = service_->post(path, body.dump());
    EXPECT_TRUE(r->wait());
    return r;
  }
  json chat(const std::string& content, json fields) {
    fields["messages"] = json::array({{{"role", "user"}, {"content", content}}});
    return fields;
  }
  std::vector<StructuredOutputSpec> specs() { return service_->engine().compiled_specs(); }

  std::unique_ptr<testing::FakeService> service_;
};

const json kTools = json::parse(R"([
  {"type": "function", "function": {"name": "get_weather",
   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
  {"type": "function", "function": {"name": "get_time"}}])");

TEST_F(StructuredOutputService, TheSpecReachesTheEngine) {
  auto r = post("/v1/completions",
                {{"prompt", "CONSTRAINT?"}, {"max_tokens", 100}, {"guided_regex", "[0-9]{3}"}});
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->json_body()["choices"][0]["text"].get<std::string>()),
            json({{"kind", "regex"}, {"text", "[0-9]{3}"}}));
  ASSERT_EQ(specs().size(), 1u);

  r = post("/v1/chat/completions",
           chat("CONSTRAINT?",
                {{"max_tokens", 100},
                 {"response_format",
                  {{"type", "json_schema"},
                   {"json_schema", {{"name", "x"}, {"schema", {{"type", "object"}}}}}}}}));
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->json_body()["choices"][0]["message"]["content"].get<std::string>()),
            json({{"kind", "json_schema"}, {"text", R"({"type":"object"})"}}));

  // No constraint: none reaches the engine, nothing is compiled.
  r = post("/v1/completions", {{"prompt", "CONSTRAINT?"}, {"max_tokens", 100}});
  EXPECT_EQ(json::parse(r->json_body()["choices"][0]["text"].get<std::string>()),
            json({{"kind", nullptr}}));
  EXPECT_EQ(specs().size(), 2u);
}

TEST_F(StructuredOutputService, CompileErrorsAre400NamingTheField) {
  auto r = post(
      "/v1/chat/completions",
      chat("hi",
           {{"response_format",
             {{"type", "json_schema"},
              {"json_schema", {{"name", "x"}, {"schema", {{"title", "REFUSE_CONSTRAINT"}}}}}}}}));
  ASSERT_EQ(r->status, 400) << r->body;
  json error = r->json_body()["error"];
  EXPECT_EQ(error["param"], "response_format.json_schema.schema");
  EXPECT_EQ(error["type"], "invalid_request_error");
  EXPECT_EQ(error["message"],
            "response_format.json_schema.schema: json_schema at position 10: the fake compiler "
            "refuses REFUSE_CONSTRAINT");

  r = post("/v1/completions",
           {{"prompt", "x"}, {"structured_outputs", {{"choice", {"a", "REFUSE_CONSTRAINT"}}}}});
  ASSERT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(r->json_body()["error"]["param"], "structured_outputs.choice");
}

TEST_F(StructuredOutputService, BeamSearchWithAConstraintIs400) {
  auto r =
      post("/v1/completions",
           {{"prompt", "x"}, {"use_beam_search", true}, {"n", 2}, {"guided_choice", {"a", "b"}}});
  ASSERT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(r->json_body()["error"]["param"], "use_beam_search");
  EXPECT_NE(r->json_body()["error"]["message"].get<std::string>().find("guided_choice"),
            std::string::npos);
  r = post("/v1/chat/completions",
           chat("x", {{"use_beam_search", true}, {"tools", kTools}, {"tool_choice", "required"}}));
  ASSERT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(r->json_body()["error"]["param"], "use_beam_search");
  EXPECT_TRUE(specs().empty());
}

TEST_F(StructuredOutputService, ToolChoiceRequiredConstrainsToAnArrayOfCalls) {
  const std::string calls =
      R"([{"name": "get_weather", "parameters": {"city": "Paris"}}, {"name": "get_time", "parameters": {}}])";
  json request = chat("SAY: " + calls, {{"tools", kTools}, {"tool_choice", "required"}});
  auto r = post("/v1/chat/completions", request);
  ASSERT_EQ(r->status, 200) << r->body;
  ASSERT_EQ(specs().size(), 1u);
  EXPECT_EQ(specs()[0].kind, Kind::kJsonSchema);
  const json schema = json::parse(specs()[0].text);
  const json want = json::parse(R"({"type": "array", "minItems": 1, "items": {"anyOf": [
      {"type": "object", "properties": {"name": {"type": "string", "enum": ["get_weather"]},
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}},
       "required": ["name", "parameters"], "additionalProperties": false},
      {"type": "object", "properties": {"name": {"type": "string", "enum": ["get_time"]},
        "parameters": {"type": "object", "properties": {}}},
       "required": ["name", "parameters"], "additionalProperties": false}]}})");
  EXPECT_EQ(schema, want);

  json choice = r->json_body()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "tool_calls");
  EXPECT_TRUE(choice["message"]["content"].is_null());
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 2u);
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"], R"({"city": "Paris"})");
  EXPECT_EQ(choice["message"]["tool_calls"][1]["function"]["name"], "get_time");
  EXPECT_EQ(choice["message"]["tool_calls"][1]["function"]["arguments"], "{}");

  // Streamed: tool call deltas, vLLM's shape.
  request["stream"] = true;
  auto s = post("/v1/chat/completions", request);
  std::vector<std::string> names, arguments(2);
  std::string finish;
  for (const auto& event : s->events()) {
    if (event == "[DONE]") break;
    json c = json::parse(event)["choices"][0];
    EXPECT_FALSE(c["delta"].contains("content") && c["delta"]["content"] != "") << event;
    for (const auto& t : c["delta"].value("tool_calls", json::array())) {
      if (t.contains("id")) names.push_back(t["function"]["name"]);
      arguments.at(t["index"].get<size_t>()) += t["function"]["arguments"].get<std::string>();
    }
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(names, (std::vector<std::string>{"get_weather", "get_time"}));
  EXPECT_EQ(arguments, (std::vector<std::string>{R"({"city": "Paris"})", "{}"}));
  EXPECT_EQ(finish, "tool_calls");

  // parallel_tool_calls false: at most one item, and one call answered.
  request["stream"] = false;
  request["parallel_tool_calls"] = false;
  r = post("/v1/chat/completions", request);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(specs().back().text)["maxItems"], 1);
  EXPECT_EQ(r->json_body()["choices"][0]["message"]["tool_calls"].size(), 1u);
}

TEST_F(StructuredOutputService, ToolChoiceBypassesTheTextParser) {
  // The server's parser (hermes) would read this as a call; under "required"
  // the output is the constrained array, so hermes tags are plain content.
  const std::string hermes = R"(<tool_call>{"name": "get_time", "arguments": {}}</tool_call>)";
  auto r = post("/v1/chat/completions",
                chat("SAY: " + hermes, {{"tools", kTools}, {"tool_choice", "required"}}));
  ASSERT_EQ(r->status, 200) << r->body;
  json choice = r->json_body()["choices"][0];
  EXPECT_EQ(choice["message"]["content"], hermes);
  EXPECT_FALSE(choice["message"].contains("tool_calls"));
  EXPECT_EQ(choice["finish_reason"], "stop");
}

TEST_F(StructuredOutputService, NamedToolChoiceConstrainsToItsParameters) {
  json request =
      chat(R"(SAY: {"city": "Paris"})",
           {{"tools", kTools},
            {"tool_choice", {{"type", "function"}, {"function", {{"name", "get_weather"}}}}}});
  auto r = post("/v1/chat/completions", request);
  ASSERT_EQ(r->status, 200) << r->body;
  ASSERT_EQ(specs().size(), 1u);
  EXPECT_EQ(json::parse(specs()[0].text), kTools[0]["function"]["parameters"]);
  json choice = r->json_body()["choices"][0];
  EXPECT_EQ(choice["finish_reason"], "stop");  // as OpenAI and vLLM answer a named choice
  EXPECT_TRUE(choice["message"]["content"].is_null());
  ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(choice["message"]["tool_calls"][0]["function"]["arguments"], R"({"city": "Paris"})");

  request["stream"] = true;
  auto s = post("/v1/chat/completions", request);
  std::string name, arguments, finish;
  int num_calls = 0;
  for (const auto& event : s->events()) {
    if (event == "[DONE]") break;
    json c = json::parse(event)["choices"][0];
    for (const auto& t : c["delta"].value("tool_calls", json::array())) {
      EXPECT_EQ(t["index"], 0);
      if (t.contains("id")) {
        ++num_calls;
        name = t["function"]["name"];
      }
      arguments += t["function"]["arguments"].get<std::string>();
    }
    if (!c["finish_reason"].is_null()) finish = c["finish_reason"];
  }
  EXPECT_EQ(num_calls, 1);
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(arguments, R"({"city": "Paris"})");
  EXPECT_EQ(finish, "stop");

  // A tool without parameters: an empty object's schema.
  request["stream"] = false;
  request["tool_choice"]["function"]["name"] = "get_time";
  r = post("/v1/chat/completions", request);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(specs().back().text),
            json::parse(R"({"type": "object", "properties": {}})"));
}

TEST_F(StructuredOutputService, ToolChoiceWithAnotherConstraintIs400NamingBoth) {
  auto r =
      post("/v1/chat/completions", chat("x", {{"tools", kTools},
                                              {"tool_choice", "required"},
                                              {"response_format", {{"type", "json_object"}}}}));
  ASSERT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(r->json_body()["error"]["param"], "tool_choice");
  EXPECT_NE(r->json_body()["error"]["message"].get<std::string>().find(
                "'response_format' and 'tool_choice'"),
            std::string::npos);
  // tool_choice auto with a constraint is fine (the output follows the constraint).
  r = post("/v1/chat/completions",
           chat("x", {{"tools", kTools}, {"guided_regex", "[a-z]+"}, {"max_tokens", 4}}));
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST_F(StructuredOutputService, RequiredHoistsDefinitions) {
  json tools = json::parse(R"([
    {"type": "function", "function": {"name": "a", "parameters": {"type": "object",
      "properties": {"p": {"$ref": "#/$defs/P"}}, "$defs": {"P": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "b", "parameters": {"type": "object",
      "properties": {"q": {"$ref": "#/$defs/P"}}, "$defs": {"P": {"type": "string"}}}}}])");
  auto r = post("/v1/chat/completions",
                chat("x", {{"tools", tools}, {"tool_choice", "required"}, {"max_tokens", 4}}));
  ASSERT_EQ(r->status, 200) << r->body;
  const json schema = json::parse(specs().back().text);
  EXPECT_EQ(schema["$defs"], json::parse(R"({"P": {"type": "string"}})"));
  EXPECT_FALSE(schema["items"]["anyOf"][0]["properties"]["parameters"].contains("$defs"));

  tools[1]["function"]["parameters"]["$defs"]["P"] = {{"type", "integer"}};
  r = post("/v1/chat/completions", chat("x", {{"tools", tools}, {"tool_choice", "required"}}));
  ASSERT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(r->json_body()["error"]["param"], "tools");
  EXPECT_NE(r->json_body()["error"]["message"].get<std::string>().find("$defs/P"),
            std::string::npos);
}

}  // namespace
}  // namespace pagoda::openai
