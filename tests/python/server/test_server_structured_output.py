"""Structured output through the HTTP API: every field that carries a
constraint (response_format, vLLM's structured_outputs and guided_*,
llama-server's grammar / json_schema, tool_choice) reaches the engine as the
right spec -- the fake engine answers "CONSTRAINT?" with the spec it was given
-- its errors are 400s naming the field, and tool_choice "required" / a named
function come back as tool calls, streamed and not, through the OpenAI SDK
(client.beta.chat.completions.parse with a Pydantic model included)."""
import json

import openai
import pydantic
import pytest
import requests

from server_harness import API_KEY, MODEL, REAL, launch

HEADERS = {"Authorization": f"Bearer {API_KEY}"}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": SCHEMA}},
    {"type": "function", "function": {"name": "get_time"}},
]


def compact(value):
    """A JSON value as the server writes a schema's text."""
    return json.dumps(value, separators=(",", ":"))


def post(base_url, route, content, **fields):
    body = {"model": MODEL, "max_tokens": 200, **fields}
    if route == "chat/completions":
        body["messages"] = [{"role": "user", "content": content}]
    else:
        body["prompt"] = content
    return requests.post(f"{base_url}/v1/{route}", headers=HEADERS, timeout=60, json=body)


def answer(r):
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    return choice["text"] if "text" in choice else choice["message"]["content"]


def assert_400(r, param, words=()):
    assert r.status_code == 400, r.text
    error = r.json()["error"]
    assert error["param"] == param and error["type"] == "invalid_request_error", error
    for word in words:
        assert word in error["message"], error


SOURCES = [
    ({"response_format": {"type": "json_object"}}, {"kind": "json_object", "text": ""}),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": SCHEMA, "strict": True}}},
     {"kind": "json_schema", "text": compact(SCHEMA)}),
    ({"response_format": {"type": "json_object", "schema": SCHEMA}}, {"kind": "json_schema", "text": compact(SCHEMA)}),
    ({"structured_outputs": {"json": SCHEMA}}, {"kind": "json_schema", "text": compact(SCHEMA)}),
    ({"structured_outputs": {"json": json.dumps(SCHEMA)}}, {"kind": "json_schema", "text": compact(SCHEMA)}),
    ({"structured_outputs": {"regex": "[0-9]{3}"}}, {"kind": "regex", "text": "[0-9]{3}"}),
    ({"structured_outputs": {"choice": ["yes", "no"]}}, {"kind": "choice", "text": "", "choices": ["yes", "no"]}),
    ({"structured_outputs": {"grammar": 'root ::= "a"+'}}, {"kind": "grammar", "text": 'root ::= "a"+'}),
    ({"structured_outputs": {"json_object": True}}, {"kind": "json_object", "text": ""}),
    ({"guided_json": SCHEMA}, {"kind": "json_schema", "text": compact(SCHEMA)}),
    ({"guided_regex": "a|b", "guided_decoding_backend": "xgrammar"}, {"kind": "regex", "text": "a|b"}),
    ({"guided_choice": ["x"]}, {"kind": "choice", "text": "", "choices": ["x"]}),
    ({"guided_grammar": 'root ::= "b"'}, {"kind": "grammar", "text": 'root ::= "b"'}),
    ({"grammar": 'root ::= "c"'}, {"kind": "grammar", "text": 'root ::= "c"'}),
    ({"json_schema": SCHEMA}, {"kind": "json_schema", "text": compact(SCHEMA)}),
    ({"response_format": {"type": "text"}}, {"kind": None}),
]


@pytest.mark.parametrize("route", ["completions", "chat/completions"])
@pytest.mark.parametrize("fields, spec", SOURCES)
def test_each_field_reaches_the_engine(base_url, fake_only, route, fields, spec):
    assert json.loads(answer(post(base_url, route, "CONSTRAINT?", **fields))) == spec


ERRORS = [
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "w"}}},
     "response_format.json_schema.schema", ["is required"]),
    ({"response_format": {"type": "yaml"}}, "response_format.type", ['"yaml"']),
    ({"structured_outputs": {"regex": "a", "choice": ["a"]}}, "structured_outputs.choice",
     ["'structured_outputs.regex' and 'structured_outputs.choice'"]),
    ({"structured_outputs": {}}, "structured_outputs", ["must hold one of"]),
    ({"response_format": {"type": "json_schema", "json_schema": {"name": "w", "schema": SCHEMA}},
      "guided_regex": "[0-9]+"}, "guided_regex", ["'response_format.json_schema.schema' and 'guided_regex'"]),
    ({"guided_json": SCHEMA, "guided_choice": ["a"]}, "guided_choice", ["'guided_json' and 'guided_choice'"]),
    ({"grammar": 'root ::= "a"', "json_schema": SCHEMA}, "json_schema", ["'grammar' and 'json_schema'"]),
    ({"guided_whitespace_pattern": " "}, "guided_whitespace_pattern", ["not supported"]),
    ({"guided_decoding_backend": "my-backend"}, "guided_decoding_backend", ["not supported"]),
    ({"guided_choice": []}, "guided_choice", ["at least one"]),
    ({"use_beam_search": True, "n": 2, "guided_regex": "a"}, "use_beam_search", ["guided_regex"]),
]


@pytest.mark.parametrize("route", ["completions", "chat/completions"])
@pytest.mark.parametrize("fields, param, words", ERRORS)
def test_bad_constraints_are_a_400_naming_the_field(base_url, route, fields, param, words):
    assert_400(post(base_url, route, "hi", **fields), param, words)


@pytest.mark.parametrize("route", ["completions", "chat/completions"])
def test_a_spec_the_compiler_refuses_is_a_400_with_its_words(base_url, fake_only, route):
    r = post(base_url, route, "hi", guided_regex="ab REFUSE_CONSTRAINT")
    assert_400(r, "guided_regex", ["guided_regex: regex at position 3: the fake compiler refuses"])


@pytest.fixture(scope="module")
def long_url():
    """A fake server with room for the "CONSTRAINT?" answer of a long schema."""
    if REAL:
        pytest.skip("needs the fake engine's scripted output (stories260K cannot produce it)")
    proc = launch(extra_args=["--max-model-len", 4096])
    yield proc.url
    assert proc.stop() == 0, proc.output()


def sdk(base_url):
    return openai.OpenAI(base_url=base_url + "/v1", api_key=API_KEY, max_retries=0, timeout=60)


def stream_calls(client, **kwargs):
    """The tool calls of a streamed chat, accumulated by index, and its finish reason."""
    calls, finish, content = {}, None, ""
    for chunk in client.chat.completions.create(stream=True, **kwargs):
        if not chunk.choices:
            continue
        choice = chunk.choices[0]
        content += choice.delta.content or ""
        for t in choice.delta.tool_calls or []:
            call = calls.setdefault(t.index, {"id": None, "name": None, "arguments": ""})
            if t.id:
                assert call["id"] is None, "a call is announced once"
                call["id"], call["name"] = t.id, t.function.name
            call["arguments"] += t.function.arguments or ""
        finish = choice.finish_reason or finish
    return [calls[i] for i in sorted(calls)], finish, content


def test_tool_choice_required(base_url, long_url):
    client = sdk(base_url)
    said = json.dumps([{"name": "get_weather", "parameters": {"city": "Paris"}}, {"name": "get_time", "parameters": {}}])
    kwargs = dict(model=MODEL, messages=[{"role": "user", "content": "SAY: " + said}], tools=TOOLS,
                  tool_choice="required", max_tokens=200)
    r = client.chat.completions.create(**kwargs)
    choice = r.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content is None
    assert [(c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls] == [
        ("get_weather", {"city": "Paris"}), ("get_time", {})]
    calls, finish, content = stream_calls(client, **kwargs)
    assert finish == "tool_calls" and content == ""
    assert [(c["name"], c["arguments"]) for c in calls] == [
        (c.function.name, c.function.arguments) for c in choice.message.tool_calls]
    # The schema that reached the engine: an array of {name, parameters} over the tools.
    kwargs["messages"] = [{"role": "user", "content": "CONSTRAINT?"}]
    kwargs["parallel_tool_calls"] = False
    del kwargs["max_tokens"]  # the rest of the context: the schema is long
    spec = json.loads(sdk(long_url).chat.completions.create(**kwargs).choices[0].message.content)
    schema = json.loads(spec["text"])
    assert schema["type"] == "array" and schema["minItems"] == 1 and schema["maxItems"] == 1
    names = [item["properties"]["name"]["enum"] for item in schema["items"]["anyOf"]]
    assert names == [["get_weather"], ["get_time"]]
    assert schema["items"]["anyOf"][0]["properties"]["parameters"] == SCHEMA


def test_named_tool_choice(base_url, fake_only):
    client = sdk(base_url)
    kwargs = dict(model=MODEL, messages=[{"role": "user", "content": 'SAY: {"city": "Oslo"}'}], tools=TOOLS,
                  tool_choice={"type": "function", "function": {"name": "get_weather"}}, max_tokens=200)
    choice = client.chat.completions.create(**kwargs).choices[0]
    assert choice.finish_reason == "stop" and choice.message.content is None
    assert len(choice.message.tool_calls) == 1
    assert choice.message.tool_calls[0].function.name == "get_weather"
    assert json.loads(choice.message.tool_calls[0].function.arguments) == {"city": "Oslo"}
    calls, finish, _ = stream_calls(client, **kwargs)
    assert finish == "stop" and len(calls) == 1
    assert (calls[0]["name"], calls[0]["arguments"]) == ("get_weather", choice.message.tool_calls[0].function.arguments)
    kwargs["messages"] = [{"role": "user", "content": "CONSTRAINT?"}]
    spec = json.loads(json.loads(client.chat.completions.create(**kwargs).choices[0].message.tool_calls[0]
                                 .function.arguments)["text"])
    assert spec == SCHEMA


def test_tool_choice_with_another_constraint_is_a_400(base_url):
    r = post(base_url, "chat/completions", "hi", tools=TOOLS, tool_choice="required",
             guided_json=SCHEMA)
    assert_400(r, "tool_choice", ["'guided_json' and 'tool_choice'"])


class Weather(pydantic.BaseModel):
    city: str
    degrees: int


def test_sdk_parse_with_a_pydantic_model(base_url, long_url):
    client = sdk(base_url)
    r = client.beta.chat.completions.parse(
        model=MODEL, messages=[{"role": "user", "content": 'SAY: {"city": "Rome", "degrees": 21}'}],
        response_format=Weather, max_tokens=200)
    assert r.choices[0].message.parsed == Weather(city="Rome", degrees=21)
    # What the SDK sent reached the engine as the model's JSON Schema (the
    # answer is the spec, not a Weather: read it raw).
    raw = sdk(long_url).beta.chat.completions.with_raw_response.parse(
        model=MODEL, messages=[{"role": "user", "content": "CONSTRAINT?"}], response_format=Weather)
    spec = json.loads(json.loads(raw.text)["choices"][0]["message"]["content"])
    assert spec["kind"] == "json_schema"
    schema = json.loads(spec["text"])
    assert schema["properties"].keys() == {"city", "degrees"} and schema["additionalProperties"] is False
